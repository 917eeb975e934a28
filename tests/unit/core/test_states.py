"""The job state machine in app/core/states.py: transitions, backoff and where a failed attempt leads."""

from __future__ import annotations

import pytest

from app.core.backoff import BackoffPolicy
from app.core.states import (
    CANCELLABLE,
    REPLAYABLE,
    STARTABLE,
    TERMINAL,
    TRANSITIONS,
    JobStatus,
    can_transition,
    default_max_attempts,
    is_terminal,
    status_after_failure,
)

S = JobStatus
DEFAULT_DELAYS = [10.0, 30.0, 60.0]


def test_every_status_has_a_transition_entry() -> None:
    assert set(TRANSITIONS) == set(JobStatus)


def test_terminal_statuses_are_done_dead_and_cancelled() -> None:
    assert {S.DONE, S.DEAD, S.CANCELLED} == TERMINAL
    for status in JobStatus:
        assert is_terminal(status) is (status in TERMINAL)


def test_done_has_no_way_out() -> None:
    for target in JobStatus:
        assert not can_transition(S.DONE, target), target


@pytest.mark.parametrize("terminal", [S.DEAD, S.CANCELLED])
def test_dead_and_cancelled_only_leave_by_replay_to_pending(terminal: JobStatus) -> None:
    allowed = {target for target in JobStatus if can_transition(terminal, target)}
    assert allowed == {S.PENDING}


def test_only_dead_and_cancelled_are_replayable() -> None:
    assert {S.DEAD, S.CANCELLED} == REPLAYABLE
    assert REPLAYABLE < TERMINAL


def test_terminal_jobs_cannot_be_cancelled_or_started() -> None:
    assert not (TERMINAL & CANCELLABLE)
    assert not (TERMINAL & STARTABLE)
    assert {S.PENDING, S.SCHEDULED, S.RETRYING, S.RUNNING} == CANCELLABLE


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.PENDING, S.RUNNING),
        (S.PENDING, S.CANCELLED),
        (S.SCHEDULED, S.PENDING),
        (S.SCHEDULED, S.CANCELLED),
        (S.RUNNING, S.DONE),
        (S.RUNNING, S.RETRYING),
        (S.RUNNING, S.DEAD),
        (S.RUNNING, S.CANCELLED),
        (S.RUNNING, S.PENDING),  # a worker shutting down hands its attempt back
        (S.RETRYING, S.PENDING),
        (S.RETRYING, S.CANCELLED),
        (S.DEAD, S.PENDING),
        (S.CANCELLED, S.PENDING),
    ],
)
def test_contract_transitions_are_allowed(current: JobStatus, target: JobStatus) -> None:
    assert can_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.PENDING, S.DONE),
        (S.PENDING, S.DEAD),
        (S.PENDING, S.RETRYING),
        (S.SCHEDULED, S.DONE),
        (S.RETRYING, S.DONE),
        (S.RETRYING, S.DEAD),
        (S.RUNNING, S.SCHEDULED),
        (S.DEAD, S.RUNNING),
        (S.CANCELLED, S.RUNNING),
        (S.DEAD, S.DONE),
    ],
)
def test_transitions_outside_the_contract_are_refused(current: JobStatus, target: JobStatus) -> None:
    assert not can_transition(current, target)


def test_no_status_transitions_to_itself() -> None:
    for status in JobStatus:
        assert not can_transition(status, status), status


@pytest.mark.parametrize(("attempt", "delay"), [(1, 10.0), (2, 30.0), (3, 60.0)])
def test_retry_delay_follows_the_list_per_attempt(attempt: int, delay: float) -> None:
    assert BackoffPolicy.listed(DEFAULT_DELAYS).delay_s(attempt) == delay


@pytest.mark.parametrize("attempt", [4, 5, 100])
def test_retry_delay_beyond_the_list_repeats_the_last(attempt: int) -> None:
    assert BackoffPolicy.listed(DEFAULT_DELAYS).delay_s(attempt) == 60.0


def test_retry_delay_of_an_empty_list_is_zero() -> None:
    assert BackoffPolicy.listed([]).delay_s(1) == 0.0
    assert BackoffPolicy.listed([]).delay_s(7) == 0.0


def test_retry_delay_is_a_float_and_keeps_fractions() -> None:
    result = BackoffPolicy.listed([0.2, 0.4]).delay_s(2)
    assert isinstance(result, float)
    assert result == pytest.approx(0.4)


def test_retry_delay_for_attempt_zero_uses_the_first_delay() -> None:
    assert BackoffPolicy.listed(DEFAULT_DELAYS).delay_s(0) == 10.0


@pytest.mark.parametrize(("attempt", "max_attempts"), [(1, 4), (2, 4), (3, 4), (1, 2)])
def test_retryable_failure_with_tries_left_is_retrying(attempt: int, max_attempts: int) -> None:
    assert status_after_failure(attempt, max_attempts, retryable=True) == S.RETRYING


@pytest.mark.parametrize(("attempt", "max_attempts"), [(1, 4), (3, 4), (4, 4), (1, 1)])
def test_permanent_failure_is_dead_whatever_the_budget(attempt: int, max_attempts: int) -> None:
    assert status_after_failure(attempt, max_attempts, retryable=False) == S.DEAD


@pytest.mark.parametrize(("attempt", "max_attempts"), [(4, 4), (1, 1), (5, 4)])
def test_retryable_failure_of_the_last_attempt_is_dead(attempt: int, max_attempts: int) -> None:
    assert status_after_failure(attempt, max_attempts, retryable=True) == S.DEAD


def test_default_max_attempts_is_one_more_than_the_delays() -> None:
    assert default_max_attempts([10, 30, 60]) == 4
    assert default_max_attempts([]) == 1


def test_default_schedule_ends_dead_after_attempt_four() -> None:
    """attempt 1 fails → 10 s → 2 → 30 s → 3 → 60 s → 4 → dead, as the contract spells it out."""
    max_attempts = default_max_attempts(DEFAULT_DELAYS)
    waits = []
    attempt = 1
    while status_after_failure(attempt, max_attempts, retryable=True) == S.RETRYING:
        waits.append(BackoffPolicy.listed(DEFAULT_DELAYS).delay_s(attempt))
        attempt += 1
    assert waits == [10.0, 30.0, 60.0]
    assert attempt == 4
