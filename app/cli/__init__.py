"""`reportctl`: manage API keys (directly in the database) and submit/inspect jobs (over the API).
API commands read REPORTCTL_API_URL (default http://127.0.0.1:8000) and REPORTCTL_API_KEY.
"""

from __future__ import annotations

import sys

import typer

from app.cli import dead_letters, fleet, jobs, report_types, submit
from app.cli.destinations import deliveries_cmd, destinations
from app.cli.fairshare import tenants, types
from app.cli.keys import keys
from app.cli.schedules import schedules

__all__ = ["cli", "main"]

cli = typer.Typer(help="report-orchestrator command line", no_args_is_help=True)
cli.add_typer(keys, name="keys")
cli.add_typer(schedules, name="schedules")
cli.add_typer(destinations, name="destinations")
cli.add_typer(tenants, name="tenants")
cli.add_typer(types, name="types")
types.command("check")(report_types.check)
# The top-level commands, in the order `reportctl --help` lists them.
cli.command()(submit.submit)
cli.command()(jobs.status)
cli.command()(jobs.replay)
cli.command()(jobs.cancel)
cli.command("dead-letters")(dead_letters.dead_letters_cmd)
cli.command("replay-dead")(dead_letters.replay_dead)
cli.command()(dead_letters.resolve)
cli.command("deliveries")(deliveries_cmd)
cli.command("workers")(fleet.workers_cmd)


def main() -> None:
    try:
        cli()
    except KeyboardInterrupt:
        sys.exit(130)
