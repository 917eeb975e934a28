"""Resolving a dead letter by hand: archived with who and why, and the ordering key's waiting jobs proceed.

Real MariaDB, Redis and in-process burst workers; `demo.flaky` with `permanent=true` dies on its first try.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.dead_letters import kill_permanently, letters, resolve
from tests.utils.jobs import get_attempts, get_job, parse_ts, submit
from tests.utils.keys import make_key, make_named_key
from tests.utils.problems import BOGUS_ID, assert_problem
from tests.utils.workers import drain


async def only_letter(client: httpx.AsyncClient, auth: dict[str, str]) -> dict[str, Any]:
    [letter] = await letters(client, auth)
    return letter


async def succeeded_window(client: httpx.AsyncClient, auth: dict[str, str], job_id: str) -> tuple[Any, Any]:
    [ok] = [a for a in await get_attempts(client, auth, job_id) if a["outcome"] == "succeeded"]
    return parse_ts(ok["started_at"]), parse_ts(ok["finished_at"])


async def test_resolve_archives_the_letter_with_who_and_why(client: httpx.AsyncClient) -> None:
    key_id, anna = await make_named_key("anna")
    [job_id] = await kill_permanently(client, anna)
    letter = await only_letter(client, anna)
    resp = await resolve(client, anna, letter["id"], "  Refunded order 2302393013 by hand  ")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["id"] == letter["id"] and body["job_id"] == job_id
    assert body["resolution"] == "Refunded order 2302393013 by hand"
    assert body["resolved_by"] == f'key {key_id} "anna" (acme)'
    assert body["resolved_at"] is not None and body["archived_at"] == body["resolved_at"]
    assert body["replayed_at"] is None
    # Archived: gone from the default list, shown with the archived toggle, as resolved.
    assert await letters(client, anna) == []
    [archived] = await letters(client, anna, include_archived="true")
    assert archived == body
    assert (await get_job(client, anna, job_id))["status"] == "dead"


async def test_resolving_another_tenants_letter_is_404_like_a_missing_one(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    await kill_permanently(client, auth)
    letter = await only_letter(client, auth)
    other = await make_key("globex")
    for letter_id in (letter["id"], BOGUS_ID, "not-a-ulid"):
        assert_problem(await resolve(client, other, letter_id), 404)
    assert (await only_letter(client, auth))["resolved_at"] is None
    admin = await make_key("ops", "admin")
    assert (await resolve(client, admin, letter["id"])).status_code == 200


async def test_resolving_twice_is_409(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    await kill_permanently(client, auth)
    letter = await only_letter(client, auth)
    assert (await resolve(client, auth, letter["id"], "first")).status_code == 200
    problem = assert_problem(await resolve(client, auth, letter["id"], "second"), 409)
    assert "resolved" in problem["detail"]
    [archived] = await letters(client, auth, include_archived="true")
    assert archived["resolution"] == "first"


async def test_an_empty_or_missing_reason_is_422_with_errors(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    await kill_permanently(client, auth)
    letter = await only_letter(client, auth)
    path = f"/v1/dead-letters/{letter['id']}/resolve"
    for body in ({"reason": ""}, {"reason": "   "}, {"reason": "x" * 501}, {}, {"reason": "ok", "x": 1}):
        problem = assert_problem(await client.post(path, json=body, headers=auth), 422)
        assert problem["errors"], body
    assert (await only_letter(client, auth))["resolved_at"] is None


async def test_a_read_only_key_is_403_and_no_key_401(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    await kill_permanently(client, auth)
    letter = await only_letter(client, auth)
    reader = await make_key(scopes="jobs:read")
    assert_problem(await resolve(client, reader, letter["id"]), 403)
    assert_problem(await resolve(client, {}, letter["id"]), 401)
    assert (await only_letter(client, auth))["resolved_at"] is None


async def test_resolving_a_dead_predecessor_lets_its_waiting_successors_run_in_order(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    key = {"ordering_key": "acct-9"}
    dead = await submit(client, auth, "demo.flaky", job=key, fail_times=1, permanent=True)
    first = await submit(client, auth, "demo.csv", job=key, rows=1)
    second = await submit(client, auth, "demo.csv", job=key, rows=1)
    await drain()
    assert (await get_job(client, auth, dead["id"]))["status"] == "dead"
    for waiting, nearest in ((first, dead), (second, first)):
        body = await get_job(client, auth, waiting["id"])
        assert body["status"] == "pending" and body["blocked_by"] == nearest["id"], body
    letter = await only_letter(client, auth)
    assert (await resolve(client, auth, letter["id"], "re-sent the invoice by hand")).status_code == 200
    await drain()
    for done in (first, second):
        assert (await get_job(client, auth, done["id"]))["status"] == "done"
    (_, first_end), (second_start, _) = [
        await succeeded_window(client, auth, job["id"]) for job in (first, second)
    ]
    assert first_end <= second_start, "the two successors overlapped or ran out of order"
    assert (await get_job(client, auth, dead["id"]))["status"] == "dead"


async def test_a_resolved_job_can_be_replayed_and_blocks_its_key_again_if_it_dies_again(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    key = {"ordering_key": "acct-10"}
    dead = await submit(client, auth, "demo.flaky", job=key, fail_times=2, permanent=True)
    await drain()
    first_letter = await only_letter(client, auth)
    assert (await resolve(client, auth, first_letter["id"])).status_code == 200
    replayed = await client.post(f"/v1/jobs/{dead['id']}/replay", headers=auth)
    assert replayed.status_code == 202 and replayed.json()["replay_count"] == 1
    later = await submit(client, auth, "demo.csv", job=key, rows=1)
    await drain()
    # Dead again (its second attempt fails too): unresolved, so it holds `later` back once more.
    assert (await get_job(client, auth, dead["id"]))["status"] == "dead"
    blocked = await get_job(client, auth, later["id"])
    assert blocked["status"] == "pending" and blocked["blocked_by"] == dead["id"]
    second_letter = await only_letter(client, auth)
    assert second_letter["id"] != first_letter["id"] and second_letter["resolved_at"] is None
    assert_problem(await resolve(client, auth, first_letter["id"]), 409)
    assert (await resolve(client, auth, second_letter["id"], "second time")).status_code == 200
    await drain()
    assert (await get_job(client, auth, later["id"]))["status"] == "done"
    # A replay after the second resolve still runs it (third attempt succeeds).
    assert (await client.post(f"/v1/jobs/{dead['id']}/replay", headers=auth)).status_code == 202
    await drain()
    assert (await get_job(client, auth, dead["id"]))["status"] == "done"


async def test_resolving_archives_the_jobs_earlier_replayed_letters_too(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.flaky", fail_times=2, permanent=True)
    await drain()
    assert (await client.post(f"/v1/jobs/{job['id']}/replay", headers=auth)).status_code == 202
    await drain()
    newest, older = await letters(client, auth)
    assert older["replayed_at"] is not None and newest["replayed_at"] is None
    assert (await resolve(client, auth, newest["id"])).status_code == 200
    assert await letters(client, auth) == []
    archived = {item["id"]: item for item in await letters(client, auth, include_archived="true")}
    assert archived[older["id"]]["archived_at"] is not None and archived[older["id"]]["resolved_at"] is None
    assert archived[newest["id"]]["resolution"] == "fixed by hand"
