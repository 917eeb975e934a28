"""`reportctl types check FILE`: check a report-types file (REPORT_TYPES_FILE) before deploying it, e.g. in
CI; no API call: it loads the file as every process would, with this machine's settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.reports.declared.check import check_file


def check(file: Annotated[Path, typer.Argument(help="The report-types file (TOML)")]) -> None:
    """Check a report-types file as the processes load it: prints `file:line: reason` and exits 1 if it
    would be refused (DATA_SOURCES and REPORT_MODULES as the processes have them)."""
    status, message = check_file(file)
    typer.echo(message, err=bool(status))
    raise typer.Exit(status)
