"""The soak's invariants, read from MySQL (the source of truth) through the stack's own SQL client: no job ran
two attempts at once, caps held, ordering keys ran one job at a time and in submission order, and in the end
every job is terminal or legitimately waiting.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise

from tests.utils.jobs import parse_ts
from tests.utils.stack import Stack


@dataclass
class SoakFindings:
    """What the checks found; `problems` fail the soak, `notes` are reported beside them."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)


@dataclass(frozen=True)
class Attempt:
    job_id: str
    replay: int
    attempt: int
    started_at: datetime
    finished_at: datetime | None
    outcome: str


def _ts(value: str) -> datetime | None:
    if value in ("", "NULL"):
        return None
    return parse_ts(value.replace(" ", "T") + ("" if "+" in value else "+00:00"))


def attempts(stack: Stack) -> list[Attempt]:
    rows = stack.sql(
        "SELECT job_id, replay, attempt, started_at, finished_at, outcome FROM job_attempts "
        "ORDER BY job_id, replay, attempt, started_at"
    )
    found = []
    for job_id, replay, attempt, started, finished, outcome in rows:
        started_at = _ts(started)
        assert started_at is not None
        found.append(Attempt(job_id, int(replay), int(attempt), started_at, _ts(finished), outcome))
    return found


def check_attempts_never_overlap(stack: Stack, findings: SoakFindings) -> None:
    """One attempt of a job at a time: each attempt started after the previous one finished."""
    by_job: dict[str, list[Attempt]] = defaultdict(list)
    for row in attempts(stack):
        by_job[row.job_id].append(row)
    for job_id, rows in by_job.items():
        rows.sort(key=lambda a: a.started_at)
        for before, after in pairwise(rows):
            if before.finished_at is None or before.finished_at > after.started_at:
                findings.add(
                    f"job {job_id}: attempt {after.attempt} started at {after.started_at} while attempt "
                    f"{before.attempt} ({before.outcome}) ran until {before.finished_at}"
                )


def check_running_caps(stack: Stack, caps: dict[str, int], findings: SoakFindings, when: str) -> None:
    """A sample: jobs running now per capped report type, against its cap. A note, not a problem: a start
    that finds its slot flushed is `running` for the moment it takes to hand itself back; the cap over the
    attempts' history (`check_caps_over_history`) is the check."""
    for report_type, count in stack.sql(
        "SELECT report_type, COUNT(*) FROM report_jobs WHERE status = 'running' GROUP BY report_type"
    ):
        cap = caps.get(report_type)
        if cap is not None and int(count) > cap:
            findings.notes.append(f"{count} jobs of {report_type} running at {when}, cap {cap}")


@dataclass(frozen=True)
class Run:
    """One attempt of a capped type, for the cap over history."""

    job_id: str
    attempt: int
    worker: str
    outcome: str
    started_at: datetime
    finished_at: datetime

    def __str__(self) -> str:
        return (
            f"{self.job_id}#{self.attempt} {self.outcome} on {self.worker} "
            f"{self.started_at:%H:%M:%S.%f}-{self.finished_at:%H:%M:%S.%f}"
        )


def check_caps_over_history(
    stack: Stack, caps: dict[str, int], flushes: list[datetime], findings: SoakFindings
) -> None:
    """From the attempts' intervals: whether a capped type ever ran more than its cap at once, when, and the
    attempts running then (a job rescued from a lost worker runs on more than one message). An attempt its
    worker handed back at once because a flush took its slot (SlotLost) ran no report code and is left out."""
    for report_type, cap in caps.items():
        rows = stack.sql(
            "SELECT a.job_id, a.attempt, a.worker, a.outcome, a.started_at, a.finished_at "
            "FROM job_attempts a JOIN report_jobs j ON j.id = a.job_id "
            f"WHERE j.report_type = '{report_type}' "
            "AND a.finished_at IS NOT NULL AND NOT (a.outcome = 'superseded' AND a.error LIKE '%SlotLost%')"
        )
        runs = [Run(j, int(n), w, o, _ts(b), _ts(e)) for j, n, w, o, b, e in rows]  # type: ignore[arg-type]
        over = _over_the_cap(runs, cap)
        if over is None:
            continue
        when, together = over
        near = any(abs((when - flush).total_seconds()) < 3 for flush in flushes)
        rescued = [r.job_id for r in together if r.attempt > 1]
        findings.add(
            f"{report_type}: {len(together)} attempts ran at once (cap {cap}) at {when}"
            + (" (within 3 s of a Redis flush)" if near else "")
            + (f" (jobs on a later attempt: {rescued})" if rescued else "")
            + f": {[str(r) for r in together]}"
        )


def _over_the_cap(runs: list[Run], cap: int) -> tuple[datetime, list[Run]] | None:
    """When the running count first went over `cap`, and the attempts running then."""
    events = sorted(
        [(r.started_at, 1, i) for i, r in enumerate(runs)]
        + [(r.finished_at, -1, i) for i, r in enumerate(runs)]
    )
    running: set[int] = set()
    for at, delta, i in events:
        if delta > 0:
            running.add(i)
        else:
            running.discard(i)
        if len(running) > cap:
            return at, [runs[k] for k in sorted(running)]
    return None


def check_ordering(
    stack: Stack,
    chains: dict[tuple[str, str], list[str]],
    continues: set[tuple[str, str]],
    findings: SoakFindings,
) -> None:
    """Per (tenant, ordering key): no two jobs' attempts overlap; jobs submitted one after the other
    (`chains`, in answer order) start only once the one before is done (or dead, in the `continues` chains,
    whose jobs go on past a dead predecessor)."""
    rows = stack.sql(
        "SELECT j.tenant, j.ordering_key, a.job_id, a.started_at, a.finished_at, j.status, j.finished_at "
        "FROM job_attempts a JOIN report_jobs j ON j.id = a.job_id WHERE j.ordering_key IS NOT NULL "
        "ORDER BY a.started_at"
    )
    by_key: dict[tuple[str, str], list[tuple[str, datetime, datetime | None]]] = defaultdict(list)
    first_start: dict[str, datetime] = {}
    finished: dict[str, tuple[str, datetime | None]] = {}
    for tenant, key, job_id, started, ended, status, job_finished in rows:
        started_at = _ts(started)
        assert started_at is not None
        by_key[(tenant, key)].append((job_id, started_at, _ts(ended)))
        first_start.setdefault(job_id, started_at)
        finished[job_id] = (status, _ts(job_finished))
    for key, runs in by_key.items():
        for i, (job_id, _started_at, ended_at) in enumerate(runs):
            for other_id, other_start, _ in runs[i + 1 :]:
                if other_id != job_id and (ended_at is None or ended_at > other_start):
                    findings.add(
                        f"ordering key {key}: {other_id} started at {other_start} while {job_id} ran"
                    )
                    break
    for key, chain in chains.items():
        for before, after in pairwise(chain):
            if after not in first_start:
                continue
            status, done_at = finished.get(before, ("never started", None))
            ended = status == "done" or (status == "dead" and key in continues)
            if not ended or done_at is None or done_at > first_start[after]:
                findings.add(
                    f"ordering key {key}: {after} started at {first_start[after]} before its predecessor "
                    f"{before} ended ({status} at {done_at})"
                )


def leftovers(stack: Stack) -> dict[str, list[str]]:
    """The jobs left after the drain with nothing legitimate in their way, by status: not terminal, not
    scheduled ahead, not behind their ordering key (a dead predecessor they wait for, or a predecessor that
    itself waits legitimately)."""
    rows = stack.sql(
        "SELECT id, status, attempt, tenant, ordering_key, on_predecessor_dead, resolved_at, "
        "run_at < UTC_TIMESTAMP(6) - INTERVAL 5 SECOND FROM report_jobs "
        "WHERE status IN ('pending', 'retrying', 'running', 'scheduled', 'dead') ORDER BY created_at, id"
    )
    blocked: set[tuple[str, str]] = set()  # keys whose later jobs wait behind a legitimately waiting one
    dead: set[tuple[str, str]] = set()  # keys with a dead job not resolved by hand
    stuck: dict[str, list[str]] = defaultdict(list)
    for job_id, status, _attempt, tenant, key, on_dead, resolved, overdue in rows:
        chain = (tenant, key)
        if status == "dead":
            if key != "NULL" and resolved == "NULL":
                dead.add(chain)
            continue
        if status == "scheduled" and overdue != "1":
            continue
        if key != "NULL" and (chain in blocked or (chain in dead and on_dead == "wait")):
            blocked.add(chain)  # it waits behind an earlier job of its key (whatever its own status)
            continue
        if key != "NULL":
            blocked.add(chain)
        stuck[status].append(job_id)
    return dict(stuck)


def marks(stack: Stack, job_ids: list[str]) -> dict[str, tuple[str, ...]]:
    """Each job's state and attempt count as MySQL holds them: two reads that differ mean it moved."""
    if not job_ids:
        return {}
    listed = ", ".join(f"'{job_id}'" for job_id in job_ids)
    rows = stack.sql(
        "SELECT j.id, j.status, j.attempt, j.replay_count, COUNT(a.job_id) FROM report_jobs j "
        f"LEFT JOIN job_attempts a ON a.job_id = j.id WHERE j.id IN ({listed}) GROUP BY j.id"
    )
    return {row[0]: tuple(row[1:]) for row in rows}


def check_drained(stack: Stack, findings: SoakFindings, moving: frozenset[str] = frozenset()) -> None:
    """After the drain every job is terminal or waits legitimately (`leftovers`). A job seen moving while
    the drain watched its leftovers (`moving`: a new attempt, a new state) is a backlog still being worked
    off, not a stranded job: it is noted, not failed."""
    stuck = leftovers(stack)
    still = {status: [i for i in ids if i not in moving] for status, ids in stuck.items()}
    worked = sum(len(ids) for ids in stuck.values()) - sum(len(ids) for ids in still.values())
    if worked:
        findings.notes.append(f"{worked} leftover jobs moved while watched: a backlog being worked off")
    for status, ids in sorted(still.items()):
        if not ids:
            continue
        findings.add(
            f"{len(ids)} jobs still {status} after the drain, nothing in the way: {ids[:5]}; "
            f"in Redis: {where_in_redis(stack, ids)}"
        )
        findings.notes.extend(describe(stack, job_id) for job_id in ids[:3])
    if any(still.values()):
        client = stack.redis_client()
        findings.notes.append(
            f"dispatch: slots by type {client.hgetall('ro:d:run:type')}, by tenant "
            f"{client.hgetall('ro:d:run:tenant')}, paused {client.smembers('ro:d:paused')}, "
            f"{client.hlen('ro:d:claims')} claims, ready {client.exists('ro:d:ready')}"
        )


def describe(stack: Stack, job_id: str) -> str:
    """One leftover job as MySQL and Redis see it, for the soak's report."""
    row = stack.sql(
        "SELECT status, attempt, report_type, tenant, ordering_key, run_at, next_attempt_at, updated_at "
        f"FROM report_jobs WHERE id = '{job_id}'"
    )
    client = stack.redis_client()
    held = client.hget("ro:d:msg", job_id)
    redis_side = "no message"
    if held is not None:
        lane = client.hget("ro:d:meta", held)
        score = client.zscore(b"ro:d:lane:" + lane, held) if lane else None
        due_in_s = None if score is None else round((score - time.time() * 1000) / 1000, 1)
        in_progress = client.get(b"arq:in-progress:" + held)
        redis_side = (
            f"message {held!r} lane {lane!r} due in {due_in_s} s, in progress {in_progress!r} "
            f"(ttl {client.pttl(b'arq:in-progress:' + held)} ms), queued {client.zscore('arq:queue', held)}, "
            f"body {client.exists(b'arq:job:' + held)}"
        )
    slot = client.hget("ro:d:claims", job_id)
    return f"job {job_id}: {row[0] if row else '?'}; slot {slot!r}; {redis_side}"


def where_in_redis(stack: Stack, job_ids: list[str]) -> dict[str, int]:
    """Where Redis holds each job's message: due in a lane (a claim can take it), ahead in a lane, running
    (an in-progress key), queued but in no lane, or nowhere. Tells a backlog from a stranded job."""
    client = stack.redis_client()
    now_ms = time.time() * 1000
    held = client.hmget("ro:d:msg", job_ids) if job_ids else []
    messages = [arq_id for arq_id in held if arq_id is not None]
    lanes = client.hmget("ro:d:meta", messages) if messages else []
    with client.pipeline(transaction=False) as pipe:
        for arq_id, lane in zip(messages, lanes, strict=True):
            pipe.zscore(b"ro:d:lane:" + (lane or b"-"), arq_id)
            pipe.exists(b"arq:in-progress:" + arq_id)
        answers = pipe.execute()
    found: Counter[str] = Counter(
        {"no message": len(held) - len(messages)} if len(held) > len(messages) else {}
    )
    for score, running in zip(answers[::2], answers[1::2], strict=True):
        if running:
            found["running"] += 1
        elif score is None:
            found["queued in no lane"] += 1
        else:
            found["due in a lane" if score <= now_ms else "ahead in a lane"] += 1
    return dict(found)


def check_lost_attempts(
    stack: Stack, killed: set[int], outages: list[tuple[datetime, datetime]], findings: SoakFindings
) -> None:
    """An attempt is declared lost only when its worker stopped beating: it died, or MySQL was down long
    enough. A lost attempt of a live worker outside an outage means the job ran with no one running it."""
    rows = stack.sql(
        "SELECT job_id, attempt, worker, started_at, finished_at FROM job_attempts WHERE outcome = 'lost'"
    )
    for job_id, attempt, worker, started, finished in rows:
        pid = int(worker.rsplit(":", 1)[1]) if worker and ":" in worker else None
        started_at, finished_at = _ts(started), _ts(finished)
        assert started_at is not None
        if pid in killed:
            continue
        if any(begin <= (finished_at or started_at) and started_at <= end for begin, end in outages):
            continue
        findings.add(
            f"job {job_id}: attempt {attempt} declared lost although its worker {worker} never died "
            f"(started {started_at}, declared {finished_at})"
        )
    dead = stack.sql(
        "SELECT a.job_id FROM job_attempts a JOIN report_jobs j ON j.id = a.job_id WHERE j.status = 'dead' "
        "GROUP BY a.job_id HAVING SUM(a.outcome <> 'lost') = 0"
    )
    for (job_id,) in dead:
        findings.notes.append(f"job {job_id} is dead and every attempt of it was lost")
