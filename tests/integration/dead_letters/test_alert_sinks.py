"""Several alert sinks at once (DingTalk, Feishu, generic webhook) against real local HTTP servers that
verify signatures: each sink gets every alert exactly once, with its own retries and its own budget."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlmodel import select

from app.core.config import Settings
from app.core.db import session_scope
from app.dead_letters.sinks import DingTalkSink, FeishuSink, LogSink, WebhookSink, build_sinks
from app.maintenance import service as maintenance
from app.models import AlertDelivery
from tests.utils.dead_letters import kill_permanently, letters
from tests.utils.fakes.dingtalk import FakeDingTalk
from tests.utils.fakes.feishu import FakeFeishu, expected_sign
from tests.utils.fakes.receiver import verify
from tests.utils.fakes.webhook import FakeWebhook
from tests.utils.jobs import submit_id
from tests.utils.workers import drain, drain_alerts


@pytest.fixture
async def feishu(env: Any) -> AsyncIterator[FakeFeishu]:
    fake = FakeFeishu().start()
    await env.set(FEISHU_WEBHOOK_URL=fake.url, FEISHU_SECRET=fake.secret)
    yield fake
    fake.stop()


@pytest.fixture
async def webhook(env: Any) -> AsyncIterator[FakeWebhook]:
    fake = FakeWebhook().start()
    await env.set(ALERT_WEBHOOK_URL=fake.url, ALERT_WEBHOOK_SECRET=fake.secret)
    yield fake
    fake.stop()


async def deliveries() -> list[AlertDelivery]:
    async with session_scope() as session:
        rows = await session.execute(select(AlertDelivery).order_by(AlertDelivery.id))  # type: ignore[arg-type]
        return list(rows.scalars().all())


async def wait_until(predicate: Any, timeout_s: float = 20) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_the_log_sink_is_used_only_without_a_webhook_sink() -> None:
    def kinds(**values: Any) -> list[type]:
        return [type(s) for s in build_sinks(Settings(_env_file=None, **values))]

    assert kinds() == [LogSink]
    assert kinds(feishu_webhook_url="", alert_webhook_url=" ") == [LogSink]
    assert kinds(feishu_webhook_url="http://f", alert_webhook_url="http://w") == [FeishuSink, WebhookSink]
    assert kinds(
        dingtalk_webhook_url="http://d", feishu_webhook_url="http://f", alert_webhook_url="http://w"
    ) == [
        DingTalkSink,
        FeishuSink,
        WebhookSink,
    ]


async def test_feishu_alone_gets_one_correctly_signed_card_per_dead_job(
    client: httpx.AsyncClient, auth: dict[str, str], feishu: FakeFeishu
) -> None:
    first = await kill_permanently(client, auth)
    await drain_alerts()
    second = await kill_permanently(client, auth)
    await drain_alerts()
    assert [r.reason for r in feishu.received] == ["", ""]
    for (job_id,), received in zip((first, second), feishu.received, strict=True):
        body = received.body
        assert body["msg_type"] == "interactive" and isinstance(body["timestamp"], str)
        assert body["sign"] == expected_sign(feishu.secret, int(body["timestamp"]))
        assert received.title == f"Report job dead: {job_id}"
        for expected in (job_id, "demo.flaky", "acme", "PermanentError", f"reportctl replay {job_id}"):
            assert expected in received.text, (expected, received.text)
    assert all(item["alert"]["status"] == "sent" for item in await letters(client, auth))
    # The scheduler and the consumer running again send nothing more.
    await maintenance.run_tick(use_lease=False)
    await drain_alerts()
    assert len(feishu.received) == 2
    assert [(d.sink, d.status.value, d.attempts) for d in await deliveries()] == [("feishu", "sent", 1)] * 2


async def test_a_wrong_feishu_signature_is_refused_and_the_alert_waits_until_the_secrets_match(
    client: httpx.AsyncClient, auth: dict[str, str], feishu: FakeFeishu
) -> None:
    configured = feishu.secret
    feishu.secret = "the-bot-secret-was-rotated"
    [job_id] = await kill_permanently(client, auth)
    consumer = asyncio.create_task(drain_alerts())
    await wait_until(lambda: len(feishu.received) >= 2)
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "pending"
    feishu.secret = configured
    await consumer
    reasons = [r.reason for r in feishu.received]
    assert set(reasons[:-1]) == {"sign"} and reasons[-1] == "", reasons
    assert job_id in feishu.accepted[0].text
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent"


async def test_webhook_alone_is_signed_like_callbacks_and_carries_title_markdown_job_ids(
    client: httpx.AsyncClient, auth: dict[str, str], webhook: FakeWebhook
) -> None:
    webhook.script = ["http500"]
    [job_id] = await kill_permanently(client, auth)
    await drain_alerts()
    assert [r.answered for r in webhook.received] == [500, 204]
    received = webhook.accepted[0]
    assert received.signature_ok and received.headers["x-report-event"] == "dead_letters"
    assert received.headers["x-report-signature"].startswith("t=")
    raw = json.dumps(received.body, separators=(",", ":"), ensure_ascii=False).encode()
    assert verify(webhook.secret, received.headers["x-report-signature"], raw)
    assert not verify("some-other-secret", received.headers["x-report-signature"], raw)
    assert set(received.body) == {"title", "markdown", "job_ids", "sent_at"}
    assert received.body["job_ids"] == [job_id]
    assert received.body["title"] == f"Report job dead: {job_id}"
    assert f"reportctl replay {job_id}" in received.body["markdown"]
    assert received.body["sent_at"].endswith("Z")
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent"


async def test_dingtalk_feishu_and_webhook_together_each_receive_the_alert_exactly_once(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    dingtalk: FakeDingTalk,
    feishu: FakeFeishu,
    webhook: FakeWebhook,
) -> None:
    [job_id] = await kill_permanently(client, auth)
    await drain_alerts()
    await asyncio.sleep(0.6)
    await maintenance.run_tick(use_lease=False)
    await drain_alerts()
    assert [r.reason for r in dingtalk.received] == [""]
    assert [r.reason for r in feishu.received] == [""]
    assert [r.answered for r in webhook.received] == [204] and webhook.received[0].signature_ok
    for text in (dingtalk.accepted[0].text, feishu.accepted[0].text, webhook.accepted[0].text):
        assert job_id in text
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent"
    rows = await deliveries()
    assert sorted((d.sink, d.status.value) for d in rows) == [
        ("dingtalk", "sent"),
        ("feishu", "sent"),
        ("webhook", "sent"),
    ]
    assert len({d.message_id for d in rows}) == 3


async def test_failing_feishu_is_retried_alone_and_the_letter_is_sent_only_after_both_accepted(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: FakeDingTalk, feishu: FakeFeishu
) -> None:
    feishu.script = ["code", "http500", "statuscode", "hang", "code"]
    [job_id] = await kill_permanently(client, auth)
    consumer = asyncio.create_task(drain_alerts())
    await wait_until(lambda: len(dingtalk.accepted) == 1 and len(feishu.received) >= 2)
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "pending" and letter["alert"]["sent_at"] is None
    assert letter["error"]["type"] == "PermanentError"
    await consumer
    assert [r.reason for r in dingtalk.received] == [""]
    assert [r.reason for r in feishu.received] == ["code", "http500", "statuscode", "hang", "code", ""]
    assert job_id in dingtalk.accepted[0].text and job_id in feishu.accepted[0].text
    [letter] = await letters(client, auth)
    assert letter["alert"]["status"] == "sent"
    by_sink = {d.sink: d for d in await deliveries()}
    assert (by_sink["dingtalk"].attempts, by_sink["feishu"].attempts) == (1, 6)
    assert by_sink["dingtalk"].sent_at is not None and by_sink["feishu"].sent_at is not None
    assert by_sink["feishu"].sent_at > by_sink["dingtalk"].sent_at
    # sent_at is when the last sink accepted.
    assert letter["alert"]["sent_at"].startswith(by_sink["feishu"].sent_at.strftime("%Y-%m-%dT%H:%M:%S"))
    await maintenance.run_tick(use_lease=False)
    await drain_alerts()
    assert len(dingtalk.received) == 1 and len(feishu.received) == 6


async def test_thirty_jobs_dying_at_once_with_three_sinks_keep_each_budget_and_name_every_job_everywhere(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    dingtalk: FakeDingTalk,
    feishu: FakeFeishu,
    webhook: FakeWebhook,
    env: Any,
) -> None:
    await env.set(ALERT_MAX_PER_MINUTE="3", ALERT_RATE_WINDOW_S="2", ALERT_COALESCE_S="0")
    # A long-running consumer sees 30 jobs die in ten waves over a few seconds: more than the budget allows.
    consumer = asyncio.create_task(drain_alerts(burst=False))
    ids: list[str] = []
    for _ in range(10):
        ids += [await submit_id(client, auth, "demo.flaky", fail_times=1, permanent=True) for _ in range(3)]
        await drain(workers=2)
        await asyncio.sleep(0.2)
    for _ in range(400):
        if all(item["alert"]["status"] == "sent" for item in await letters(client, auth, limit=200)):
            break
        await asyncio.sleep(0.1)
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    assert all(r.accepted for r in dingtalk.received), [r.reason for r in dingtalk.received]
    assert all(r.accepted for r in feishu.received), [r.reason for r in feishu.received]
    assert all(r.accepted for r in webhook.received), [r.answered for r in webhook.received]
    times = {
        "dingtalk": sorted(r.at for r in dingtalk.accepted),
        "feishu": sorted(r.at for r in feishu.accepted),
        "webhook": sorted(r.at for r in webhook.accepted),
    }
    for sink, sent in times.items():
        assert len(sent) > 3, (sink, sent)  # the budget mattered: messages spread over several windows
        assert all(sum(1 for t in sent if s <= t < s + 2) <= 3 for s in sent), (sink, sent)
    for sink, texts in (
        ("dingtalk", [r.text for r in dingtalk.accepted]),
        ("feishu", [r.text for r in feishu.accepted]),
        ("webhook", [r.text for r in webhook.accepted]),
    ):
        mentioned = "\n".join(texts)
        assert [i for i in ids if i not in mentioned] == [], sink
    named = [job for r in webhook.accepted for job in r.body["job_ids"]]
    assert sorted(named) == sorted(ids)  # the webhook's job_ids name each job exactly once
    assert all(item["alert"]["status"] == "sent" for item in await letters(client, auth, limit=200))
