"""Owners' notices go out digested: those staged for a destination within NOTICE_COALESCE_S are one digest,
split under a robot's size limit, each notice recorded sent only with an accepted message naming it; a retry
sends the same notices under the same key; the record is one transaction within the lease; nothing is
stranded; the webhook gets every notice's facts; racing senders and stagers never deadlock.

The six faults an adversarial review reproduced in a send-time digest (reverted in 6419b64), each done for
real here: real MariaDB (restarted in one test), Redis, the notifications worker, fake robots that check
keys and signatures, a webhook receiver that verifies them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

from app.core.states import DeliveryStatus
from app.destinations.delivery import republish_due
from app.maintenance import service as maintenance
from tests.utils.destinations import dingtalk_body, make_destination, told, webhook_body
from tests.utils.fakes.receiver import Receiver
from tests.utils.notice_digests import (
    LONG_ERROR,
    a_notice,
    digest_ids,
    digest_rows,
    rows,
    send_when_due,
    stage,
)
from tests.utils.outages import MariaDBBlip
from tests.utils.workers import drain_alerts

pytestmark = pytest.mark.timeout(180)


async def test_a_digest_over_wecoms_4096_bytes_goes_in_several_messages_and_no_notice_is_cut(
    client: httpx.AsyncClient, auth: dict[str, str], wecom: Any
) -> None:
    target = await make_destination(client, auth, {"kind": "wecom", "name": "ops-wecom", "url": wecom.url})
    staged = [a_notice([target["id"]], n, LONG_ERROR) for n in range(24)]
    ids = await stage(staged)
    [digest_id] = await digest_ids()
    assert await send_when_due(digest_id) == "sent"
    contents = [r.content for r in wecom.accepted]
    assert len(contents) > 1 and len(wecom.received) == len(contents)
    assert all(len(c.encode()) <= 4096 and "\n…" not in c for c in contents)
    for notice in staged:  # each notice whole (its title and every fact) in exactly one accepted message
        lines = [notice.title, *(f"- **{k}**: {v}" for k, v in notice.lines)]
        assert sum(all(line in c for line in lines) for c in contents) == 1, notice.title
    assert {(r.status, r.tries) for r in await rows(ids)} == {(DeliveryStatus.SENT, 1)}


async def test_a_retried_digest_sends_the_same_notices_under_the_same_idempotency_key(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, env: Any
) -> None:
    await env.set(DELIVERY_RETRY_MIN_S="0.2")
    target = await make_destination(client, auth, webhook_body(receiver))
    first = await stage([a_notice([target["id"]], n) for n in range(2)])
    [digest_id] = await digest_ids()
    receiver.script = ["http500"]
    assert (await send_when_due(digest_id)).startswith("try 1 failed")
    later = await stage([a_notice([target["id"]], 2)])  # the first digest is closed: this opens another
    assert await send_when_due(digest_id) == "sent"
    [_, later_digest] = await digest_ids()
    assert await send_when_due(later_digest) == "sent"
    failed, retried, other = receiver.received
    assert failed.answered == 500 and retried.answered == other.answered == 200
    key = failed.headers["idempotency-key"]
    assert retried.headers["idempotency-key"] == key == digest_id
    assert [n["subject"] for n in failed.body["notices"]] == [n["subject"] for n in retried.body["notices"]]
    assert len(failed.body["notices"]) == 2 and other.headers["idempotency-key"] == later[0] != key
    assert {r.status for r in await rows(first + later)} == {DeliveryStatus.SENT}


async def test_a_digest_is_recorded_whole_in_one_transaction_within_its_lease_across_a_mariadb_restart(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any, blip: MariaDBBlip
) -> None:
    target = await make_destination(client, auth, dingtalk_body(dingtalk))
    ids = await stage([a_notice([target["id"]], n) for n in range(3)])
    [digest_id] = await digest_ids()
    dingtalk.before_next_answer(blip)  # MariaDB stops between the robot's answer and our record
    assert await send_when_due(digest_id) == "sent"
    assert blip.happened
    await asyncio.to_thread(blip.wait_back)
    for _ in range(2):  # what production does next: the scheduler re-publishes what is due, a consumer runs
        await maintenance.run_tick(use_lease=False)
        await drain_alerts()
    assert [r.reason for r in dingtalk.received] == [""], "the digest must reach the robot exactly once"
    [digest] = await digest_rows()
    assert (digest.status, digest.tries, digest.lease_token) == (DeliveryStatus.SENT, 1, None)
    notices = await rows(ids)
    assert {(r.status, r.tries, r.sent_at) for r in notices} == {(DeliveryStatus.SENT, 1, digest.sent_at)}


async def test_no_notice_is_stranded_without_a_message_after_a_failed_digest(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, env: Any
) -> None:
    await env.set(DELIVERY_RETRY_MIN_S="0.2")
    target = await make_destination(client, auth, webhook_body(receiver))
    ids = await stage([a_notice([target["id"]], n) for n in range(3)])
    [digest_id] = await digest_ids()
    receiver.script = ["http500", "hang"]  # refused, then no answer at all (a timeout)
    await env.set(DELIVERY_TIMEOUT_S="0.5")
    assert (await send_when_due(digest_id)).startswith("try 1 failed")
    ids += await stage([a_notice([target["id"]], 3)])  # while the first waits for its retry
    await drain_alerts()  # the notifications worker: every message published at staging, and the retries
    assert await republish_due() == 0 and {d.status for d in await digest_rows()} == {DeliveryStatus.SENT}
    subjects = Counter(n["subject"] for n in told(receiver))
    assert sorted(subjects.values()) == [1, 1, 1, 1]
    assert {r.status for r in await rows(ids)} == {DeliveryStatus.SENT}
    assert {r.subject for r in await rows(ids)} == set(subjects)


async def test_a_webhook_digest_carries_every_notices_facts(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    target = await make_destination(client, auth, webhook_body(receiver))
    staged = [a_notice([target["id"]], n, error=f"error {n}") for n in range(3)]
    await stage(staged)
    [digest_id] = await digest_ids()
    assert await send_when_due(digest_id) == "sent"
    [message] = receiver.accepted
    assert message.headers["x-report-event"] == "report.notice" and message.body["digest_id"] == digest_id
    assert [(n["subject"], n["title"], n["facts"]) for n in message.body["notices"]] == [
        (notice.subject, notice.title, dict(notice.lines)) for notice in staged
    ]


async def test_senders_and_stagers_racing_over_two_destinations_never_deadlock(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, env: Any
) -> None:
    await env.set(NOTICE_COALESCE_S="0.5")
    second = Receiver().start()
    try:
        one = await make_destination(client, auth, webhook_body(receiver))
        two = await make_destination(client, auth, webhook_body(second, name="second-hook"))
        orders = [[one["id"], two["id"]], [two["id"], one["id"]]]
        notices = [a_notice(orders[n % 2], n) for n in range(24)]

        async def senders() -> None:
            for _ in range(10):  # several senders for every digest there is, while stagers add more
                await asyncio.gather(*(send_when_due(d) for d in await digest_ids() for _ in range(3)))
                await asyncio.sleep(0.05)

        staging = [stage(notices[n : n + 4]) for n in range(0, len(notices), 4)]
        await asyncio.gather(*staging, senders())
        await republish_due()
        await drain_alerts()
        for fake in (receiver, second):
            subjects = Counter(n["subject"] for n in told(fake))
            assert subjects == Counter({n.subject: 1 for n in notices}), "each notice once, to each"
        assert {d.status for d in await digest_rows()} == {DeliveryStatus.SENT}
    finally:
        second.stop()
