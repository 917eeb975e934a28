"""Fixtures the destinations' tests share: a MariaDB restart timed by a fake robot (its answer held until
the server stopped), with a send timeout long enough to ride it out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devtools.servers import MariaDBServer
from tests.utils.outages import MariaDBBlip


@pytest.fixture
async def blip(mariadb: MariaDBServer, env: Any) -> AsyncIterator[MariaDBBlip]:
    await env.set(DELIVERY_TIMEOUT_S=30)  # the robot's answer waits for the server to stop
    outage = MariaDBBlip(mariadb, 2.0)
    yield outage
    outage.wait_back()
