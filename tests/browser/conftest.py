"""Browser fixtures: one real Chromium for the session, and one e2e stack for the package (a private
MariaDB and Redis as in tests/e2e, the api, a worker, the dead-letter consumer and the scheduler as real
processes, alerts going to a fake DingTalk). Tests are isolated by tenant, each with its own keys, not by
restarting servers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from tests.e2e.conftest import pytest_runtest_makereport  # noqa: F401  (the hook)
from tests.utils.browser import Console, create_keys, launch, new_context
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.stack import Servers, Stack, private_servers

#: {name: (tenant, scopes)}; one tenant per test that needs its own jobs.
KEYS: dict[str, tuple[str, str]] = {
    "admin": ("ops", "admin"),
    "acme": ("acme", "jobs:read,jobs:write"),
    "acme-ro": ("acme", "jobs:read"),
    "globex": ("globex", "jobs:read,jobs:write"),
    "live": ("live", "jobs:read,jobs:write"),
    "attempts": ("attempts", "jobs:read,jobs:write"),
    "cancel": ("cancel", "jobs:read,jobs:write"),
    "replay": ("replay", "jobs:read,jobs:write"),
    "xss": ("mallory", "jobs:read,jobs:write"),
    "nojs": ("nojs", "jobs:read,jobs:write"),
    "order": ("order", "jobs:read,jobs:write"),
    "demo": ("northwind", "jobs:read,jobs:write"),
    "deliver": ("deliver", "jobs:read,jobs:write"),
}
#: Settings of every process on top of tests/utils/stack.py's E2E_ENV.
CONSOLE_ENV = {
    "CONSOLE_REFRESH_S": "0.5",
    "CONSOLE_SECRET": "browser-tests-console-secret",
    "REPORT_MODULES": "tests.browser.reports",
    "WORKER_HEARTBEAT_S": "1",
    "CALLBACK_ALLOWED_HOSTS": "127.0.0.1",  # the destinations' fake servers
}


@pytest.fixture(scope="package")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with private_servers() as servers:
        yield from _console(servers, tmp_path_factory)


def _console(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    dingtalk = FakeDingTalk().start()
    stack = Stack(servers, tmp_path_factory.mktemp("browser-stack"))
    stack.overrides.update(CONSOLE_ENV, DINGTALK_WEBHOOK_URL=dingtalk.url, DINGTALK_SECRET=dingtalk.secret)
    try:
        # Each start waits for its own readiness: start them side by side.
        with ThreadPoolExecutor(max_workers=5) as pool:
            started = [
                pool.submit(stack.start_api),
                pool.submit(stack.start_worker),
                pool.submit(stack.start_dead_letter),
                pool.submit(stack.start_scheduler),
            ]
            keys = pool.submit(create_keys, stack, KEYS)
            for future in started:
                future.result()
            yield Console(stack, keys.result(), dingtalk)
    finally:
        stack.cleanup()
        dingtalk.stop()


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> None:
    """A failing test's report carries the tails of the stack's process logs (tests/e2e's hook)."""
    if "console" in request.fixturenames:
        request.node._e2e_stack = request.getfixturevalue("console").stack


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await launch(playwright)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def context(browser: Browser, console: Console) -> AsyncIterator[BrowserContext]:
    ctx = await new_context(browser, console.url)
    try:
        yield ctx
    finally:
        await ctx.close()


@pytest.fixture
async def page(context: BrowserContext) -> Page:
    return await context.new_page()
