"""`reportctl`: manage API keys (directly in the database) and submit/inspect jobs (over the API).

API commands read REPORTCTL_API_URL (default http://127.0.0.1:8000) and REPORTCTL_API_KEY.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, parse_param, print_response
from app.cli.fairshare import tenants, types
from app.cli.schedules import schedules
from app.cli.submit import DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, submit_file

cli = typer.Typer(help="report-orchestrator command line", no_args_is_help=True)
keys = typer.Typer(help="API keys (talks to the database in DATABASE_URL)", no_args_is_help=True)
cli.add_typer(keys, name="keys")
cli.add_typer(schedules, name="schedules")
cli.add_typer(tenants, name="tenants")
cli.add_typer(types, name="types")


# The database commands import the app's database layer when they run: an API command starts without it
# (SQLAlchemy and the models are most of reportctl's start-up time).


def _run_db(coro: Any) -> Any:
    from app.core.db import dispose_engine

    async def wrapped() -> Any:
        try:
            return await coro
        finally:
            await dispose_engine()

    return asyncio.run(wrapped())


@keys.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant the key belongs to")],
    scopes: Annotated[
        str, typer.Option(help="Comma-separated: jobs:read,jobs:write,admin")
    ] = "jobs:read,jobs:write",
    name: Annotated[str | None, typer.Option(help="A label for the key")] = None,
) -> None:
    """Create a key and print it once (only its hash is stored)."""
    from app.auth.service import create_api_key
    from app.core.errors import ValidationFailed

    try:
        key, raw = _run_db(create_api_key(tenant, [s.strip() for s in scopes.split(",") if s.strip()], name))
    except ValidationFailed as exc:
        typer.echo(f"error: {exc.detail} {exc.errors}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"created key {key.id} for tenant {key.tenant} with scopes {key.scopes}", err=True)
    typer.echo(raw)


@keys.command("list")
def keys_list(tenant: Annotated[str | None, typer.Option(help="Only this tenant")] = None) -> None:
    """List keys (never their secrets)."""
    from app.auth.service import list_api_keys
    from app.core.tenancy import EVERY_TENANT, TenantScope

    for key in _run_db(list_api_keys(TenantScope.only(tenant) if tenant else EVERY_TENANT)):
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        typer.echo(
            f"{key.id}  {key.prefix}…  tenant={key.tenant}  scopes={key.scopes}  {state}  {key.name or ''}"
        )


@keys.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="Key id or its printed prefix")]) -> None:
    """Revoke a key; API replicas refuse it within API_KEY_CACHE_TTL_S."""
    from app.auth.service import revoke_api_key

    if not _run_db(revoke_api_key(key_id)):
        typer.echo("no active key with that id or prefix", err=True)
        raise typer.Exit(1)
    typer.echo("revoked")


@cli.command()
def submit(
    report_type: Annotated[str | None, typer.Argument(help="e.g. demo.csv")] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="k=v (v parsed as JSON if it can be)")
    ] = None,
    run_at: Annotated[str | None, typer.Option(help="ISO 8601 start time")] = None,
    priority: Annotated[
        int | None, typer.Option(min=0, max=9, help="0–9, higher first (default: the type's, else 5)")
    ] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Idempotency-Key header")] = None,
    from_file: Annotated[
        Path | None,
        typer.Option("--from-file", help="JSON lines, one POST /v1/jobs/batch item each", dir_okay=False),
    ] = None,
    batch_size: Annotated[
        int, typer.Option(min=1, max=MAX_BATCH_SIZE, help="Items per batch with --from-file")
    ] = DEFAULT_BATCH_SIZE,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Submit a job and print it; or, with --from-file, every line's job in batches, printing
    `line<TAB>status<TAB>job id or why not` per line (exit 1 if any line was refused)."""
    if from_file is not None:
        if report_type or param or run_at or idempotency_key or priority is not None:
            raise typer.BadParameter("--from-file takes the jobs from the file alone")
        with api_client(api_url, api_key) as client:
            refused = submit_file(client, from_file, batch_size, typer.echo)
        if refused:
            typer.echo(f"{refused} line(s) refused", err=True)
            raise typer.Exit(1)
        return
    if not report_type:
        raise typer.BadParameter("give a REPORT_TYPE, or --from-file")
    body: dict[str, Any] = {"report_type": report_type, "params": dict(parse_param(p) for p in param or [])}
    if run_at:
        body["run_at"] = run_at
    if priority is not None:
        body["priority"] = priority
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    with api_client(api_url, api_key) as client:
        print_response(client.post("/v1/jobs", json=body, headers=headers))


@cli.command()
def status(
    job_id: str,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job is terminal")] = False,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Print a job; with --wait, long-poll until it is done, dead or cancelled."""
    with api_client(api_url, api_key) as client:
        while True:
            resp = client.get(f"/v1/jobs/{job_id}", params={"wait": 30} if wait else None)
            if not wait or resp.status_code != 200 or resp.json()["status"] in ("done", "dead", "cancelled"):
                break
        print_response(resp)


@cli.command()
def replay(job_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = "") -> None:
    """Replay a dead or cancelled job (attempts reset, replay_count + 1)."""
    with api_client(api_url, api_key) as client:
        print_response(client.post(f"/v1/jobs/{job_id}/replay"))


@cli.command()
def cancel(job_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = "") -> None:
    """Cancel a pending, scheduled, retrying or running job."""
    with api_client(api_url, api_key) as client:
        print_response(client.post(f"/v1/jobs/{job_id}/cancel"))


@cli.command("dead-letters")
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


@cli.command("replay-dead")
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


@cli.command()
def resolve(
    letter_id: Annotated[str, typer.Argument(help="Dead letter id (`reportctl dead-letters` shows it)")],
    reason: Annotated[str, typer.Option("--reason", help="What you did by hand instead of a replay")],
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Resolve a dead letter by hand: archived with who and why; jobs waiting on its ordering key proceed."""
    with api_client(api_url, api_key) as client:
        print_response(client.post(f"/v1/dead-letters/{letter_id}/resolve", json={"reason": reason}))


WORKER_COLUMNS = ("NAME", "KIND", "VERSION", "STARTED", "CONCURRENCY", "RUNNING", "HEARTBEAT_AGE_S", "STATE")


def _age_s(stamp: str, now: datetime) -> str:
    return f"{(now - datetime.fromisoformat(stamp.replace('Z', '+00:00'))).total_seconds():.1f}"


@cli.command("workers")
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


def main() -> None:
    try:
        cli()
    except KeyboardInterrupt:
        sys.exit(130)
