"""The state table is the one the guarded UPDATEs consult: a move outside it never reaches the database."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.attempts import service as attempts
from app.attempts.repository import AttemptRepository
from app.core.db import session_scope
from app.core.states import IllegalTransition, JobStatus
from app.core.tenancy import EVERY_TENANT
from app.jobs.repository import JobRepository


async def _started(client: httpx.AsyncClient, auth: dict[str, str]) -> attempts.Started:
    resp = await client.post(
        "/v1/jobs", headers=auth, json={"report_type": "demo.sleep", "params": {"seconds": 1}}
    )
    started = await attempts.start_attempt(resp.json()["id"], "test-worker")
    assert isinstance(started, attempts.Started)
    return started


async def test_handing_an_attempt_back_is_a_move_the_state_table_allows(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    started = await _started(client, auth)
    assert await attempts.release_attempt(started.key) is True
    async with session_scope() as session:
        job = await JobRepository(session).get_job(started.key.job_id, EVERY_TENANT)
    assert job is not None and job.status == JobStatus.PENDING and job.attempt == 0


async def test_a_move_outside_the_state_table_is_refused_before_any_sql(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    started = await _started(client, auth)
    with pytest.raises(IllegalTransition, match="running → scheduled"):
        async with session_scope() as session:
            await AttemptRepository(session).update_running(
                started.key, {"status": JobStatus.SCHEDULED.value}
            )
    async with session_scope() as session:
        job = await JobRepository(session).get_job(started.key.job_id, EVERY_TENANT)
    assert job is not None and job.status == JobStatus.RUNNING


def test_a_job_lookup_names_its_tenant_scope(env: Any) -> None:
    import inspect

    scope = inspect.signature(JobRepository.get_job).parameters["scope"]
    assert scope.default is inspect.Parameter.empty, "every lookup must say whose jobs it may see"
