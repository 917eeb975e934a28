"""Retention keeps up with a full-speed service: jobs finish at a steady rate for a bounded time while the
scheduler ticks, and the table stays flat. Asserted on row counts, never on timings."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

from app.core.times import utcnow
from app.maintenance import service as maintenance
from tests.utils.retention import count_rows, empty_job_tables, insert_finished_jobs, job_ids

# About what the whole service drains on the 2-core test machine (1,100-2,000 jobs/s): the load retention must
# never fall behind. (The purge ceiling itself is measured outside the suite: several times this.)
INTAKE_JOBS_PER_S = 2000
STEP_S = 0.25  # intake: a bulk insert of finished jobs (with their attempts) every step
FILES_EVERY = 4  # every 4th step's jobs have an output file each
RUN_S = 24.0
RETENTION_S = 2.0
INTERVAL_S = 1.0  # SCAN_INTERVAL_S: a tick a second, retention's budget 0.7 s of it
# A job is gone at most this long after it finished: retention, the tick that finds it past retention, and
# room for a tick that started late (the intake and the ticks share the machine with MariaDB).
LIFETIME_S = RETENTION_S + 3 * INTERVAL_S


class Intake:
    """Jobs inserted as finished, step after step: when and how many, to bound what may still be there."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.steps: list[tuple[float, int]] = []

    async def run(self, until: float) -> None:
        per_step = round(INTAKE_JOBS_PER_S * STEP_S)
        due = time.monotonic()
        while due < until:
            files = self.output_dir if len(self.steps) % FILES_EVERY == 0 else None
            await insert_finished_jobs(per_step, utcnow(), output_dir=files)
            self.steps.append((time.monotonic(), per_step))
            due += STEP_S
            await asyncio.sleep(max(0.0, due - time.monotonic()))

    def since(self, moment: float) -> int:
        """Jobs inserted after `moment` (a step counts from when its insert returned)."""
        return sum(count for at, count in self.steps if at > moment - STEP_S)


async def scheduler(until: float) -> None:
    while time.monotonic() < until:
        started = time.monotonic()
        await maintenance.run_tick(use_lease=False)
        await asyncio.sleep(max(0.0, started + INTERVAL_S - time.monotonic()))


async def test_the_job_table_stays_flat_while_jobs_finish_faster_than_the_service_drains(
    env: Any, tmp_path: Path
) -> None:
    await env.set(JOB_RETENTION_S=RETENTION_S, SCAN_INTERVAL_S=INTERVAL_S, OUTPUT_DIR=tmp_path)
    intake = Intake(tmp_path)
    samples: list[tuple[float, int, int]] = []  # when, rows, what the intake bounds them to
    began = time.monotonic()
    until = began + RUN_S
    running = asyncio.gather(intake.run(until), scheduler(until + INTERVAL_S))
    try:
        while time.monotonic() < until:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            samples.append((now - began, await count_rows("report_jobs"), intake.since(now - LIFETIME_S)))
        await running
        await maintenance.run_tick(use_lease=False)

        settled = [(at, rows, bound) for at, rows, bound in samples if at > LIFETIME_S]
        # Bounded: no more jobs than finished within a job's lifetime, at every moment.
        assert all(rows <= bound for _, rows, bound in settled), samples
        # Flat: the last third of the run holds no more than the middle third (give or take a tick's intake).
        third = len(settled) // 3
        middle, last = settled[third : 2 * third], settled[2 * third :]
        tick_jobs = round(INTAKE_JOBS_PER_S * INTERVAL_S)
        assert max(rows for _, rows, _ in last) <= max(rows for _, rows, _ in middle) + tick_jobs, samples
        # Whatever is left has its attempts, and every output directory is a job's still there (files
        # first: never a row gone with its files left behind).
        left = await job_ids()
        assert await count_rows("job_attempts") == len(left)
        assert set(os.listdir(tmp_path)) <= left
    finally:
        running.cancel()
        with contextlib.suppress(BaseException):
            await running
        await empty_job_tables()
