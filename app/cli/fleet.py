"""`reportctl workers [--all]`: the worker registry over the API (admin key) as a table, one row per worker,
dead-letter consumer or scheduler process."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, print_response

WORKER_COLUMNS = ("NAME", "KIND", "VERSION", "STARTED", "CONCURRENCY", "RUNNING", "HEARTBEAT_AGE_S", "STATE")


def _age_s(stamp: str, now: datetime) -> str:
    return f"{(now - datetime.fromisoformat(stamp.replace('Z', '+00:00'))).total_seconds():.1f}"


def workers_cmd(
    include_gone: Annotated[bool, typer.Option("--all", help="Also list processes that are gone")] = False,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """List worker, dead-letter and scheduler processes from the worker registry (admin key)."""
    with api_client(api_url, api_key) as client:
        resp = client.get("/v1/workers", params={"state": "all" if include_gone else "live"})
    if resp.status_code != 200:
        print_response(resp)
    now = datetime.now(UTC)
    rows = [
        (
            w["name"],
            w["kind"],
            w["version"],
            w["started_at"][:19].replace("T", " "),
            str(w["concurrency"]),
            str(w["jobs_running"]),
            _age_s(w["last_heartbeat_at"], now),
            w["state"],
        )
        for w in resp.json()["items"]
    ]
    widths = [max(len(cell) for cell in column) for column in zip(WORKER_COLUMNS, *rows, strict=False)]
    for row in (WORKER_COLUMNS, *rows):
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
