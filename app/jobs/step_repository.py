"""SQL of a multi-step job's step rows: create, read, mark running or finished, reset for a replay.

A step's try count goes up when it starts, so a crash mid-step still counts the try.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select

from app.core.repository import Repository, table_of
from app.core.states import StepStatus
from app.models import JobStep

STEPS = table_of(JobStep)
step = STEPS.c


class StepRepository(Repository):
    async def list_steps(self, job_id: str) -> list[JobStep]:
        stmt = (
            select(JobStep)
            .where(step.job_id == job_id)
            .order_by(step.position)
            .execution_options(populate_existing=True)
        )
        return await self.all(stmt, JobStep)

    async def add_steps(self, rows: Sequence[JobStep]) -> None:
        self.session.add_all(list(rows))
        await self.session.flush()

    async def update_step(self, job_id: str, name: str, values: dict[str, Any]) -> int:
        return await self.rowcount(
            STEPS.update().where(step.job_id == job_id, step.name == name).values(**values)
        )

    async def reset_for_replay(self, job_id: str, names: Sequence[str] | None) -> int:
        """Named steps (or every failed one) go back to pending and may run once more, manual ones too."""
        conds = [step.job_id == job_id, step.status != StepStatus.SUCCEEDED.value]
        if names is None:
            conds.append(step.status.in_([StepStatus.FAILED.value, StepStatus.RUNNING.value]))
        else:
            conds.append(step.name.in_(list(names)))
        return await self.rowcount(
            STEPS.update().where(*conds).values(status=StepStatus.PENDING.value, rerun_allowed=True)
        )
