"""End-to-end fixtures: the real api, workers, dead-letter consumer and scheduler as separate processes,
against a private MariaDB and Redis that the tests are free to kill, restart and flush.

Each test module gets its own servers (never the session ones of tests/conftest.py, never 3306/6379).
Each test gets clean tables, an empty Redis, a fresh API key and a `Stack` that starts processes, logs
each one to its own file and stops every one of them by PID at the end. A failing test's report carries
the tails of those logs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.utils.stack import TABLES, Servers, Stack, private_servers


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    stack: Stack | None = getattr(item, "_e2e_stack", None)
    if stack is not None and report.failed:
        report.sections.append((f"e2e process logs ({report.when})", stack.log_report()))


@pytest.fixture(scope="module")
def e2e_servers() -> Iterator[Servers]:
    with private_servers() as servers:
        yield servers


@pytest.fixture
def stack(e2e_servers: Servers, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stack]:
    e2e_servers.ensure_running()
    e2e_servers.db.sql(
        "; ".join(f"DELETE FROM {table}" for table in TABLES), database=e2e_servers.db.database
    )
    e2e_servers.redis.flushall()
    st = Stack(e2e_servers, tmp_path)
    request.node._e2e_stack = st
    try:
        st.api_key = st.create_key()
        yield st
    finally:
        st.cleanup()
