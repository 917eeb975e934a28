"""Dead letters against real MariaDB, Redis, arq workers and a local fake DingTalk that checks signatures."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from app.dead_letters.service import archive_and_purge
from app.maintenance import service as maintenance
from tests.utils.dead_letters import kill_permanently, letters
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.jobs import submit_id
from tests.utils.keys import make_key
from tests.utils.workers import drain, drain_alerts


async def test_one_dead_job_gives_exactly_one_correctly_signed_alert(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk
) -> None:
    [job_id] = await kill_permanently(client, auth)
    await drain_alerts()
    assert [r.reason for r in dingtalk.received] == [""]
    text = dingtalk.accepted[0].text
    for expected in (
        job_id,
        "demo.flaky",
        "acme",
        "attempts**: 1",
        "PermanentError",
        f"reportctl replay {job_id}",
        f"/v1/jobs/{job_id}/replay",
    ):
        assert expected in text, (expected, text)
    [letter] = await letters(client, auth)
    assert letter["job_id"] == job_id and letter["alert"]["status"] == "sent"
    assert letter["alert"]["sent_at"] is not None
    # Running the consumer and the scheduler again sends nothing more.
    await maintenance.run_tick(use_lease=False)
    await drain_alerts()
    assert len(dingtalk.received) == 1


async def test_robot_errors_and_hangs_are_retried_until_delivered_and_the_letter_stays_intact(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk
) -> None:
    dingtalk.script = ["errcode", "http500", "hang", "errcode"]
    [job_id] = await kill_permanently(client, auth)
    consumer = asyncio.create_task(drain_alerts())
    for _ in range(200):
        if len(dingtalk.received) >= 2:
            break
        await asyncio.sleep(0.05)
    [letter] = await letters(client, auth)
    assert letter["job_id"] == job_id and letter["alert"]["status"] == "pending"
    assert letter["error"]["type"] == "PermanentError"
    await consumer
    assert [r.reason for r in dingtalk.received] == ["errcode", "http500", "hang", "errcode", ""]
    assert job_id in dingtalk.accepted[0].text
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent"


async def test_sixty_jobs_dying_at_once_give_at_most_20_messages_a_minute_naming_every_job(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk, env: Any
) -> None:
    await env.set(ALERT_COALESCE_S="1.0")
    ids = [await submit_id(client, auth, "demo.flaky", fail_times=1, permanent=True) for _ in range(60)]
    # A long-running consumer sees the letters arrive while two workers kill the jobs.
    consumer = asyncio.create_task(drain_alerts(burst=False))
    await drain(workers=2)
    for _ in range(200):
        if all(item["alert"]["status"] == "sent" for item in await letters(client, auth, limit=200)):
            break
        await asyncio.sleep(0.1)
    consumer.cancel()
    assert all(r.accepted for r in dingtalk.received), [r.reason for r in dingtalk.received]
    assert dingtalk.max_in_window(60) <= 20
    mentioned = "\n".join(r.text for r in dingtalk.accepted)
    assert [i for i in ids if i not in mentioned] == []
    assert all(item["alert"]["status"] == "sent" for item in await letters(client, auth, limit=200))


async def test_budget_exhausted_alerts_wait_for_the_window_and_name_every_job(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk, env: Any
) -> None:
    await env.set(ALERT_MAX_PER_MINUTE="2", ALERT_RATE_WINDOW_S="1.5", ALERT_COALESCE_S="0")
    ids: list[str] = []
    for _ in range(5):
        ids += await kill_permanently(client, auth)
        await drain_alerts()
    times = sorted(r.at for r in dingtalk.accepted)
    assert all(sum(1 for t in times if s <= t < s + 1.5) <= 2 for s in times)
    mentioned = "\n".join(r.text for r in dingtalk.accepted)
    assert [i for i in ids if i not in mentioned] == []


async def test_redis_flushed_between_death_and_alert_still_alerts(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk, env: Any
) -> None:
    [job_id] = await kill_permanently(client, auth)
    env.redis.flushall()
    await drain_alerts()
    assert dingtalk.received == []
    await asyncio.sleep(0.6)
    report = await maintenance.run_tick(use_lease=False)
    assert report["alerts_republished"] == 1
    await drain_alerts()
    assert len(dingtalk.accepted) == 1 and job_id in dingtalk.accepted[0].text


async def test_replay_of_a_dead_job_runs_it_again_to_done(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    [job_id] = await kill_permanently(client, auth)
    resp = await client.post(f"/v1/jobs/{job_id}/replay", headers=auth)
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["status"] == "pending" and body["attempt"] == 0 and body["replay_count"] == 1
    await drain()
    done = (await client.get(f"/v1/jobs/{job_id}", headers=auth)).json()
    assert done["status"] == "done" and done["attempt"] == 1 and done["replay_count"] == 1
    history = (await client.get(f"/v1/jobs/{job_id}/attempts", headers=auth)).json()
    assert [h["outcome"] for h in history] == ["failed", "succeeded"]
    [letter] = await letters(client, auth)
    assert letter["replayed_at"] is not None


async def test_replaying_a_done_or_pending_job_is_409(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=1)
    assert (await client.post(f"/v1/jobs/{job_id}/replay", headers=auth)).status_code == 409
    await drain()
    resp = await client.post(f"/v1/jobs/{job_id}/replay", headers=auth)
    assert resp.status_code == 409 and resp.headers["content-type"] == "application/problem+json"
    assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).json()["status"] == "done"


async def test_bulk_replay_by_filter_replays_exactly_the_matching_dead_letters(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(JOB_TIMEOUT_S="0.2")
    old_flaky = await kill_permanently(client, auth, 2)
    await asyncio.sleep(0.05)
    since = datetime.now(UTC)
    new_flaky = await kill_permanently(client, auth, 3)
    sleepy = [
        await submit_id(client, auth, "demo.sleep", job={"max_attempts": 1}, seconds=5) for _ in range(2)
    ]
    await drain()
    admin = await make_key("ops", "admin")
    assert (
        await client.post("/v1/dead-letters/replay", json={"report_type": "demo.flaky"}, headers=auth)
    ).status_code == 403
    resp = await client.post(
        "/v1/dead-letters/replay",
        headers=admin,
        json={"report_type": "demo.flaky", "since": since.isoformat()},
    )
    assert resp.status_code == 202 and resp.json() == {"replayed": 3}
    statuses = {
        j: (await client.get(f"/v1/jobs/{j}", headers=auth)).json()["status"]
        for j in old_flaky + new_flaky + sleepy
    }
    assert {j for j, s in statuses.items() if s == "pending"} == set(new_flaky)
    again = await client.post(
        "/v1/dead-letters/replay",
        headers=admin,
        json={"report_type": "demo.flaky", "since": since.isoformat()},
    )
    assert again.json() == {"replayed": 0}
    by_id = await client.post("/v1/dead-letters/replay", headers=admin, json={"job_ids": [sleepy[0]]})
    assert by_id.json() == {"replayed": 1}
    bad = await client.post("/v1/dead-letters/replay", headers=admin, json={})
    assert bad.status_code == 422


async def test_expiry_moves_a_dead_letter_to_the_archive_and_retention_purges_it(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    # A TTL long enough to list the letter before it expires on a loaded machine (0.2 s was not).
    await env.set(DEAD_LETTER_TTL_S="1")
    [job_id] = await kill_permanently(client, auth)
    assert len(await letters(client, auth)) == 1
    await asyncio.sleep(1.1)
    assert (await archive_and_purge())["archived"] == 1
    assert await letters(client, auth) == []
    [archived] = await letters(client, auth, include_archived="true")
    assert archived["job_id"] == job_id and archived["archived_at"] is not None
    expire_at = datetime.fromisoformat(archived["expire_at"].replace("Z", "+00:00"))
    created_at = datetime.fromisoformat(archived["created_at"].replace("Z", "+00:00"))
    assert expire_at - created_at == timedelta(seconds=1)
    await env.set(DEAD_LETTER_TTL_S="1", DEAD_LETTER_RETENTION_S="0.1")
    await asyncio.sleep(0.15)
    assert (await archive_and_purge())["purged"] == 1
    assert await letters(client, auth, include_archived="true") == []


async def test_dead_letters_are_tenant_scoped(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    [job_id] = await kill_permanently(client, auth)
    other = await make_key("globex")
    assert await letters(client, other) == []
    assert (await client.post(f"/v1/jobs/{job_id}/replay", headers=other)).status_code == 404
    admin = await make_key("ops", "admin")
    assert [item["job_id"] for item in await letters(client, admin)] == [job_id]
