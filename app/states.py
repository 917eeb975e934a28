"""The job state machine: statuses, attempt outcomes and the allowed transitions.

Pure logic with no I/O and no imports from the rest of the project, so every rule is unit-testable.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    RETRYING = "retrying"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


class AttemptOutcome(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"


class AlertStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class CallbackStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


TERMINAL: frozenset[JobStatus] = frozenset({JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED})
# Statuses from which a worker may start the next attempt.
# Not started yet, or waiting for its next attempt: cancelled at once; a worker may start it.
WAITING: frozenset[JobStatus] = frozenset({JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RETRYING})
STARTABLE: frozenset[JobStatus] = WAITING
REPLAYABLE: frozenset[JobStatus] = frozenset({JobStatus.DEAD, JobStatus.CANCELLED})
CANCELLABLE: frozenset[JobStatus] = WAITING | {JobStatus.RUNNING}

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED}),
    JobStatus.SCHEDULED: frozenset({JobStatus.PENDING, JobStatus.RUNNING, JobStatus.CANCELLED}),
    JobStatus.RUNNING: frozenset({JobStatus.DONE, JobStatus.RETRYING, JobStatus.DEAD, JobStatus.CANCELLED}),
    JobStatus.RETRYING: frozenset({JobStatus.PENDING, JobStatus.RUNNING, JobStatus.CANCELLED}),
    JobStatus.DONE: frozenset(),
    JobStatus.DEAD: frozenset({JobStatus.PENDING}),
    JobStatus.CANCELLED: frozenset({JobStatus.PENDING}),
}


def values(statuses: frozenset[JobStatus]) -> list[str]:
    """The stored strings of a status set, for SQL `IN (…)`."""
    return sorted(s.value for s in statuses)


def can_transition(current: JobStatus, target: JobStatus) -> bool:
    return target in TRANSITIONS[current]


def is_terminal(status: JobStatus) -> bool:
    return status in TERMINAL


def default_max_attempts(retry_delays_s: list[float]) -> int:
    """One first try plus one retry per configured delay."""
    return len(retry_delays_s) + 1


def retry_delay_s(retry_delays_s: list[float], attempt: int) -> float:
    """Delay before the attempt after `attempt` (1-based); the last delay repeats past the list's end."""
    if not retry_delays_s:
        return 0.0
    index = min(max(attempt, 1), len(retry_delays_s)) - 1
    return float(retry_delays_s[index])


def status_after_failure(attempt: int, max_attempts: int, retryable: bool) -> JobStatus:
    """Where a job goes when attempt number `attempt` fails."""
    if retryable and attempt < max_attempts:
        return JobStatus.RETRYING
    return JobStatus.DEAD
