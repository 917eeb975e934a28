"""One OpenTelemetry trace per job, across processes' work: submit, attempts and retries, the dead-letter
alert, the completion callback, a replay and a Redis flush; real MariaDB, Redis, arq workers and receiver.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.core.tracing import trace_id_of
from app.dispatch import queue
from app.jobs.repository import JobRepository
from app.maintenance import service as maintenance
from tests.utils.fakes.receiver import Receiver
from tests.utils.jobs import get_job, submit
from tests.utils.settings import reset_process_state
from tests.utils.tracing import hex_trace_id, in_memory_tracing, in_trace, named
from tests.utils.workers import drain, drain_alerts

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture
async def spans(env: Any) -> AsyncIterator[InMemorySpanExporter]:
    with in_memory_tracing() as exporter:
        await reset_process_state()  # the next engine is built instrumented
        yield exporter
    await reset_process_state()


@pytest.fixture
async def traced_client(spans: InMemorySpanExporter) -> AsyncIterator[httpx.AsyncClient]:
    """An API app built while tracing is on, so its requests get server spans."""
    from app.application import create_app

    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


async def test_one_trace_follows_a_job_from_submit_through_a_retry_to_its_callback(
    spans: InMemorySpanExporter,
    traced_client: httpx.AsyncClient,
    auth: dict[str, str],
    receiver: Receiver,
) -> None:
    client = traced_client
    job = await submit(client, auth, "demo.flaky", job={"callback_url": receiver.url}, fail_times=1)
    await drain()
    await drain_alerts()

    body = await get_job(client, auth, job["id"])
    assert body["status"] == "done"
    trace_id = body["trace_id"]
    assert TRACE_ID.match(trace_id) and job["trace_id"] == trace_id

    [submitted] = named(spans, "submit", job["id"])
    [server] = [
        s for s in in_trace(spans, trace_id) if s.kind == SpanKind.SERVER and s.name.startswith("POST")
    ]
    assert hex_trace_id(submitted) == trace_id
    assert submitted.parent is not None and submitted.parent.span_id == server.context.span_id

    attempts = named(spans, "attempt", job["id"])
    assert [(a.attributes or {}).get("attempt.number") for a in attempts] == [1, 2]
    assert [(a.attributes or {}).get("attempt.outcome") for a in attempts] == ["failed", "succeeded"]
    assert [a.status.status_code for a in attempts] == [StatusCode.ERROR, StatusCode.UNSET]
    assert {hex_trace_id(a) for a in attempts} == {trace_id}
    # The attempts' statements are traced inside them (SQLAlchemy instrumentation).
    first = attempts[0].context.span_id
    assert any(
        s.parent and s.parent.span_id == first and s.kind == SpanKind.CLIENT
        for s in in_trace(spans, trace_id)
    )

    [callback] = named(spans, "callback.deliver", job["id"])
    assert hex_trace_id(callback) == trace_id
    [delivery] = receiver.accepted
    assert trace_id_of(delivery.headers["traceparent"]) == trace_id
    assert delivery.body["trace_id"] == trace_id


async def test_a_dead_job_keeps_its_trace_through_its_alert_a_replay_and_a_redis_flush(
    spans: InMemorySpanExporter, traced_client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    client = traced_client
    job = await submit(client, auth, "demo.flaky", fail_times=1, permanent=True)
    trace_id = job["trace_id"]
    await drain()
    assert (await get_job(client, auth, job["id"]))["status"] == "dead"
    await drain_alerts()
    [alert] = named(spans, "dead_letter.alert", job["id"])
    assert hex_trace_id(alert) == trace_id

    resp = await client.post(f"/v1/jobs/{job['id']}/replay", headers=auth)
    assert resp.status_code == 202 and resp.json()["trace_id"] == trace_id
    [replay] = named(spans, "replay", job["id"])
    assert hex_trace_id(replay) == trace_id
    # …linked to the replay request, which is a trace of its own.
    [link] = replay.links
    assert format(link.context.trace_id, "032x") != trace_id

    env.redis.flushall()  # the replayed job's message is gone; MySQL still says it is pending
    await asyncio.sleep(maintenance.grace_s() + 0.1)
    assert await maintenance.reconcile() == 1
    [reenqueue] = named(spans, "reenqueue", job["id"])
    assert hex_trace_id(reenqueue) == trace_id
    await drain()

    assert (await get_job(client, auth, job["id"]))["status"] == "done"
    attempts = named(spans, "attempt", job["id"])
    assert [(a.attributes or {}).get("job.replay") for a in attempts] == [0, 1]
    assert [(a.attributes or {}).get("attempt.outcome") for a in attempts] == ["failed", "succeeded"]
    assert {hex_trace_id(a) for a in attempts} == {trace_id}


async def test_a_message_without_trace_context_joins_the_trace_from_the_job_row(
    spans: InMemorySpanExporter, traced_client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    job = await submit(traced_client, auth, "demo.csv", rows=1)
    env.redis.flushall()
    assert await queue.enqueue_run(job["id"], 0)  # as an older release enqueued it: no traceparent
    await drain()
    [attempt] = named(spans, "attempt", job["id"])
    assert hex_trace_id(attempt) == job["trace_id"]
    assert (attempt.attributes or {}).get("attempt.outcome") == "succeeded"


async def test_with_tracing_off_jobs_have_no_trace_id_and_nothing_is_stored(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    job = await submit(client, auth, "demo.csv", rows=1)
    await drain()
    body = await get_job(client, auth, job["id"])
    assert body["status"] == "done"
    assert job["trace_id"] is None and body["trace_id"] is None
    async with session_scope() as session:
        row = await JobRepository(session).get_job(job["id"], EVERY_TENANT)
    assert row is not None and row.traceparent is None
