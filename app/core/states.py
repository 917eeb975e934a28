"""The job state machine: statuses, attempt outcomes, the allowed transitions, and an attempt's identity.

Pure logic with no I/O. `TRANSITIONS` is not documentation: every guarded UPDATE checks its move against it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
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


class DeliveryStatus(StrEnum):
    """A finished report's delivery to one destination (app.destinations)."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"  # gave up after DELIVERY_MAX_ATTEMPTS tries; a resend makes it pending again
    SKIPPED = "skipped"  # the report produced no rows and the destination skips empty reports


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
    # running → pending: a worker shutting down hands its unfinished attempt back, unburnt.
    JobStatus.RUNNING: frozenset(
        {JobStatus.DONE, JobStatus.RETRYING, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.PENDING}
    ),
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


class IllegalTransition(AssertionError):
    """A guarded UPDATE asked for a move the state table forbids: a bug in the caller, never user input."""


def check_transition(sources: Iterable[JobStatus], target: JobStatus) -> None:
    """Raise unless every status in `sources` may move to `target`; called by each guarded UPDATE."""
    bad = sorted(s.value for s in sources if not can_transition(s, target))
    if bad:
        raise IllegalTransition(f"{', '.join(bad)} → {target.value} is not in TRANSITIONS")


def is_terminal(status: JobStatus) -> bool:
    return status in TERMINAL


def default_max_attempts(retry_delays_s: list[float]) -> int:
    """One first try plus one retry per configured delay."""
    return len(retry_delays_s) + 1


def status_after_failure(attempt: int, max_attempts: int, retryable: bool) -> JobStatus:
    """Where a job goes when attempt number `attempt` fails."""
    if retryable and attempt < max_attempts:
        return JobStatus.RETRYING
    return JobStatus.DEAD


@dataclass(frozen=True)
class AttemptKey:
    """Identifies one attempt of one job: the compare-and-set guard of every state change an attempt makes."""

    job_id: str
    attempt: int
    replay: int
    # False when the job has neither a callback_url nor an ordering_key (both fixed at submit): its terminal
    # transition then has no side effects to stage, which saves a read on the hot path.
    has_effects: bool = field(default=True, compare=False)
    # What the metrics label and time an attempt by; not part of its identity.
    report_type: str = field(default="", compare=False)
    tenant: str = field(default="", compare=False)
    created_at: datetime | None = field(default=None, compare=False)
    started_at: datetime | None = field(default=None, compare=False)
