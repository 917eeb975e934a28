"""The console's job list: filters, find by id or prefix, keyset paging, tenants, and the bulk actions
(select → cancel or replay, each item through the API's own service; admin's "replay all matching")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.utils.console import raw_key, sign_in
from tests.utils.console_pages import flash_after, href_of, row_ids, text_of
from tests.utils.dead_letters import kill_permanently
from tests.utils.jobs import get_job, submit, submit_id
from tests.utils.keys import bearer, make_key
from tests.utils.workers import drain


def in_an_hour() -> dict[str, str]:
    return {"run_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}


async def signed_in_writer(client: httpx.AsyncClient, tenant: str = "acme") -> tuple[dict[str, str], str]:
    """A jobs:read,jobs:write key of `tenant`: its API headers, and the console session's CSRF token."""
    key = await raw_key(tenant)
    return bearer(key), await sign_in(client, key)


async def listed(client: httpx.AsyncClient, **query: Any) -> list[str]:
    page = await client.get("/ui/jobs", params=query)
    assert page.status_code == 200, page.text
    return row_ids(page.text)


async def test_the_list_shows_the_tenants_jobs_newest_first_and_filters_them(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, _ = await signed_in_writer(client)
    done = await submit_id(client, auth, "demo.csv", rows=1)
    await drain()
    keyed = await submit_id(client, auth, "demo.csv", rows=1, job={"ordering_key": "acct-1", **in_an_hour()})
    flaky = await submit_id(client, auth, "demo.flaky", fail_times=0, job=in_an_hour())
    await submit_id(client, await make_key("globex"), "demo.csv", rows=1)

    assert await listed(client) == [flaky, keyed, done]
    assert await listed(client, status="scheduled") == [flaky, keyed]
    assert await listed(client, status="done") == [done]
    assert await listed(client, status=["done", "scheduled"]) == [flaky, keyed, done]
    assert await listed(client, report_type="demo.flaky") == [flaky]
    assert await listed(client, ordering_key="acct-1") == [keyed]
    created = (await get_job(client, auth, keyed))["created_at"]
    assert await listed(client, created_after=created) == [flaky, keyed]  # inclusive, to the microsecond
    assert await listed(client, created_before=created) == [done]
    assert await listed(client, created_before="2000-01-01T00:00") == []
    # datetime-local values carry no zone: UTC. An explicit zone is honoured.
    assert await listed(client, created_after="2000-01-01T00:00:00+05:00") == [flaky, keyed, done]
    page = await client.get("/ui/jobs", params={"status": "scheduled", "ordering_key": "acct-1"})
    assert 'name="ordering_key" value="acct-1"' in page.text and 'value="scheduled" selected' in page.text


async def test_bad_filters_are_named_and_list_nothing(client: httpx.AsyncClient, env: Any) -> None:
    auth, _ = await signed_in_writer(client)
    await submit_id(client, auth, "demo.csv", rows=1)
    for query, complaint in (
        ({"status": "lost"}, "status"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"q": "not an id!"}, "q:"),
        ({"cursor": "nope"}, "cursor"),
        ({"limit": "0"}, "limit"),
    ):
        page = await client.get("/ui/jobs", params=query)
        assert page.status_code == 200
        assert complaint in text_of(page.text, "filter-error"), query
        assert row_ids(page.text) == []


async def test_an_id_prefix_finds_its_jobs_and_a_whole_id_opens_the_job(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, _ = await signed_in_writer(client)
    ids = [await submit_id(client, auth, "demo.csv", rows=1) for _ in range(3)]
    target = ids[1]
    assert await listed(client, q=target[:25]) == [target]
    assert await listed(client, q=target[:25].lower()) == [target]  # ULIDs read case-insensitively
    assert set(await listed(client, q=target[:6])) == set(ids)  # same millisecond range: all three
    assert await listed(client, q="ZZZZ") == []
    opened = await client.get("/ui/jobs", params={"q": target.lower()})
    assert opened.status_code == 303 and opened.headers["location"] == f"/ui/jobs/{target}"


async def test_paging_follows_the_cursor_and_keeps_the_filters(client: httpx.AsyncClient, env: Any) -> None:
    auth, _ = await signed_in_writer(client)
    ids = [await submit_id(client, auth, "demo.csv", rows=1, job=in_an_hour()) for _ in range(5)]
    await submit_id(client, auth, "demo.csv", rows=1)  # pending: filtered out on every page
    seen: list[str] = []
    url = "/ui/jobs?status=scheduled&limit=2"
    while True:
        page = await client.get(url)
        assert page.status_code == 200, page.text
        seen += row_ids(page.text)
        if 'data-testid="next-page"' not in page.text:
            break
        url = href_of(page.text, "next-page")
        assert "status=scheduled" in url and "limit=2" in url and "cursor=" in url
    assert seen == ids[::-1]


async def test_admin_sees_every_tenant_and_may_filter_by_one_others_only_their_own(
    client: httpx.AsyncClient, env: Any
) -> None:
    acme = await submit_id(client, await make_key("acme"), "demo.csv", rows=1)
    globex = await submit_id(client, await make_key("globex"), "demo.csv", rows=1)
    await sign_in(client, await raw_key("ops", "admin"))
    everything = await client.get("/ui/jobs")
    assert row_ids(everything.text) == [globex, acme]
    assert 'name="tenant"' in everything.text and "<th>tenant</th>" in everything.text
    assert await listed(client, tenant="globex") == [globex]

    await sign_in(client, await raw_key("acme"))
    own = await client.get("/ui/jobs", params={"tenant": "globex"})
    assert row_ids(own.text) == [acme]  # a tenant filter from a non-admin is ignored, never widened
    assert 'name="tenant"' not in own.text and "<th>tenant</th>" not in own.text


async def test_bulk_cancel_cancels_the_waiting_ones_and_names_each_refusal(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, csrf = await signed_in_writer(client)
    done = await submit_id(client, auth, "demo.csv", rows=1)
    await drain()
    waiting = [await submit_id(client, auth, "demo.csv", rows=1, job=in_an_hour()) for _ in range(2)]
    foreign = await submit_id(client, await make_key("globex"), "demo.csv", rows=1, job=in_an_hour())
    page = await client.get("/ui/jobs")
    assert 'data-testid="bulk-cancel"' in page.text and f'name="ids" value="{done}"' in page.text

    resp = await client.post(
        "/ui/jobs/bulk",
        data={"csrf": csrf, "action": "cancel", "ids": [*waiting, done], "next": "/ui/jobs?status=scheduled"},
    )
    assert resp.headers["location"] == "/ui/jobs?status=scheduled"
    _, flash = await flash_after(client, resp)
    assert flash == f"2 cancelled; 1 refused: Job {done} is already done."
    assert [(await get_job(client, auth, i))["status"] for i in waiting] == ["cancelled", "cancelled"]

    # Another tenant's job is refused like a missing one, and left alone.
    resp = await client.post("/ui/jobs/bulk", data={"csrf": csrf, "action": "cancel", "ids": [foreign]})
    _, flash = await flash_after(client, resp)
    assert flash == f"0 cancelled; 1 refused: No job '{foreign}'."
    assert (await get_job(client, await make_key("globex"), foreign))["status"] == "scheduled"


async def test_bulk_replay_replays_the_dead_and_cancelled_and_refuses_the_rest(
    client: httpx.AsyncClient, env: Any
) -> None:
    auth, csrf = await signed_in_writer(client)
    cancelled = await submit_id(client, auth, "demo.csv", rows=1)
    assert (await client.post(f"/v1/jobs/{cancelled}/cancel", headers=auth)).status_code == 202
    [dead] = await kill_permanently(client, auth)
    done = await submit_id(client, auth, "demo.csv", rows=1)
    await drain()

    resp = await client.post(
        "/ui/jobs/bulk", data={"csrf": csrf, "action": "replay", "ids": [dead, cancelled, done]}
    )
    _, flash = await flash_after(client, resp)
    assert flash == f"2 replayed; 1 refused: Job {done} is done; only dead or cancelled jobs can be replayed."
    for job_id in (dead, cancelled):
        job = await get_job(client, auth, job_id)
        assert (job["status"], job["replay_count"]) == ("pending", 1)
    await drain()
    for job_id in (dead, cancelled):  # demo.flaky fails only its first try
        assert (await get_job(client, auth, job_id))["status"] == "done"

    nothing = await client.post("/ui/jobs/bulk", data={"csrf": csrf, "action": "replay"})
    assert (await flash_after(client, nothing))[1] == "Select at least one job first."


async def test_replay_all_matching_shows_the_count_then_replays_those_dead_jobs(
    client: httpx.AsyncClient, env: Any
) -> None:
    acme, globex = await make_key("acme"), await make_key("globex")
    acme_dead = await kill_permanently(client, acme, 2)
    [globex_dead] = await kill_permanently(client, globex)
    await submit(client, acme, "demo.csv", rows=1)
    await drain()
    csrf = await sign_in(client, await raw_key("ops", "admin"))

    page = await client.get("/ui/jobs", params={"status": "dead", "tenant": "acme"})
    link = href_of(page.text, "replay-matching")
    assert link.startswith("/ui/jobs/replay-matching?") and "tenant=acme" in link
    assert 'data-testid="replay-matching"' not in (await client.get("/ui/jobs?status=done")).text

    confirm = await client.get(link)
    assert confirm.status_code == 200 and text_of(confirm.text, "replay-count") == "2"
    assert 'data-testid="confirm-replay"' in confirm.text
    assert text_of((await client.get("/ui/jobs/replay-matching?status=dead")).text, "replay-count") == "3"

    resp = await client.post(
        "/ui/jobs/replay-matching", data={"csrf": csrf, "status": "dead", "tenant": "acme"}
    )
    assert resp.headers["location"] == "/ui/jobs?status=dead&tenant=acme"
    _, flash = await flash_after(client, resp)
    assert flash == "2 of 2 matching dead jobs replayed."
    for job_id in acme_dead:
        assert (await get_job(client, acme, job_id))["replay_count"] == 1
    assert (await get_job(client, globex, globex_dead))["status"] == "dead"


async def test_replay_all_matching_is_for_admins_only(client: httpx.AsyncClient, env: Any) -> None:
    auth, csrf = await signed_in_writer(client)
    [dead] = await kill_permanently(client, auth)
    page = await client.get("/ui/jobs", params={"status": "dead"})
    assert 'data-testid="replay-matching"' not in page.text
    assert (await client.get("/ui/jobs/replay-matching?status=dead")).status_code == 403
    refused = await client.post("/ui/jobs/replay-matching", data={"csrf": csrf, "status": "dead"})
    assert refused.status_code == 403 and "admin" in refused.text
    assert (await get_job(client, auth, dead))["status"] == "dead"
