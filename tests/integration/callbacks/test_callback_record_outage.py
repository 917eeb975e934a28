"""A real MariaDB restart between a receiver's 200 and our record of it: the callback is still POSTed once.

The receiver stops the suite's MariaDB after reading the callback and before answering; the server comes back
`DOWN_S` later, while the consumer is recording the try.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from app.maintenance import service as maintenance
from devtools.servers import MariaDBServer
from tests.utils.fakes.receiver import Receiver
from tests.utils.jobs import submit
from tests.utils.outages import MariaDBBlip
from tests.utils.workers import drain, drain_alerts

pytestmark = pytest.mark.timeout(120)

#: A blip "under a few seconds": longer than a bare restart here, well under the record's bound.
DOWN_S = 2.0


async def test_mariadb_restart_between_callback_answer_and_record_delivers_once(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, receiver: Receiver, mariadb: MariaDBServer
) -> None:
    # The receiver's answer waits for the server to stop: give the POST room for that.
    await env.set(CALLBACK_TIMEOUT_S=30)
    job = await submit(client, auth, "demo.csv", job={"callback_url": receiver.url}, rows=1)
    await drain()
    blip = MariaDBBlip(mariadb, DOWN_S)
    receiver.before_next_answer(blip)
    try:
        await drain_alerts()
        assert blip.happened
    finally:
        await asyncio.to_thread(blip.wait_back)
    # What happens next in production: the scheduler re-publishes due callbacks, a consumer picks them up.
    await asyncio.sleep(0.6)
    await maintenance.run_tick(use_lease=False)
    await drain_alerts()
    assert [d.answered for d in receiver.received] == [200], "the receiver must get the callback exactly once"
    assert receiver.received[0].signature_ok and receiver.received[0].body["id"] == job["id"]
    resp = await client.get(f"/v1/jobs/{job['id']}", headers=auth)
    assert resp.json()["callback"] == {"status": "delivered", "attempts": 1, "last_error": None}
