"""Adversarial review of report deliveries and owners' notices: interleavings, lost answers and timing that
lose, strand, duplicate or miscount a delivery. Each test states the finding it reproduced on the code as
reviewed; they pass since the fixes (a round a resend, the lease's token, the rows a notice really inserted,
a bounded WeCom wait) and stay as regressions.

Real MariaDB, Redis, in-process burst workers and the suite's fake receivers; the interleavings are forced
with small wrappers around the product's own functions (no sleeps).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest

from app.core.config import get_settings
from app.core.failpoints import FailpointOutage
from app.destinations import delivery as delivery_mod
from app.destinations.delivery import PER_MINUTE, lease_s, republish_due
from app.destinations.repository import DeliveryRepository
from app.destinations.senders import wecom as wecom_mod
from app.destinations.senders.wecom import WeComSender
from app.maintenance import deadlines as deadlines_mod
from app.maintenance.deadlines import check_deadlines
from app.schedules.firing import fire_due
from tests.integration.destinations.test_owner_notices import (
    hourly_with_owners,
    next_whole_hour_a_day_ahead,
    notices,
)
from tests.utils.destinations import deliveries, make_destination, webhook_body
from tests.utils.jobs import submit_id
from tests.utils.workers import drain, drain_alerts
from workers.dead_letter import worker_options

HOOK = {"deliver_to": [{"destination": "warehouse-hook"}]}


async def _resend(client: httpx.AsyncClient, auth: dict[str, str], job_id: str, delivery_id: str) -> None:
    resp = await client.post(f"/v1/jobs/{job_id}/deliveries/{delivery_id}/resend", headers=auth)
    assert resp.status_code == 202, resp.text


async def test_a_resend_landing_while_the_sends_arq_job_still_runs_is_sent(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding: a resend accepted (202) while the delivery's previous arq job `dl:<id>` is still running
    (its send recorded, the job not yet finished) is published under the same arq id, which arq drops as a
    duplicate of the running job; `enqueue_delivery` still answers True. The row stays `pending`, due and
    unsent after the notifications channel is drained: only a later scheduler tick's `republish_due` finds
    it (and with no scheduler running, never).

    Interleaving: worker W runs arq job dl:X → deliver → send → record `sent` (commit) → [person clicks
    Resend: row pending, tries 0; enqueue dl:X → arq: job dl:X exists → None] → W's job ends → queue empty.
    """
    await make_destination(client, auth, webhook_body(receiver))
    job_id = await submit_id(client, auth, "demo.csv", job=HOOK, rows=1)
    await drain()
    [row] = await deliveries(client, auth, job_id)
    real = delivery_mod._recorded
    clicked: list[str] = []

    async def recorded_then_resend(*args: Any, **kwargs: Any) -> Any:
        outcome = await real(*args, **kwargs)
        if not clicked:  # the first send is recorded; its arq job has not returned yet
            clicked.append(row["id"])
            await _resend(client, auth, job_id, row["id"])
        return outcome

    monkeypatch.setattr(delivery_mod, "_recorded", recorded_then_resend)
    await drain_alerts()
    assert clicked
    [after] = await deliveries(client, auth, job_id)
    assert len(receiver.accepted) == 2, f"resend stranded: {after['status']}, tries {after['tries']}"


async def test_a_resend_during_a_lost_record_answer_is_sent_again(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding (ABA on `tries`): `record_try` is a compare-and-set on the try count read before the send, and
    `resend` puts that count back to 0. When a send's record commits but its answer is lost (the connection
    drops as it commits, which `_recorded` rides out by running the record again), a resend that lands in
    that gap is overwritten by the retried record: the row reads `sent`, tries 1, and the resend is never
    sent (not by the drain, not by the scheduler's `republish_due`).

    Interleaving: sender leases (tries 0) → sends → UPDATE … WHERE tries=0 SET sent, tries=1 → COMMIT lands,
    answer lost → [Resend: pending, tries 0] → outage retry: UPDATE … WHERE tries=0 matches again → sent.
    """
    await make_destination(client, auth, webhook_body(receiver))
    job_id = await submit_id(client, auth, "demo.csv", job=HOOK, rows=1)
    await drain()
    [row] = await deliveries(client, auth, job_id)
    real = DeliveryRepository.record_try
    lost: list[bool] = []

    async def commit_then_lose_the_answer(self: DeliveryRepository, *args: Any, **kwargs: Any) -> int:
        changed = await real(self, *args, **kwargs)
        if not lost:
            lost.append(True)
            await self.session.commit()  # the record landed …
            await _resend(client, auth, job_id, row["id"])  # … a person asks for it once more …
            raise FailpointOutage("the commit's answer was lost")  # … and the sender never heard back
        return changed

    monkeypatch.setattr(DeliveryRepository, "record_try", commit_then_lose_the_answer)
    await drain_alerts()
    monkeypatch.setattr(DeliveryRepository, "record_try", real)
    await republish_due()  # what the scheduler's next tick would do for anything left pending
    await drain_alerts()
    assert lost
    [after] = await deliveries(client, auth, job_id)
    assert len(receiver.accepted) == 2, f"resend swallowed: {after['status']}, tries {after['tries']}"


async def test_two_deadline_checks_at_once_count_one_late_notice_once(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding (miscount): `stage_notice` returns the ids of every row it tried to insert, including those
    INSERT IGNORE left out (the subject had its row already), and `check_deadlines` returns their count. Two
    checks that read the same due fire (two scheduler processes when Redis is away: `run_tick` then runs
    without its lease; or any direct caller) both report a notice staged: the tick reports 2 `late_notices`
    for the one notice sent, and publishes an arq message for a delivery id that does not exist.

    Interleaving: check A reads due fires → check B reads the same → A stages + clears + commits → B's INSERT
    IGNORE leaves its row out, B clears nothing new, B returns 1 as well.
    """
    await make_destination(client, auth, webhook_body(receiver))
    base = next_whole_hour_a_day_ahead()
    deadline = f"{base + timedelta(minutes=30):%H:%M}"
    await hourly_with_owners(client, auth, base, deadline=deadline, params={"rows": 1})
    assert await fire_due(base + timedelta(seconds=1)) == 1
    both_read = asyncio.Barrier(2)
    real_waiting_for = deadlines_mod.waiting_for

    async def waiting_for_after_both_read(jobs: Any) -> Any:
        await both_read.wait()  # both checks have read the due fires
        return await real_waiting_for(jobs)

    monkeypatch.setattr(deadlines_mod, "waiting_for", waiting_for_after_both_read)
    now = base + timedelta(minutes=31)
    counts = await asyncio.gather(check_deadlines(now), check_deadlines(now))
    await drain_alerts()
    assert len(notices(receiver, "late")) == 1  # sent once: the unique key holds
    assert sum(counts) == 1, f"one late notice staged, the checks report {counts}"


async def test_wecom_sends_never_wait_for_a_slot_past_their_lease(
    wecom: Any, env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding (lease and arq timeout outrun by the in-process spacing): the robot's rate token admits
    PER_MINUTE["wecom"] = 20 *deliveries* a minute, but a WeCom delivery with mentions is two messages, and
    `WeComSender._space` books each message a 3 s slot in this process and sleeps until it, *inside* the
    lease. The 20 deliveries one minute admits book 40 slots: the last message waits 117 s, beyond the
    lease (`lease_s()` = 4 x 10 + 30 + 30 = 100 s by default) and at arq's job_timeout (120 s) before its
    own HTTP call. A lease that runs out lets another sender (republish after arq cancels the job at 120 s)
    send the report again (its body went out, the mention did not); a cancelled sender's slots stay booked,
    and the next minute's 20 deliveries book from 120 s on: under steady load every send is cancelled by
    job_timeout before it posts (none sent, each republished again).

    Reproduced by booking the slots of the 20 admitted deliveries the way 20 concurrent sends do (all
    reports first, then all mentions), without waiting for them.
    """
    monkeypatch.setattr(wecom_mod, "_next_slot", {})  # this process's bookings, left clean for the rest
    sender = WeComSender(wecom.url, mentioned_mobiles=["13800000000"])
    start = time.monotonic()
    for _ in range(2 * PER_MINUTE["wecom"]):  # 20 deliveries x (the report, then its mention)
        booking = asyncio.ensure_future(sender._space())
        await asyncio.sleep(0)  # the slot is booked before the first await; the wait is not needed
        booking.cancel()
    last_slot_in_s = wecom_mod._next_slot[wecom.url] - wecom_mod.MIN_INTERVAL_S - start
    send_done_by_s = last_slot_in_s + get_settings().delivery_timeout_s
    limit_s = min(lease_s(), float(worker_options()["job_timeout"]))
    assert send_done_by_s <= limit_s, (
        f"the last admitted delivery posts {last_slot_in_s:.0f} s in, its lease/job ends at {limit_s:.0f} s"
    )
