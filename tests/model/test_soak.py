"""The soak, as a test: real processes under seeded faults for SOAK_MINUTES (1 by default here; `make soak`
runs 10), then every invariant of tests/utils/soak_checks.py over the API's database.

Its own MariaDB and Redis on free ports (the faults restart and flush them), loopback only.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.utils.soak import DRAIN_MAX_S, Soak, SoakPlan
from tests.utils.stack import TABLES, Servers, Stack, private_servers

MINUTES = float(os.environ.get("SOAK_MINUTES", "1"))
SEED = int(os.environ.get("SOAK_SEED", "26"))
LOGS_DIR = Path(__file__).resolve().parents[2] / "var" / "soak"  # a failed soak's process logs are kept here


@pytest.fixture(scope="module")
def soak_servers() -> Iterator[Servers]:
    with private_servers() as servers:
        yield servers


@pytest.fixture
def soak_stack(soak_servers: Servers, tmp_path: Path) -> Iterator[Stack]:
    soak_servers.ensure_running()
    soak_servers.db.sql("; ".join(f"DELETE FROM {t}" for t in TABLES), database=soak_servers.db.database)
    soak_servers.redis.flushall()
    stack = Stack(soak_servers, tmp_path)
    try:
        stack.api_key = stack.create_key()
        yield stack
    finally:
        stack.cleanup()


@pytest.mark.timeout(int(MINUTES * 60 + DRAIN_MAX_S) + 600)
async def test_jobs_survive_a_soak_of_crashes_flushes_outages_and_pauses(soak_stack: Stack) -> None:
    soak = Soak(soak_stack, SoakPlan(seconds=MINUTES * 60, seed=SEED))
    findings = await soak.run()
    problems = findings.problems[:25] + [f"... and {len(findings.problems) - 25} more"] * (
        len(findings.problems) > 25
    )
    report = "\n".join(["problems:", *problems, "notes:", *findings.notes[:25]])
    print(report)
    LOGS_DIR.mkdir(parents=True, exist_ok=True)  # the last run's report, passed or not
    (LOGS_DIR / f"last-report-seed{SEED}-{MINUTES:g}min.txt").write_text(report, encoding="utf-8")
    if findings.problems:
        kept = LOGS_DIR / f"seed{SEED}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
        shutil.copytree(soak_stack.logs_dir, kept)
        (kept / "report.txt").write_text(report, encoding="utf-8")
        pytest.fail(f"{report}\n\nprocess logs kept in {kept}\n{soak_stack.log_report(15)}")
