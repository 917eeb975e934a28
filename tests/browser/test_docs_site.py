"""The built manual (site/, from `make docs`, which `make test` runs before pytest) in a real Chromium, served
from 127.0.0.1: the pages render with what is generated from the code, search works, and no request leaves
loopback (no web fonts, no CDN). Skipped when site/ has not been built. With UPDATE_README_SCREENSHOTS=1 the
home and configuration pages are copied to docs/screenshots/ (docs-home.png, docs-reference.png).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.async_api import Browser, BrowserContext, Page, Route

from tests.utils.browser import copy_to_readme, new_context, shoot, update_readme_screenshots
from tests.utils.stack import ROOT

SITE = ROOT / "site"
SCREENSHOTS = ("docs-home", "docs-reference")

pytestmark = pytest.mark.skipif(
    not (SITE / "index.html").exists(),
    reason="site/ is not built: `make docs` builds it (`make test` runs it before pytest)",
)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        """No line per request on stderr."""


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    """site/ served by the standard library on a free loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@dataclass
class Requests:
    """What the pages asked for: every URL served from loopback, and every other one (aborted)."""

    local: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)

    async def route(self, route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            self.local.append(route.request.url)
            await route.continue_()
        else:
            self.outside.append(route.request.url)
            await route.abort()


@pytest.fixture
async def docs(browser: Browser, site_url: str) -> AsyncIterator[tuple[BrowserContext, Requests]]:
    context = await new_context(browser, site_url)
    requests = Requests()
    await context.route("**/*", requests.route)
    try:
        yield context, requests
    finally:
        await context.close()


async def open_page(context: BrowserContext, path: str) -> Page:
    page = await context.new_page()
    answer = await page.goto(path, wait_until="networkidle")
    assert answer is not None and answer.ok, f"{path}: {answer.status if answer else 'no answer'}"
    return page


async def test_home_and_reference_render_from_loopback_only(
    docs: tuple[BrowserContext, Requests],
) -> None:
    context, requests = docs
    home = await open_page(context, "/index.html")
    assert "report-orchestrator" in await home.title()
    assert (await home.locator("article h1").inner_text()).startswith("report-orchestrator")
    await shoot(home, "docs-home")

    reference = await open_page(context, "/reference/configuration.html")
    table = reference.locator("article table")
    assert await table.locator("code", has_text="DATABASE_URL").count() >= 1, "no generated settings table"
    assert await reference.locator("text=<!-- generated").count() == 0
    await shoot(reference, "docs-reference")

    cli = await open_page(context, "/reference/cli.html")
    assert await cli.locator("h3", has_text="reportctl submit").count() == 1, "no generated reportctl help"
    architecture = await open_page(context, "/discussions/architecture.html")
    assert await architecture.locator("pre", has_text="app.core").count() >= 1, "no generated layer diagram"

    assert requests.local, "the pages loaded nothing at all"
    assert requests.outside == [], f"requests left 127.0.0.1: {requests.outside}"
    if update_readme_screenshots():
        for path in copy_to_readme(SCREENSHOTS):
            assert path.stat().st_size < 200_000, f"{path} is too large for the docs"


async def test_search_finds_a_page_without_leaving_loopback(docs: tuple[BrowserContext, Requests]) -> None:
    context, requests = docs
    page = await open_page(context, "/index.html")
    search = page.locator("input.md-search__input")
    await search.click()
    await search.press_sequentially("idempotency", delay=20)  # the theme searches on key strokes
    results = page.locator(".md-search-result__item")
    await results.first.wait_for()
    assert await results.count() >= 1
    assert requests.outside == [], f"requests left 127.0.0.1: {requests.outside}"
