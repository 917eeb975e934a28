"""The HTTP contract (CONTRACT.md) for GET /v1/jobs: cursor pages newest first with no duplicate or skip while
jobs arrive, and the status, report type and creation-time filters, combined with pagination."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.utils.api_contract import CSV, iso
from tests.utils.jobs import post_job, submit


async def fetch_page(
    client: httpx.AsyncClient, auth: dict[str, str], **params: Any
) -> tuple[list[str], str | None]:
    resp = await client.get("/v1/jobs", params=params, headers=auth)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"items", "next_cursor"}
    return [j["id"] for j in body["items"]], body["next_cursor"]


async def test_listing_pages_through_all_jobs_newest_first(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = [(await post_job(client, auth, CSV))["id"] for _ in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        ids, cursor = await fetch_page(client, auth, **params)
        pages += 1
        assert len(ids) <= 3
        seen.extend(ids)
        if cursor is None:
            break
        assert pages < 10
    assert pages == 3
    assert seen == list(reversed(created))


async def test_listing_with_exactly_a_full_last_page_ends_with_null_cursor(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    created = [(await post_job(client, auth, CSV))["id"] for _ in range(6)]
    first, cursor = await fetch_page(client, auth, limit=3)
    assert cursor is not None
    second, cursor = await fetch_page(client, auth, limit=3, cursor=cursor)
    assert cursor is None
    assert first + second == list(reversed(created))


async def test_listing_has_no_duplicate_or_skip_while_jobs_arrive(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    original = [(await post_job(client, auth, CSV))["id"] for _ in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    arrived: list[str] = []
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        ids, cursor = await fetch_page(client, auth, **params)
        seen.extend(ids)
        arrived += [(await post_job(client, auth, CSV))["id"] for _ in range(2)]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert [i for i in seen if i in original] == list(reversed(original))
    assert not set(seen) & set(arrived)
    ids, _ = await fetch_page(client, auth, limit=200)
    assert ids[: len(arrived)] == list(reversed(arrived))


async def test_listing_filters_by_status(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    pending = await post_job(client, auth, CSV)
    later = datetime.now(UTC) + timedelta(hours=1)
    scheduled = await post_job(client, auth, {**CSV, "run_at": iso(later)})
    assert (await fetch_page(client, auth, status="pending"))[0] == [pending["id"]]
    assert (await fetch_page(client, auth, status="scheduled"))[0] == [scheduled["id"]]
    assert (await fetch_page(client, auth, status="done"))[0] == []
    both, _ = await fetch_page(client, auth, status=["pending", "scheduled"])
    assert both == [scheduled["id"], pending["id"]]


async def test_listing_filters_by_report_type(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    csv_job = await post_job(client, auth, CSV)
    sleep_job = await submit(client, auth, "demo.sleep", seconds=1)
    assert (await fetch_page(client, auth, report_type="demo.csv"))[0] == [csv_job["id"]]
    assert (await fetch_page(client, auth, report_type="demo.sleep"))[0] == [sleep_job["id"]]
    assert (await fetch_page(client, auth, report_type="demo.nothing"))[0] == []


async def test_listing_filters_by_creation_time(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    jobs = [await post_job(client, auth, CSV) for _ in range(5)]
    ids = [j["id"] for j in jobs]
    pivot = jobs[2]["created_at"]
    after, _ = await fetch_page(client, auth, created_after=pivot)
    assert after == list(reversed(ids[2:]))
    before, _ = await fetch_page(client, auth, created_before=pivot)
    assert before == list(reversed(ids[:2]))
    window, _ = await fetch_page(client, auth, created_after=jobs[1]["created_at"], created_before=pivot)
    assert window == [ids[1]]
    future = iso(datetime.now(UTC) + timedelta(days=1))
    assert (await fetch_page(client, auth, created_after=future))[0] == []
    # Filters combine with pagination.
    first, cursor = await fetch_page(client, auth, created_after=jobs[1]["created_at"], limit=2)
    assert cursor is not None
    second, cursor = await fetch_page(
        client, auth, created_after=jobs[1]["created_at"], limit=2, cursor=cursor
    )
    assert cursor is None
    assert first + second == list(reversed(ids[1:]))
