"""HTTP report tests: the fake team service on 127.0.0.1 (it checks our signature), allowed by
HTTP_REPORT_ALLOWED_HOSTS, and a burst worker running in the test's loop while the test plays the service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.utils.fakes.report_service import FakeReportService


@pytest.fixture
async def service(env: Any) -> AsyncIterator[FakeReportService]:
    await env.set(HTTP_REPORT_ALLOWED_HOSTS="127.0.0.1")
    fake = FakeReportService().start()
    yield fake
    fake.stop()
