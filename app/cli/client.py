"""What every `reportctl` command that talks to the API shares: its --api-url/--api-key options, the HTTP
client, and printing an answer (a 4xx/5xx exits 1).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
import typer

ApiUrl = Annotated[str, typer.Option("--api-url", envvar="REPORTCTL_API_URL")]
ApiKey = Annotated[str, typer.Option("--api-key", envvar="REPORTCTL_API_KEY", show_default=False)]


def api_client(api_url: str, api_key: str) -> httpx.Client:
    return httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=40)


def print_response(resp: httpx.Response) -> None:
    try:
        typer.echo(json.dumps(resp.json(), indent=2, ensure_ascii=False))
    except ValueError:
        typer.echo(resp.text)
    if resp.status_code >= 400:
        raise typer.Exit(1)


def parse_param(item: str) -> tuple[str, Any]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"expected k=v, got {item!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value
