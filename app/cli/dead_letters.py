"""`reportctl dead-letters | replay-dead | resolve`: list dead letters, replay them in bulk, or resolve one
by hand, over the API."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, print_response


def dead_letters_cmd(
    include_archived: Annotated[bool, typer.Option("--include-archived")] = False,
    report_type: Annotated[str | None, typer.Option(help="Only this report type")] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """List dead letters, newest first."""
    params: dict[str, Any] = {"limit": limit, "include_archived": include_archived}
    if report_type:
        params["report_type"] = report_type
    with api_client(api_url, api_key) as client:
        resp = client.get("/v1/dead-letters", params=params)
    if resp.status_code != 200:
        print_response(resp)
    for item in resp.json()["items"]:
        err = item["error"] or {}
        flags = " archived" if item["archived_at"] else ""
        flags += " replayed" if item["replayed_at"] else ""
        flags += " resolved" if item.get("resolved_at") else ""
        typer.echo(
            f"{item['created_at']}  {item['job_id']}  letter={item['id']}  {item['report_type']}  "
            f"tenant={item['tenant']}  "
            f"attempts={item['attempts']}  alert={item['alert']['status']}{flags}  "
            f"{err.get('type', '')}: {str(err.get('message', ''))[:80]}"
        )


def replay_dead(
    job_id: Annotated[list[str] | None, typer.Option("--job-id", help="Repeat for several")] = None,
    report_type: Annotated[str | None, typer.Option(help="Every unreplayed dead letter of this type")] = None,
    since: Annotated[str | None, typer.Option(help="…created at or after this ISO 8601 time")] = None,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Bulk replay (admin key): by job ids, or by report type and/or time."""
    body: dict[str, Any] = {"job_ids": job_id} if job_id else {}
    if report_type:
        body["report_type"] = report_type
    if since:
        body["since"] = since
    with api_client(api_url, api_key) as client:
        print_response(client.post("/v1/dead-letters/replay", json=body))


def resolve(
    letter_id: Annotated[str, typer.Argument(help="Dead letter id (`reportctl dead-letters` shows it)")],
    reason: Annotated[str, typer.Option("--reason", help="What you did by hand instead of a replay")],
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Resolve a dead letter by hand: archived with who and why; jobs waiting on its ordering key proceed."""
    with api_client(api_url, api_key) as client:
        print_response(client.post(f"/v1/dead-letters/{letter_id}/resolve", json={"reason": reason}))
