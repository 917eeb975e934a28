"""A real MariaDB restart between a robot's acceptance and our record of it: the alert is still sent once.

The fake robots stop the suite's MariaDB after reading the message and before answering `errcode: 0`; the
server comes back `DOWN_S` later, while the consumer is recording the send.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlmodel import select

from app.core.db import session_scope
from app.maintenance import service as maintenance
from app.models import AlertDelivery
from devtools.servers import MariaDBServer
from tests.utils.dead_letters import kill_permanently, letters
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.fakes.feishu import FakeFeishu
from tests.utils.outages import MariaDBBlip
from tests.utils.workers import drain_alerts

pytestmark = pytest.mark.timeout(120)

#: A blip "under a few seconds": longer than a bare restart here (~0.5 s), well under the record's bound.
DOWN_S = 2.0


@pytest.fixture
async def feishu(env: Any) -> AsyncIterator[FakeFeishu]:
    fake = FakeFeishu().start()
    await env.set(FEISHU_WEBHOOK_URL=fake.url, FEISHU_SECRET=fake.secret)
    yield fake
    fake.stop()


@pytest.fixture
async def blip(mariadb: MariaDBServer, env: Any) -> AsyncIterator[MariaDBBlip]:
    # The robot's answer waits for the server to stop: give the sink's HTTP call room for that.
    await env.set(ALERT_TIMEOUT_S=30)
    outage = MariaDBBlip(mariadb, DOWN_S)
    yield outage
    outage.wait_back()


async def delivery_states() -> list[tuple[str, str, int]]:
    async with session_scope() as session:
        rows = await session.execute(select(AlertDelivery).order_by(AlertDelivery.sink))
        return [(d.sink, d.status.value, d.attempts) for d in rows.scalars().all()]


async def scheduler_tick_then_consumer() -> None:
    """What happens next in production: the scheduler re-publishes pending alerts, a consumer takes them."""
    await asyncio.sleep(0.6)  # past the re-publish grace (SCAN_INTERVAL_S = 0.5 here)
    await maintenance.run_tick(use_lease=False)
    await drain_alerts()


async def test_mariadb_restart_between_send_and_record_sends_one_alert(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk, blip: MariaDBBlip
) -> None:
    [job_id] = await kill_permanently(client, auth)
    dingtalk.before_next_answer(blip)
    await drain_alerts()
    assert blip.happened
    await asyncio.to_thread(blip.wait_back)
    await scheduler_tick_then_consumer()
    await scheduler_tick_then_consumer()
    assert [r.reason for r in dingtalk.received] == [""], "the robot must receive the alert exactly once"
    assert job_id in dingtalk.accepted[0].text
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent" and letter["alert"]["sent_at"]
    assert await delivery_states() == [("dingtalk", "sent", 1)]


async def test_mariadb_restart_between_send_and_record_with_two_robots_sends_one_alert_to_each(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    dingtalk: FakeDingTalk,
    feishu: FakeFeishu,
    blip: MariaDBBlip,
) -> None:
    [job_id] = await kill_permanently(client, auth)
    feishu.before_next_answer(blip)  # Feishu's record hits the outage; DingTalk's may, depending on timing
    await drain_alerts()
    assert blip.happened
    await asyncio.to_thread(blip.wait_back)
    await scheduler_tick_then_consumer()
    assert [r.reason for r in feishu.received] == [""], "Feishu must receive the alert exactly once"
    assert [r.reason for r in dingtalk.received] == [""], "DingTalk must receive the alert exactly once"
    assert job_id in feishu.accepted[0].text and job_id in dingtalk.accepted[0].text
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent"
    assert await delivery_states() == [("dingtalk", "sent", 1), ("feishu", "sent", 1)]
