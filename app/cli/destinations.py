"""`reportctl destinations …` and `reportctl deliveries`: a tenant's destinations (create, list, show,
delete) and where a job's report went (with a resend), over the API. Secrets come from the environment.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, parse_param, print_response

destinations = typer.Typer(help="Where reports and notices go (over the API)", no_args_is_help=True)
LISTS = ("at_mobiles", "mentioned_mobiles", "recipients")


@destinations.command("create")
def destinations_create(
    kind: Annotated[str, typer.Option(help="dingtalk | feishu | wecom | email | webhook")],
    name: Annotated[str, typer.Option(help="Unique per tenant; deliver_to and notify_to name it")],
    field: Annotated[
        list[str] | None,
        typer.Option("--field", "-f", help="k=v, e.g. host=smtp.example.com, recipients=a@x.com,b@x.com"),
    ] = None,
    secret_env: Annotated[
        list[str] | None,
        typer.Option(
            "--secret-env", help="k=ENV_VAR: a secret (url, secret, password) read from the environment"
        ),
    ] = None,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Create a destination; secrets never on the command line (`--secret-env url=DINGTALK_URL`)."""
    body: dict[str, Any] = {"kind": kind, "name": name}
    for raw in field or []:
        key, value = parse_param(raw)
        body[key] = [v.strip() for v in str(value).split(",") if v.strip()] if key in LISTS else value
    for raw in secret_env or []:
        key, _, env_name = raw.partition("=")
        if env_name not in os.environ:
            typer.echo(f"error: {env_name or raw!r} is not set in the environment", err=True)
            raise typer.Exit(2)
        body[key] = os.environ[env_name]
    with api_client(api_url, api_key) as client:
        print_response(client.post("/v1/destinations", json=body))


@destinations.command("list")
def destinations_list(api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = "") -> None:
    """List destinations (their secrets are never shown)."""
    with api_client(api_url, api_key) as client:
        resp = client.get("/v1/destinations", params={"limit": 200})
    if resp.status_code != 200:
        print_response(resp)
    for item in resp.json()["items"]:
        where = item["url_host"] or item["options"].get("host", "")
        typer.echo(
            f"{item['id']}  {item['name']}  {item['kind']}  {where}  secrets={','.join(item['secrets_set'])}"
        )


@destinations.command("show")
def destinations_show(
    destination_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = ""
) -> None:
    with api_client(api_url, api_key) as client:
        print_response(client.get(f"/v1/destinations/{destination_id}"))


@destinations.command("delete")
def destinations_delete(
    destination_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = ""
) -> None:
    """Delete a destination (deliveries not yet sent to it fail)."""
    with api_client(api_url, api_key) as client:
        print_response(client.delete(f"/v1/destinations/{destination_id}"))


def deliveries_cmd(
    job_id: Annotated[str, typer.Argument(help="The job whose deliveries to list")],
    resend: Annotated[str | None, typer.Option(help="Send this delivery (id) once more")] = None,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Where a job's report and notices went (state, tries, last error), or resend one."""
    with api_client(api_url, api_key) as client:
        if resend:
            print_response(client.post(f"/v1/jobs/{job_id}/deliveries/{resend}/resend"))
            return
        resp = client.get(f"/v1/jobs/{job_id}/deliveries")
    if resp.status_code != 200:
        print_response(resp)
    for d in resp.json()["items"]:
        typer.echo(
            f"{d['id']}  {d['destination']}  {d['kind']}  {d['status']}  tries={d['tries']}  "
            f"sent={d['sent_at'] or '-'}  {d['last_error'] or ''}"
        )
