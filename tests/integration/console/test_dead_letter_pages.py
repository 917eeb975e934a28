"""Dead letters in the console: the list with its filters and archived toggle, replaying the selected ones,
the admin's bulk replay by filter behind a count, and resolving a letter by hand so its job's successors run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from app.auth.service import create_api_key
from tests.utils.console import raw_key, sign_in
from tests.utils.console_pages import flash_after, href_of, row_ids, text_of, texts_of
from tests.utils.dead_letters import kill_permanently, letters, resolve
from tests.utils.jobs import get_job, submit_id
from tests.utils.keys import bearer, make_key
from tests.utils.problems import BOGUS_ID
from tests.utils.workers import drain


async def listed(client: httpx.AsyncClient, **query: Any) -> list[str]:
    page = await client.get("/ui/dead-letters", params=query)
    assert page.status_code == 200, page.text
    return row_ids(page.text, "letter-row")


async def test_the_list_shows_open_letters_and_the_archived_toggle_adds_settled_ones(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    auth = bearer(key)
    first, second = await kill_permanently(client, auth, 2)
    await kill_permanently(client, await make_key("globex"))
    settled = next(item for item in await letters(client, auth) if item["job_id"] == first)
    assert (await resolve(client, auth, settled["id"], "re-sent by hand")).status_code == 200
    await sign_in(client, key)

    page = await client.get("/ui/dead-letters")
    assert row_ids(page.text, "letter-row") == [second]
    [row_state] = texts_of(page.text, "letter-state")
    assert row_state.startswith("open, until ")
    assert "<strong>PermanentError</strong>: demo.flaky failing attempt 1 of 1" in page.text
    assert await listed(client, archived="1") == [second, first]
    archived = await client.get("/ui/dead-letters", params={"archived": "1"})
    assert texts_of(archived.text, "letter-state")[1].startswith("resolved ")
    assert texts_of(archived.text, "letter-state")[1].endswith("(acme): re-sent by hand")
    assert 'name="archived" value="1" checked' in archived.text
    assert await listed(client, report_type="demo.csv") == []
    assert await listed(client, report_type="demo.flaky") == [second]
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert await listed(client, since=tomorrow) == []
    assert await listed(client, since="2000-01-01T00:00") == [second]
    assert text_of((await client.get("/ui/dead-letters?since=soon")).text, "filter-error").startswith("since")


async def test_paging_through_the_letters_keeps_the_filters(client: httpx.AsyncClient, env: Any) -> None:
    key = await raw_key("acme")
    ids = await kill_permanently(client, bearer(key), 3)
    await sign_in(client, key)
    expected = [item["job_id"] for item in await letters(client, bearer(key))]  # newest letter first
    first = await client.get("/ui/dead-letters", params={"limit": 2, "report_type": "demo.flaky"})
    assert row_ids(first.text, "letter-row") == expected[:2]
    link = href_of(first.text, "next-page")
    assert "report_type=demo.flaky" in link and "limit=2" in link
    second = await client.get(link)
    assert row_ids(second.text, "letter-row") == expected[2:]
    assert sorted(expected) == sorted(ids) and 'data-testid="next-page"' not in second.text


async def test_replay_selected_replays_the_chosen_letters_jobs_in_the_viewers_tenant(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("acme")
    auth, globex = bearer(key), await make_key("globex")
    chosen_a, chosen_b, left = await kill_permanently(client, auth, 3)
    [foreign] = await kill_permanently(client, globex)
    csrf = await sign_in(client, key)
    page = await client.get("/ui/dead-letters")
    assert (
        'data-testid="replay-selected"' in page.text and f'value="{left}" form="replay-selected"' in page.text
    )

    resp = await client.post(
        "/ui/dead-letters/replay", data={"csrf": csrf, "ids": [chosen_a, chosen_b, foreign]}
    )
    _, flash = await flash_after(client, resp)
    assert flash == f"2 replayed; 1 refused: No job '{foreign}'."
    for job_id in (chosen_a, chosen_b):
        assert (await get_job(client, auth, job_id))["replay_count"] == 1
    assert (await get_job(client, auth, left))["status"] == "dead"
    assert (await get_job(client, globex, foreign))["status"] == "dead"


async def test_bulk_replay_by_filter_shows_how_many_then_replays_them(
    client: httpx.AsyncClient, env: Any
) -> None:
    acme, globex = await make_key("acme"), await make_key("globex")
    flaky = [*await kill_permanently(client, acme, 2), *await kill_permanently(client, globex)]
    steps = await submit_id(client, acme, "demo.steps", fail_step="charge", fail_times=1)
    await drain()
    csrf = await sign_in(client, await raw_key("ops", "admin"))
    page = await client.get("/ui/dead-letters")
    assert set(row_ids(page.text, "letter-row")) == {*flaky, steps}  # every tenant
    assert 'action="/ui/dead-letters/replay-confirm"' in page.text

    confirm = await client.get("/ui/dead-letters/replay-confirm", params={"report_type": "demo.flaky"})
    assert confirm.status_code == 200 and text_of(confirm.text, "replay-count") == "3"
    assert (
        'name="report_type" value="demo.flaky"' in confirm.text
        and 'data-testid="confirm-replay"' in confirm.text
    )
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    later = await client.get("/ui/dead-letters/replay-confirm", params={"since": tomorrow})
    assert text_of(later.text, "replay-count") == "0"
    everything = await client.get("/ui/dead-letters/replay-confirm", params={"since": "2000-01-01T00:00"})
    assert text_of(everything.text, "replay-count") == "4"
    unfiltered = await client.get("/ui/dead-letters/replay-confirm")
    assert unfiltered.status_code == 422 and "report_type and/or since" in unfiltered.text

    resp = await client.post(
        "/ui/dead-letters/replay-confirm", data={"csrf": csrf, "report_type": "demo.flaky", "since": ""}
    )
    _, flash = await flash_after(client, resp)
    assert flash == "3 dead jobs replayed."
    for job_id, headers in zip(flaky, (acme, acme, globex), strict=True):
        assert (await get_job(client, headers, job_id))["replay_count"] == 1
    assert (await get_job(client, acme, steps))["status"] == "dead"
    again = await client.get("/ui/dead-letters/replay-confirm", params={"report_type": "demo.flaky"})
    assert text_of(again.text, "replay-count") == "0"


async def test_bulk_replay_by_filter_is_for_admins_only(client: httpx.AsyncClient, env: Any) -> None:
    key = await raw_key("acme")
    [dead] = await kill_permanently(client, bearer(key))
    csrf = await sign_in(client, key)
    page = await client.get("/ui/dead-letters")
    assert "replay-confirm" not in page.text
    assert (await client.get("/ui/dead-letters/replay-confirm?report_type=demo.flaky")).status_code == 403
    data = {"csrf": csrf, "report_type": "demo.flaky"}
    refused = await client.post("/ui/dead-letters/replay-confirm", data=data)
    assert refused.status_code == 403 and "admin" in refused.text
    assert (await get_job(client, bearer(key), dead))["status"] == "dead"


async def test_resolving_from_the_console_lets_the_waiting_successors_run(
    client: httpx.AsyncClient, env: Any
) -> None:
    key, raw = await create_api_key("acme", ["jobs:read", "jobs:write"], "anna")
    auth = bearer(raw)
    order = {"ordering_key": "invoice-7"}
    dead = await submit_id(client, auth, "demo.flaky", job=order, fail_times=1, permanent=True)
    successors = [await submit_id(client, auth, "demo.csv", job=order, rows=1) for _ in range(2)]
    await drain()
    assert [(await get_job(client, auth, s))["status"] for s in successors] == ["pending", "pending"]
    csrf = await sign_in(client, raw)
    page = await client.get("/ui/dead-letters")
    [letter] = await letters(client, auth)
    action = f"/ui/dead-letters/{letter['id']}/resolve"
    assert f'action="{action}"' in page.text and 'data-testid="resolve"' in page.text

    resp = await client.post(
        action, data={"csrf": csrf, "reason": "  Sent invoice 7 by hand ", "next": "/ui/dead-letters"}
    )
    page_after, flash = await flash_after(client, resp)
    assert flash == f"Dead letter of job {dead} resolved; jobs waiting on it may proceed."
    assert row_ids(page_after, "letter-row") == []  # archived: off the default list
    await drain()
    assert [(await get_job(client, auth, s))["status"] for s in successors] == ["done", "done"]
    assert (await get_job(client, auth, dead))["status"] == "dead"
    [resolved] = await letters(client, auth, include_archived="true")
    assert resolved["resolution"] == "Sent invoice 7 by hand"
    assert resolved["resolved_by"] == f'key {key.id} "anna" (acme)'  # as the API records it


async def test_resolve_refusals_read_as_the_apis_messages(client: httpx.AsyncClient, env: Any) -> None:
    key = await raw_key("acme")
    auth = bearer(key)
    await kill_permanently(client, auth)
    [letter] = await letters(client, auth)
    csrf = await sign_in(client, key)
    action = f"/ui/dead-letters/{letter['id']}/resolve"
    for reason in ("", "   ", "x" * 501):
        refused = await client.post(action, data={"csrf": csrf, "reason": reason})
        assert refused.status_code == 422 and "reason" in text_of(refused.text, "problem"), reason
    assert (await client.post(action, data={"csrf": csrf, "reason": "first"})).status_code == 303
    twice = await client.post(action, data={"csrf": csrf, "reason": "second"})
    assert twice.status_code == 409 and f"Dead letter {letter['id']} is already resolved." in twice.text
    for other in (BOGUS_ID, "not-a-letter"):
        missing = await client.post(f"/ui/dead-letters/{other}/resolve", data={"csrf": csrf, "reason": "x"})
        assert missing.status_code == 404 and "No dead letter" in missing.text
