"""Driving the console in a real Chromium (Debian's `chromium`, through Playwright's `executable_path`;
nothing is downloaded): launching it, signing in, waiting for the in-place refresh, screenshots, and API
keys made in bulk for an e2e `Stack`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from playwright.async_api import Browser, BrowserContext, Dialog, Page, Playwright

from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.keys import bearer
from tests.utils.stack import PYTHON, ROOT, Stack

#: Debian's package; CHROMIUM=/path/to/chrome overrides it.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 800}
#: Where every test writes the pages it visited (git-ignored, like the rest of var/).
SCREENSHOT_DIR = Path(os.environ.get("BROWSER_SCREENSHOT_DIR", ROOT / "var" / "screenshots"))
#: The docs' copies (checked in, shown in docs/how-to/console.md); written with UPDATE_README_SCREENSHOTS=1.
README_SCREENSHOT_DIR = ROOT / "docs" / "screenshots"
README_PAGES = ("login", "overview", "jobs", "job", "dead-letters", "workers", "alerts")
#: Playwright's wait for any one element or navigation (the stack is local: a few seconds is generous).
STEP_TIMEOUT_MS = 15_000


@dataclass
class Console:
    """A running stack for the browser tests, with its API keys by name and the fake DingTalk it alerts."""

    stack: Stack
    keys: dict[str, str]
    dingtalk: FakeDingTalk

    @property
    def url(self) -> str:
        return self.stack.api_url

    def api(self, key_name: str) -> httpx.AsyncClient:
        """An API client signed with one of KEYS."""
        return httpx.AsyncClient(
            base_url=self.url, headers=bearer(self.keys[key_name]), timeout=15.0, trust_env=False
        )


class ChromiumMissing(RuntimeError):
    pass


def chromium_path() -> str:
    """The Chromium binary, or a clear error (the browser tests fail, never skip, without it)."""
    found = shutil.which(CHROMIUM) if not os.path.isabs(CHROMIUM) else CHROMIUM
    if not found or not os.access(found, os.X_OK):
        raise ChromiumMissing(
            f"Chromium not found at {CHROMIUM!r}: the browser tests need Debian's `chromium` package "
            "(`make system-deps` installs it; `make test` runs that step) or CHROMIUM=/path/to/chrome."
        )
    return found


async def launch(playwright: Playwright) -> Browser:
    args = ["--disable-dev-shm-usage", "--disable-gpu"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to sandbox as root (CI containers)
    return await playwright.chromium.launch(executable_path=chromium_path(), args=args)


async def new_context(browser: Browser, base_url: str, *, javascript: bool = True) -> BrowserContext:
    context = await browser.new_context(
        base_url=base_url, viewport=VIEWPORT, java_script_enabled=javascript, device_scale_factor=1
    )
    context.set_default_timeout(STEP_TIMEOUT_MS)
    return context


class Dialogs:
    """Every dialog a page opens. The console's own confirm() questions are accepted; `strict` pages
    (the XSS test) record them so the test can fail on any."""

    def __init__(self, page: Page, accept: bool = True) -> None:
        self.seen: list[str] = []
        self.accept = accept
        page.on("dialog", self._on_dialog)

    async def _on_dialog(self, dialog: Dialog) -> None:
        self.seen.append(f"{dialog.type}: {dialog.message}")
        if self.accept:
            await dialog.accept()
        else:
            await dialog.dismiss()


async def sign_in(page: Page, key: str, target: str = "/ui", screenshot: str | None = None) -> None:
    """Sign in through the login form (works with JavaScript off too) and land on `target`."""
    await page.goto(f"/ui/login?next={quote(target)}")
    if screenshot:
        await shoot(page, screenshot)
    await page.locator("input[data-testid=api-key]").fill(key)
    async with page.expect_navigation():
        await page.locator("[data-testid=sign-in]").click()
    assert page.url.split("?", 1)[0].endswith(target.split("?", 1)[0]), f"signed in, but landed on {page.url}"


async def refreshes(page: Page, count: int = 1, timeout_s: float = 15) -> None:
    """Wait until console.js has re-rendered the page's regions `count` more times."""
    start = await page.evaluate("document.body.dataset.refreshedAt || ''")
    seen, last = 0, start
    deadline = time.monotonic() + timeout_s
    while seen < count:
        handle = await page.wait_for_function(
            "last => (document.body.dataset.refreshedAt || '') !== last",
            arg=last,
            timeout=max(1.0, deadline - time.monotonic()) * 1000,
        )
        await handle.dispose()
        last = await page.evaluate("document.body.dataset.refreshedAt || ''")
        seen += 1


async def shoot(page: Page, name: str) -> Path:
    """The viewport (1280×800) as SCREENSHOT_DIR/<name>.png."""
    os.makedirs(SCREENSHOT_DIR, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    await page.screenshot(path=str(path), type="png", full_page=False, animations="disabled")
    return path


def update_readme_screenshots() -> bool:
    return os.environ.get("UPDATE_README_SCREENSHOTS", "") not in ("", "0", "false")


def copy_to_readme(names: tuple[str, ...] = README_PAGES) -> list[Path]:
    """Copy SCREENSHOT_DIR/<name>.png to docs/screenshots/ (the docs', checked in)."""
    README_SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in names:
        source = SCREENSHOT_DIR / f"{name}.png"
        assert source.exists(), f"no screenshot {source}"
        target = README_SCREENSHOT_DIR / f"{name}.png"
        shutil.copyfile(source, target)
        copied.append(target)
    return copied


# ---- keys ------------------------------------------------------------------------------------------------

_CREATE_KEYS = """
import asyncio, json, sys
from app.auth.service import create_api_key

async def main():
    out = {}
    for name, (tenant, scopes) in json.loads(sys.argv[1]).items():
        _, raw = await create_api_key(tenant, scopes.split(","), f"browser-{name}")
        out[name] = raw
    print(json.dumps(out))

asyncio.run(main())
"""


def create_keys(stack: Stack, specs: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """Every key of `specs` ({name: (tenant, scopes)}) in one process (`reportctl keys create` costs a
    Python start-up each); returns {name: raw key}. Each key is named `browser-<name>`."""
    done = subprocess.run(
        [PYTHON, "-c", _CREATE_KEYS, json.dumps(specs)],
        cwd=ROOT,
        env=stack.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"creating keys failed:\n{done.stdout}\n{done.stderr}"
    keys: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: str(raw) for name, raw in keys.items()}
