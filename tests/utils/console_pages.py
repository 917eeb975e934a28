"""Reading console pages in in-process tests: rows and `data-testid` hooks (the ones the browser tests use),
POST forms, and following an action's redirect to the flash message it left.
"""

from __future__ import annotations

import html
import re

import httpx

TAGS = re.compile(r"<[^>]+>")
#: Where text is read with a space between (cells, blocks); other tags are dropped without one.
BREAKS = re.compile(r"</(td|th|div|li|p|dd|dt)>|<br\s*/?>")


def row_ids(page: str, testid: str = "job-row") -> list[str]:
    """The `data-job-id` of every `<tr data-testid=…>` row, in page order."""
    return re.findall(rf'<tr data-testid="{testid}" data-job-id="([^"]+)"', page)


def element(page: str, testid: str) -> str | None:
    """The markup inside the first element with this `data-testid` (None if there is none)."""
    match = re.search(rf'<(\w+)\b[^>]*\bdata-testid="{re.escape(testid)}"[^>]*>(.*?)</\1>', page, re.DOTALL)
    return match.group(2) if match else None


def text_of(page: str, testid: str) -> str:
    """The text of that element: tags dropped, entities decoded, white space collapsed."""
    inner = element(page, testid)
    assert inner is not None, f"no data-testid={testid!r} on the page"
    return plain(inner)


def plain(markup: str) -> str:
    return " ".join(html.unescape(TAGS.sub("", BREAKS.sub(" ", markup))).split())


def texts_of(page: str, testid: str) -> list[str]:
    """The text of every element with this `data-testid`, in page order."""
    found = re.findall(rf'<(\w+)\b[^>]*\bdata-testid="{re.escape(testid)}"[^>]*>(.*?)</\1>', page, re.DOTALL)
    return [plain(inner) for _, inner in found]


def href_of(page: str, testid: str) -> str:
    match = re.search(rf'<a href="([^"]+)"[^>]*data-testid="{re.escape(testid)}"', page)
    assert match, f"no link data-testid={testid!r} on the page"
    return html.unescape(match.group(1))


def post_actions(page: str) -> list[str]:
    """Where every POST form of the page goes (sign-out included)."""
    return re.findall(r'<form method="post" action="([^"]+)"', page)


async def flash_after(client: httpx.AsyncClient, resp: httpx.Response) -> tuple[str, str]:
    """An action's 303 followed: (the page it led to, the text of the flash message it left there)."""
    assert resp.status_code == 303, resp.text
    page = await client.get(resp.headers["location"])
    assert page.status_code == 200, page.text
    return page.text, text_of(page.text, "flash")
