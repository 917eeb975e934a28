"""POST /v1/jobs/batch on real MariaDB and Redis: per-item answers in order, idempotency per item (also
across concurrent batches), envelope errors, the 1,000-item bound, tenants, rate limit, a database outage.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.dispatch import queue
from app.jobs.repository import JobRepository
from devtools.servers import MariaDBServer, RedisServer
from tests.utils.batches import item, job_ids, post_batch, statuses
from tests.utils.keys import make_key

pytestmark = pytest.mark.timeout(180)


async def count_jobs() -> int:
    async with session_scope() as session:
        return await JobRepository(session).count_jobs(EVERY_TENANT)


def queued(redis_server: RedisServer) -> int:
    client = redis.Redis.from_url(redis_server.url)
    try:
        return int(client.zcard(get_settings().queue_name))
    finally:
        client.close()


async def test_each_item_gets_its_own_answer_in_request_order_and_bad_items_sink_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], redis_server: RedisServer
) -> None:
    soon = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    items: list[Any] = [
        item(rows=3),
        item("no.such.type"),
        item(rows=0),  # fails demo.csv's params schema
        {**item(), "run_at": past},
        {**item(), "callback_url": "http://169.254.169.254/latest"},  # SSRF guard
        {**item(), "max_attempts": 0},  # what FastAPI refuses in a single submit
        {**item(), "surprise": 1},
        {"params": {"rows": 1}},
        {**item(rows=4), "run_at": soon, "ordering_key": "k"},
        item("demo.sleep", seconds=0),
    ]
    answer = await post_batch(client, auth, items)
    assert statuses(answer) == [202, 422, 422, 422, 422, 422, 422, 422, 202, 202]
    assert (answer["created"], answer["existing"], answer["rejected"]) == (3, 0, 7)
    results = answer["results"]
    first_loc = {i: results[i]["problem"]["errors"][0]["loc"] for i in range(1, 8)}
    assert first_loc == {
        1: ["body", "jobs", 1, "report_type"],
        2: ["body", "jobs", 2, "params", "rows"],
        3: ["body", "jobs", 3, "run_at"],
        4: ["body", "jobs", 4, "callback_url"],
        5: ["body", "jobs", 5, "max_attempts"],
        6: ["body", "jobs", 6, "surprise"],
        7: ["body", "jobs", 7, "report_type"],
    }
    for result in results[1:8]:
        assert (
            result["problem"]["status"] == 422
            and result["problem"]["type"] == "/problems/unprocessable-entity"
        )
    # Each created item's job is the document a GET answers, and it is queued.
    for result in (results[0], results[8], results[9]):
        doc = (await client.get(f"/v1/jobs/{result['job']['id']}", headers=auth)).json()
        assert doc == result["job"]
    assert results[8]["job"]["status"] == "scheduled" and results[0]["job"]["status"] == "pending"
    assert await count_jobs() == 3
    assert queued(redis_server) == 3


async def test_an_item_repeating_its_key_gets_the_original_job_and_another_body_gets_409(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    first = await post_batch(client, auth, [item(key="a", rows=1), item(key="b", rows=2)])
    assert statuses(first) == [202, 202]
    again = await post_batch(client, auth, [item(key="b", rows=2), item(key="a", rows=9), item(key="c")])
    assert statuses(again) == [200, 409, 202]
    assert job_ids(again)[0] == job_ids(first)[1]
    assert again["results"][1]["problem"]["status"] == 409
    # Batch items and single submits share one key space.
    single = await client.post(
        "/v1/jobs",
        json={"report_type": "demo.csv", "params": {"rows": 1}},
        headers={**auth, "Idempotency-Key": "a"},
    )
    assert single.status_code == 200 and single.json()["id"] == job_ids(first)[0]
    assert await count_jobs() == 3


async def test_a_key_repeated_inside_one_batch_makes_one_job(
    client: httpx.AsyncClient, auth: dict[str, str], redis_server: RedisServer
) -> None:
    answer = await post_batch(
        client,
        auth,
        [item(key="dup", rows=5), item(key="dup", rows=5), item(key="dup", rows=6), item(rows=5)],
    )
    assert statuses(answer) == [202, 200, 409, 202]
    ids = job_ids(answer)
    assert ids[0] == ids[1] and ids[3] not in (None, ids[0])
    assert answer["results"][1]["job"] == answer["results"][0]["job"]
    assert await count_jobs() == 2
    assert queued(redis_server) == 2


async def test_concurrent_batches_with_overlapping_keys_create_one_job_per_key(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    # Five batches of 60 keys each, every pair overlapping, in different orders: 100 distinct keys.
    batches = [
        [item(key=f"k{n}", rows=n + 1) for n in range(start, start + 60)] for start in range(0, 50, 10)
    ]
    batches = [b if i % 2 else list(reversed(b)) for i, b in enumerate(batches)]
    answers = await asyncio.gather(*(post_batch(client, auth, b) for b in batches))
    by_key: dict[str, set[str]] = {}
    created = 0
    for batch, answer in zip(batches, answers, strict=True):
        assert set(statuses(answer)) <= {200, 202}, answer
        created += answer["created"]
        for sent, job_id in zip(batch, job_ids(answer), strict=True):
            assert job_id is not None
            by_key.setdefault(sent["idempotency_key"], set()).add(job_id)
    assert len(by_key) == 100 and all(len(ids) == 1 for ids in by_key.values())
    assert created == 100
    assert await count_jobs() == 100


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"jobs": [', 422),
        (b"{}", 422),
        (b'{"jobs": []}', 422),
        (b'{"jobs": {"report_type": "demo.csv"}}', 422),
        (b'{"jobs": ["demo.csv"]}', 422),
        (json.dumps({"jobs": [item()] * 1001}).encode(), 422),
        (json.dumps({"jobs": [item()], "extra": 1}).encode(), 422),
    ],
    ids=["malformed", "no-jobs", "empty", "not-a-list", "item-not-an-object", "1001-items", "extra-field"],
)
async def test_an_invalid_envelope_is_one_problem_and_creates_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], body: bytes, status: int
) -> None:
    headers = {**auth, "Content-Type": "application/json"}
    resp = await client.post("/v1/jobs/batch", content=body, headers=headers)
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    assert resp.json()["errors"]
    assert await count_jobs() == 0


async def test_without_a_key_a_scope_or_room_the_batch_is_refused_before_anything_is_read(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    body = {"jobs": [item()]}
    assert (await client.post("/v1/jobs/batch", json=body)).status_code == 401
    reader = await make_key(scopes="jobs:read")
    assert (await client.post("/v1/jobs/batch", json=body, headers=reader)).status_code == 403
    await env.set(MAX_BODY_BYTES=1000)
    # 64 × MAX_BODY_BYTES for the whole batch …
    huge = {"jobs": [item(rows=1, pad="x" * 900)] * 80}
    too_large = await client.post("/v1/jobs/batch", json=huge, headers=auth)
    assert too_large.status_code == 413 and too_large.headers["content-type"] == "application/problem+json"
    # … and MAX_BODY_BYTES for each item: an item over it is a 422 of its own.
    answer = await post_batch(client, auth, [item(rows=1, pad="x" * 1200), item()])
    assert statuses(answer) == [422, 202]
    assert answer["results"][0]["problem"]["errors"][0]["type"] == "too_large"
    assert await count_jobs() == 1


async def test_a_thousand_items_are_accepted_and_all_queued(
    client: httpx.AsyncClient, auth: dict[str, str], redis_server: RedisServer
) -> None:
    answer = await post_batch(client, auth, [item(rows=n + 1) for n in range(1000)])
    assert answer["created"] == 1000
    ids = job_ids(answer)
    assert ids == sorted(ids), "ids follow the request order"  # type: ignore[type-var]
    assert await count_jobs() == 1000
    assert queued(redis_server) == 1000
    assert all(await asyncio.gather(*(queue.is_queued(i, 0) for i in ids[::97] if i)))


async def test_a_batch_belongs_to_its_tenant(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    other = await make_key("globex")
    mine = await post_batch(client, auth, [item(key="shared"), item()])
    theirs = await post_batch(client, other, [item(key="shared"), item()])
    assert statuses(mine) == statuses(theirs) == [202, 202]
    assert not set(job_ids(mine)) & set(job_ids(theirs))
    for job_id in job_ids(mine):
        assert (await client.get(f"/v1/jobs/{job_id}", headers=other)).status_code == 404
        assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).status_code == 200
    listing = (await client.get("/v1/jobs", headers=other)).json()["items"]
    assert {j["id"] for j in listing} == set(job_ids(theirs))


async def test_items_over_the_rate_limit_get_429_and_repeats_spend_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(SUBMIT_RATE_LIMIT_PER_MINUTE=3)
    resp = await client.post(
        "/v1/jobs/batch", json={"jobs": [item(key="r"), item(), item(), item(), item()]}, headers=auth
    )
    assert resp.status_code == 207
    assert [r["status"] for r in resp.json()["results"]] == [202, 202, 202, 429, 429]
    assert resp.json()["results"][3]["problem"]["status"] == 429
    assert 1 <= int(resp.headers["retry-after"]) <= 60
    # The idempotent repeat is answered although the budget is spent.
    again = await post_batch(client, auth, [item(key="r"), item()])
    assert statuses(again) == [200, 429]
    assert await count_jobs() == 3


async def test_with_the_database_down_the_batch_is_503_and_creates_nothing(
    client: httpx.AsyncClient, env: Any, mariadb: MariaDBServer
) -> None:
    await env.set(API_KEY_CACHE_TTL_S=600)  # the key is known before the outage: the batch itself meets it
    headers = await make_key()
    assert (await client.get("/v1/jobs", headers=headers)).status_code == 200
    mariadb.stop()
    try:
        resp = await client.post("/v1/jobs/batch", json={"jobs": [item(), item(key="x")]}, headers=headers)
    finally:
        mariadb.start()
    assert resp.status_code == 503, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    await env.set()  # a fresh engine: the old pool's connections died with the server
    assert await count_jobs() == 0
