"""The report worker's shell around the runner: only a database outage becomes an arq Retry.

A schema mismatch (MySQL 1054) or a bug must fail the arq job, not loop forever on `Retry`.
"""

from __future__ import annotations

from typing import Any

import pytest
from arq import Retry
from sqlalchemy.exc import OperationalError

from app.attempts.runner import RunResult
from workers import report_worker

CTX = {"worker_name": "test-host:1"}


def runner_raising(exc: BaseException) -> Any:
    async def run_job(
        job_id: str, worker: str, traceparent: str | None = None, _hold: Any = None
    ) -> RunResult:
        raise exc

    return run_job


def runner_returning(result: RunResult) -> Any:
    async def run_job(
        job_id: str, worker: str, traceparent: str | None = None, _hold: Any = None
    ) -> RunResult:
        return result

    return run_job


async def test_a_schema_error_from_the_runner_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    error = OperationalError("SELECT x", {}, Exception(1054, "Unknown column 'x'"))
    monkeypatch.setattr(report_worker, "run_job", runner_raising(error))
    with pytest.raises(OperationalError) as raised:
        await report_worker.run_report(CTX, "job-1")
    assert raised.value is error


async def test_a_bug_in_the_runner_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_worker, "run_job", runner_raising(ValueError("bug")))
    with pytest.raises(ValueError, match="bug"):
        await report_worker.run_report(CTX, "job-1")


async def test_a_database_outage_is_retried_after_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    for error in (
        OperationalError("SELECT 1", {}, Exception(2003, "Can't connect to MySQL server")),
        ConnectionRefusedError(),
    ):
        monkeypatch.setattr(report_worker, "run_job", runner_raising(error))
        with pytest.raises(Retry) as raised:
            await report_worker.run_report(CTX, "job-1")
        assert raised.value.defer_score == int(report_worker.DB_DOWN_RETRY_S * 1000)
        assert raised.value.__cause__ is error


async def test_the_runner_decides_deferral_and_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_worker, "run_job", runner_returning(RunResult(defer_s=2.5, detail="not due")))
    with pytest.raises(Retry) as raised:
        await report_worker.run_report(CTX, "job-1")
    assert raised.value.defer_score == 2500

    monkeypatch.setattr(report_worker, "run_job", runner_returning(RunResult(detail="done")))
    assert await report_worker.run_report(CTX, "job-1") == "done"
