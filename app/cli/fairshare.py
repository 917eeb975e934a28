"""`reportctl tenants …` and `reportctl types …`: fair share over the API (admin key): tenants' weights,
running caps and pauses; report types' concurrency caps and pauses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from app.cli.client import ApiKey, ApiUrl, api_client, print_response

tenants = typer.Typer(
    help="Tenants' fair share: weight, running cap, pause (admin key)", no_args_is_help=True
)
types = typer.Typer(help="Report types' concurrency caps and pauses (admin key)", no_args_is_help=True)

TENANT_COLUMNS = ("TENANT", "WEIGHT", "MAX_RUNNING", "EFFECTIVE", "PAUSED", "RUNNING")
TYPE_COLUMNS = ("NAME", "PRIORITY", "MAX_CONCURRENCY", "SOURCE", "PAUSED", "RUNNING")
URL = "http://127.0.0.1:8000"


def _call(method: str, path: str, api_url: str, api_key: str, body: Any = None) -> None:
    with api_client(api_url, api_key) as client:
        print_response(client.request(method, path, json=body))


def _list(path: str, api_url: str, api_key: str) -> list[dict[str, Any]]:
    with api_client(api_url, api_key) as client:
        resp = client.get(path)
    if resp.status_code != 200:
        print_response(resp)
    items: list[dict[str, Any]] = resp.json()["items"]
    return items


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _table(columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    cells = [tuple(columns), *(tuple(_cell(value) for value in row) for row in rows)]
    widths = [max(len(cell) for cell in column) for column in zip(*cells, strict=True)]
    for row in cells:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


# ---- tenants ---------------------------------------------------------------------------------------------


@tenants.command("list")
def tenants_list(api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """Tenants with a policy of their own or jobs running: weight, caps (own and in force), pause, running."""
    items = _list("/v1/tenants", api_url, api_key)
    rows = [
        (t["tenant"], t["weight"], t["max_running"], t["effective_max_running"], t["paused"], t["running"])
        for t in items
    ]
    _table(TENANT_COLUMNS, rows)


@tenants.command("show")
def tenants_show(tenant: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """Print a tenant's policy (the defaults if it has none of its own)."""
    _call("GET", f"/v1/tenants/{tenant}", api_url, api_key)


@tenants.command("set-weight")
def tenants_set_weight(
    tenant: str,
    weight: Annotated[int, typer.Argument(min=1, max=1000, help="1–1000; default 1")],
    api_url: ApiUrl = URL,
    api_key: ApiKey = "",
) -> None:
    """A tenant with weight 3 gets about 3 free slots for every 1 of a weight-1 tenant (equal priorities)."""
    _call("PATCH", f"/v1/tenants/{tenant}", api_url, api_key, {"weight": weight})


@tenants.command("set-cap")
def tenants_set_cap(
    tenant: str,
    max_running: Annotated[int, typer.Argument(min=1, help="At most this many of its jobs running")],
    api_url: ApiUrl = URL,
    api_key: ApiKey = "",
) -> None:
    """Cap the tenant's running jobs across every worker (overrides TENANT_MAX_RUNNING)."""
    _call("PATCH", f"/v1/tenants/{tenant}", api_url, api_key, {"max_running": max_running})


@tenants.command("clear-cap")
def tenants_clear_cap(tenant: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """Back to TENANT_MAX_RUNNING (no cap when it is 0)."""
    _call("PATCH", f"/v1/tenants/{tenant}", api_url, api_key, {"max_running": None})


@tenants.command("pause")
def tenants_pause(tenant: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """None of the tenant's jobs starts until resumed; running ones finish."""
    _call("POST", f"/v1/tenants/{tenant}/pause", api_url, api_key)


@tenants.command("resume")
def tenants_resume(tenant: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """The tenant's waiting jobs start again as slots free."""
    _call("POST", f"/v1/tenants/{tenant}/resume", api_url, api_key)


# ---- report types ----------------------------------------------------------------------------------------


@types.command("list")
def types_list(api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """Every report type: default priority, cap and where it comes from, pause, running."""
    items = _list("/v1/fair-share/report-types", api_url, api_key)
    rows = [
        (
            t["name"],
            t["priority"],
            t["max_concurrency"]["limit"],
            t["max_concurrency"]["source"],
            t["paused"],
            t["running"],
        )
        for t in items
    ]
    _table(TYPE_COLUMNS, rows)


@types.command("show")
def types_show(name: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """Print a report type's priority, cap, pause and running count."""
    _call("GET", f"/v1/report-types/{name}/policy", api_url, api_key)


@types.command("set-cap")
def types_set_cap(
    name: str,
    max_concurrency: Annotated[int, typer.Argument(min=1, help="At most this many running at once")],
    api_url: ApiUrl = URL,
    api_key: ApiKey = "",
) -> None:
    """Cap the type's running jobs across every worker (overrides the setting and the type's own)."""
    _call("PATCH", f"/v1/report-types/{name}", api_url, api_key, {"max_concurrency": max_concurrency})


@types.command("clear-cap")
def types_clear_cap(name: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """Back to REPORT_TYPE_MAX_CONCURRENCY, else the type's declared max_concurrency, else no cap."""
    _call("PATCH", f"/v1/report-types/{name}", api_url, api_key, {"max_concurrency": None})


@types.command("pause")
def types_pause(name: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """No job of the type starts until resumed; running ones finish."""
    _call("POST", f"/v1/report-types/{name}/pause", api_url, api_key)


@types.command("resume")
def types_resume(name: str, api_url: ApiUrl = URL, api_key: ApiKey = "") -> None:
    """The type's waiting jobs start again as slots free."""
    _call("POST", f"/v1/report-types/{name}/resume", api_url, api_key)
