"""Two dead-letter consumers dispatching alerts at once through a slow webhook: the dispatch lease is renewed
before each send, so no pending alert goes out twice, and a dispatcher that lost its lease stops sending.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlmodel import select

from app.core.config import Settings
from app.core.db import session_scope
from app.dead_letters import dispatch
from app.dead_letters.sinks import render
from app.models import AlertDelivery
from tests.utils.alert_lease import answer_slowly, dispatch_while, lease_holder, take_lease_over
from tests.utils.dead_letters import kill_permanently, letters
from tests.utils.fakes.webhook import FakeWebhook
from tests.utils.polling import eventually

pytestmark = pytest.mark.timeout(90)

# Shrunk from 80 s: ample room for one send (SEND_S, plus the HTTP client and the record, slow on a busy
# machine), while LETTERS sends in a row outlast it.
LEASE_S = 2.0
SEND_S = 0.6
LETTERS = 5


def shrunk_lease(settings: Settings) -> float:
    return LEASE_S


@pytest.fixture
async def webhook(env: Any, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeWebhook]:
    fake = FakeWebhook().start()
    # ALERT_TIMEOUT_S: the sink's HTTP client waits out a slow answer.
    await env.set(
        ALERT_WEBHOOK_URL=fake.url, ALERT_WEBHOOK_SECRET=fake.secret, ALERT_COALESCE_S=0, ALERT_TIMEOUT_S=2
    )
    monkeypatch.setattr(dispatch, "lease_s", shrunk_lease)
    # A digest is split only past MAX_MESSAGE_BYTES: with no room at all, each letter is a message of its own.
    monkeypatch.setattr(render, "MAX_MESSAGE_BYTES", 0)
    yield fake
    fake.stop()


async def delivery_states() -> Counter[str]:
    async with session_scope() as session:
        rows = await session.execute(select(AlertDelivery))
        return Counter(d.status.value for d in rows.scalars().all())


async def test_a_dispatch_outlasting_its_lease_is_not_sent_again_by_a_second_consumer(
    client: httpx.AsyncClient, auth: dict[str, str], webhook: FakeWebhook
) -> None:
    job_ids = await kill_permanently(client, auth, n=LETTERS)
    answer_slowly(webhook, SEND_S, requests=2 * LETTERS)  # duplicates, if any, are slow too
    first = asyncio.create_task(dispatch.dispatch_alerts())
    await eventually(lambda: webhook.received, 10, "the first dispatcher's first send", interval=0.01)
    second = await dispatch_while(first)
    outcome = await first

    assert outcome.retry_in_s is None, outcome
    sent = [r.body["job_ids"] for r in webhook.received]
    assert all(len(ids) == 1 for ids in sent), sent
    assert webhook.received[-1].at - webhook.received[0].at > LEASE_S, "the dispatch must outlast one lease"
    assert second, "the second consumer must have tried while the first was sending"
    times_sent = Counter(ids[0] for ids in sent)
    assert times_sent == dict.fromkeys(job_ids, 1), "each alert must be sent exactly once"
    assert all(r.accepted for r in webhook.received)
    assert all(item["alert"]["status"] == "sent" for item in await letters(client, auth))


async def test_a_dispatcher_whose_lease_was_taken_over_sends_nothing_more_and_asks_to_retry(
    client: httpx.AsyncClient, auth: dict[str, str], webhook: FakeWebhook, env: Any
) -> None:
    await kill_permanently(client, auth, n=3)
    # During the first send the lease passes to another dispatcher (ours expired in a long pause, say).
    webhook.before_next_answer(lambda: take_lease_over(env.redis.url))
    outcome = await dispatch.dispatch_alerts()

    assert len(webhook.received) == 1, [r.body["job_ids"] for r in webhook.received]
    assert outcome.retry_in_s is not None and "lease" in outcome.detail, outcome
    # The send it made is recorded; the other two are left to the lease's holder, whose lock stays in place.
    assert await delivery_states() == {"sent": 1, "pending": 2}
    assert lease_holder(env.redis.url) == "another-dispatcher"
