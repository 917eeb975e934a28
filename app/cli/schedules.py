"""`reportctl schedules …`: recurring report schedules, over the API (create, list, show, pause, resume,
trigger, delete, runs).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, parse_param, print_response

schedules = typer.Typer(help="Recurring report schedules (over the API)", no_args_is_help=True)


@schedules.command("create")
def schedules_create(
    name: Annotated[str, typer.Option(help="A slug, unique per tenant")],
    report_type: Annotated[str, typer.Option(help="e.g. demo.csv")],
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="k=v (v parsed as JSON if it can be)")
    ] = None,
    cron: Annotated[str | None, typer.Option(help='5 fields, or 6 with seconds first: "0 8 * * 1-5"')] = None,
    interval_s: Annotated[float | None, typer.Option(help="Fire every N seconds instead of a cron")] = None,
    timezone: Annotated[str, typer.Option(help="IANA zone the cron is read in")] = "UTC",
    missed_runs: Annotated[str, typer.Option(help="skip | run_once | run_all")] = "run_once",
    overlap: Annotated[str, typer.Option(help="skip | queue | allow")] = "skip",
    exclude_date: Annotated[
        list[str] | None, typer.Option("--exclude-date", help="YYYY-MM-DD that never fires; repeat")
    ] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused")] = False,
    deliver_to: Annotated[
        list[str] | None,
        typer.Option("--deliver-to", help="Each fire's report goes here (name or id); repeat"),
    ] = None,
    notify_to: Annotated[
        list[str] | None, typer.Option("--notify-to", help="Owners told of dead, late, missed fires; repeat")
    ] = None,
    deadline: Annotated[
        str | None, typer.Option(help="HH:MM local: a fire's job not done by then is late")
    ] = None,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Create a schedule (exactly one of --cron and --interval-s) and print it with its next fires."""
    body: dict[str, Any] = {
        "name": name,
        "report_type": report_type,
        "params": dict(parse_param(p) for p in param or []),
        "cron": cron,
        "interval_s": interval_s,
        "timezone": timezone,
        "missed_runs": missed_runs,
        "overlap": overlap,
        "exclude_dates": exclude_date or [],
        "paused": paused,
        "deliver_to": [{"destination": d} for d in deliver_to or []],
        "notify_to": notify_to or [],
        "deadline": deadline,
    }
    with api_client(api_url, api_key) as client:
        print_response(client.post("/v1/schedules", json=body))


@schedules.command("list")
def schedules_list(
    report_type: Annotated[str | None, typer.Option(help="Only this report type")] = None,
    paused: Annotated[
        bool | None, typer.Option("--paused/--active", help="Only paused / active ones")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """One line per schedule: id, name, cron or interval, zone, paused, next fire (UTC)."""
    params: dict[str, Any] = {"limit": limit}
    if report_type:
        params["report_type"] = report_type
    if paused is not None:
        params["paused"] = str(paused).lower()
    with api_client(api_url, api_key) as client:
        resp = client.get("/v1/schedules", params=params)
    if resp.status_code != 200:
        print_response(resp)
    for s in resp.json()["items"]:
        when = s["cron"] or f"every {s['interval_s']:g}s"
        nxt = s["next_fire_times"][0]["utc"] if s["next_fire_times"] else "-"
        state = "paused" if s["paused"] else "active"
        typer.echo(f"{s['id']}  {s['name']}  {when}  {s['timezone']}  {state}  next {nxt}")


def _schedule_call(method: str, path: str, api_url: str, api_key: str) -> None:
    with api_client(api_url, api_key) as client:
        resp = client.request(method, path)
    if resp.status_code == 204:
        typer.echo("deleted")
        return
    print_response(resp)


@schedules.command("show")
def schedules_show(schedule_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = "") -> None:
    """Print a schedule with its next 5 fire times (UTC and local)."""
    _schedule_call("GET", f"/v1/schedules/{schedule_id}", api_url, api_key)


@schedules.command("pause")
def schedules_pause(
    schedule_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = ""
) -> None:
    """Pause: nothing fires or is recorded until resumed."""
    _schedule_call("POST", f"/v1/schedules/{schedule_id}/pause", api_url, api_key)


@schedules.command("resume")
def schedules_resume(
    schedule_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = ""
) -> None:
    """Resume at the next future fire (the paused period is not caught up)."""
    _schedule_call("POST", f"/v1/schedules/{schedule_id}/resume", api_url, api_key)


@schedules.command("trigger")
def schedules_trigger(
    schedule_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = ""
) -> None:
    """Run the schedule once now (a manual run); prints the run with its job id."""
    _schedule_call("POST", f"/v1/schedules/{schedule_id}/trigger", api_url, api_key)


@schedules.command("delete")
def schedules_delete(
    schedule_id: str, api_url: ApiUrl = "http://127.0.0.1:8000", api_key: ApiKey = ""
) -> None:
    """Delete the schedule and its run records; the jobs it made stay."""
    _schedule_call("DELETE", f"/v1/schedules/{schedule_id}", api_url, api_key)


@schedules.command("runs")
def schedules_runs(
    schedule_id: str,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """What each fire did, newest first: fire time (local), result, reason, job id."""
    with api_client(api_url, api_key) as client:
        resp = client.get(f"/v1/schedules/{schedule_id}/runs", params={"limit": limit})
    if resp.status_code != 200:
        print_response(resp)
    for r in resp.json()["items"]:
        what = r["result"] + (f"/{r['reason']}" if r["reason"] else "") + (" (manual)" if r["manual"] else "")
        typer.echo(f"{r['scheduled_for']}  {what}  {r['job_id'] or '-'}")
