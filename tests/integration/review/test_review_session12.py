"""Review, session 12: the notices' digest at staging time (A), the batched slot checks (B) and retention's
resumed walk (C), attacked at unlucky moments against the suite's real MariaDB and Redis and fake robots
that are real local HTTP servers. Each test failed on c61a174 and passes since the fix.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest

from app.core.db import session_scope
from app.core.failpoints import FailpointOutage
from app.core.states import DeliveryStatus
from app.core.times import utcnow
from app.destinations.delivery import stage_notice
from app.maintenance import service as maintenance
from app.maintenance.repository import MaintenanceRepository
from tests.utils.destinations import make_destination, webhook_body
from tests.utils.fakes.receiver import Receiver
from tests.utils.notice_digests import (
    LONG_ERROR,
    a_notice,
    digest_ids,
    rows,
    send_when_due,
    stage,
)
from tests.utils.retention import count_rows, insert_finished_jobs

pytestmark = pytest.mark.timeout(180)


def _whole(notice: Any, content: str) -> bool:
    """The notice's title and every fact, as the digest renders them, in one robot message."""
    lines = [notice.title, *(f"- **{k}**: {v}" for k, v in notice.lines)]
    return all(line in content for line in lines)


async def test_a_wecom_digest_packed_near_the_limit_is_cut_and_its_last_notice_recorded_sent_unsent(
    client: httpx.AsyncClient, auth: dict[str, str], wecom: Any
) -> None:
    """Interleaving (no race needed, only unlucky sizes):
    1. eight owners' notices (26-character job ids, an error of 368 characters) are staged for one WeCom
       destination within NOTICE_COALESCE_S: one digest;
    2. digest_messages packs them: it measures each candidate with an empty title ("## \\n\\n### \\n\\n...")
       and adds the longest title's bytes once, so all eight fit "under" 4,096 bytes in one group;
    3. the real message is "## <title>\\n\\n### <title>\\n\\n..." - the title is counted once, sent twice: the
       message is over 4,096 bytes, and _fitted cuts it (the path documented as "never one of several
       notices") - the last notice's Error line (and more) is gone;
    4. WeCom accepts the cut message; record_try marks every notice of the digest SENT.
    The last notice is recorded sent though its facts were in no accepted message."""
    target = await make_destination(client, auth, {"kind": "wecom", "name": "ops-wecom", "url": wecom.url})
    staged = [a_notice([target["id"]], n, f"E{n}".ljust(368, "E")) for n in range(8)]  # each its own
    ids = await stage(staged)
    [digest_id] = await digest_ids()
    assert await send_when_due(digest_id) == "sent"
    contents = [r.content for r in wecom.accepted]
    assert {r.status for r in await rows(ids)} == {DeliveryStatus.SENT}  # every notice recorded sent ...
    for notice in staged:  # ... so each must be whole in an accepted message
        assert sum(_whole(notice, c) for c in contents) == 1, f"{notice.title} recorded sent, not delivered"


async def test_notices_in_an_accepted_part_are_recorded_failed_when_a_later_part_fails_for_good(
    client: httpx.AsyncClient, auth: dict[str, str], wecom: Any, env: Any
) -> None:
    """Interleaving:
    1. 24 notices with a long error are staged for one WeCom destination: one digest, several messages;
    2. the sender leases it; WeCom accepts message 1 (parts_sent=1 via _progress);
    3. WeCom refuses message 2 (errcode -1) and this is the digest's last try (DELIVERY_MAX_ATTEMPTS=1; the
       same happens at try N of N, or at once for a 'not sendable' ValueError, final=True);
    4. record_try writes status FAILED on the digest and on every notice linked to it, including the
       notices whose whole text WeCom accepted in message 1.
    The owners (job pages, the console's failing destinations) are told these notices failed though they
    were delivered; a person's resend of one then sends it a second time."""
    await env.set(DELIVERY_MAX_ATTEMPTS="1")
    target = await make_destination(client, auth, {"kind": "wecom", "name": "ops-wecom", "url": wecom.url})
    staged = [a_notice([target["id"]], n, LONG_ERROR) for n in range(24)]
    ids = await stage(staged)
    [digest_id] = await digest_ids()
    wecom.script = ["ok", "errcode"]
    assert (await send_when_due(digest_id)).startswith("failed after 1 tries")
    [accepted] = [r.content for r in wecom.accepted]
    by_subject = {r.subject: r for r in await rows(ids)}
    delivered = [n for n in staged if _whole(n, accepted)]
    assert delivered, "message 1 carried some notices whole"
    assert {by_subject[n.subject].status for n in delivered} == {DeliveryStatus.SENT}


async def test_two_transactions_staging_several_notices_deadlock_on_the_digest_slots(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    """Interleaving (what check_deadlines does for two late fires, against a worker's success batch staging
    two jobs' slow notices, _complete_together -> terminal_effects for each won key in one transaction):
    1. T1 (the deadline check) stages schedule A's late notice to d1: join() locks d1's slot row;
    2. T2 (a success batch) stages job X's slow notice to d2: locks d2's slot row;
    3. T1 stages schedule B's late notice to d2: waits for d2's slot (T2);
    4. T2 stages job Y's slow notice to d1: waits for d1's slot (T1) - a cycle: MariaDB kills one (1213).
    join()'s docstring: 'two stagers then take slots in one order' holds for one notice's destinations only.
    """
    second = Receiver().start()
    try:
        d1 = await make_destination(client, auth, webhook_body(receiver))
        d2 = await make_destination(client, auth, webhook_body(second, name="second-hook"))
        first_locked, second_locked = asyncio.Event(), asyncio.Event()

        async def deadline_check() -> None:
            async with session_scope() as session:
                await stage_notice(session, a_notice([d1["id"]], 1))
                first_locked.set()
                await second_locked.wait()
                await stage_notice(session, a_notice([d2["id"]], 2))

        async def success_batch() -> None:
            await first_locked.wait()
            async with session_scope() as session:
                await stage_notice(session, a_notice([d2["id"]], 3))
                second_locked.set()
                await asyncio.sleep(0.5)  # T1 is waiting for d2's slot by now
                await stage_notice(session, a_notice([d1["id"]], 4))

        outcomes = await asyncio.gather(deadline_check(), success_batch(), return_exceptions=True)
        assert [repr(o) for o in outcomes if isinstance(o, BaseException)] == []
    finally:
        second.stop()


async def test_expired_jobs_of_a_batch_whose_delete_met_an_outage_wait_a_revisit_not_a_tick(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interleaving:
    1. 100 jobs expired (finished 10 minutes ago, JOB_RETENTION_S=60);
    2. tick 1: next_page reads them and sets _walk_from[done] to the page's last entry (it is older than the
       LATE_COMMIT_S floor, so kept as is); the batch's DELETE then meets a MariaDB outage (or a deadlock
       with a replay) and the tick ends with the error;
    3. MariaDB is back; tick 2 resumes the walk after the last job of that page: it reads nothing;
    4. every tick until REVISIT_S passes does the same: the 100 expired jobs are kept 15 minutes, where
       before this change the next tick purged them."""
    await env.set(JOB_RETENTION_S="60", SCAN_INTERVAL_S="60")
    batch = await insert_finished_jobs(100, utcnow() - timedelta(minutes=10))
    real = MaintenanceRepository.delete_expired
    failed = [False]

    async def once_gone(self: MaintenanceRepository, job_ids: Any, expiry: Any) -> int:
        if not failed[0]:
            failed[0] = True
            raise FailpointOutage("MariaDB went away during the retention DELETE")
        return await real(self, job_ids, expiry)

    monkeypatch.setattr(MaintenanceRepository, "delete_expired", once_gone)
    with pytest.raises(FailpointOutage):
        await maintenance.purge_expired_jobs()
    assert await count_rows("report_jobs") == batch.count  # nothing went: the outage kept the batch
    purged = [await maintenance.purge_expired_jobs() for _ in range(3)]  # the next ticks, MariaDB back
    assert sum(purged) == batch.count, f"ticks after the outage purged {purged}"
