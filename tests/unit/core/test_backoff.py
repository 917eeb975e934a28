"""One backoff policy for attempts, callbacks and alert deliveries, each configured by its own settings."""

from __future__ import annotations

import pytest

from app.core.backoff import BackoffPolicy
from app.core.config import Settings


def test_a_listed_policy_repeats_its_last_delay() -> None:
    policy = BackoffPolicy.listed([10, 30, 60])
    assert [policy.delay_s(n) for n in range(1, 6)] == [10.0, 30.0, 60.0, 60.0, 60.0]


def test_a_doubling_policy_doubles_up_to_its_cap() -> None:
    policy = BackoffPolicy.doubling(1.0, 5.0)
    assert [policy.delay_s(n) for n in range(0, 6)] == [1.0, 1.0, 2.0, 4.0, 5.0, 5.0]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("attempt_backoff", [0.2, 0.4, 0.6, 0.6]),
        ("callback_backoff", [1.0, 3.0, 3.0, 3.0]),
        ("alert_backoff", [1.0, 2.0, 2.5, 2.5]),
    ],
)
def test_every_retry_in_the_service_takes_its_delays_from_a_policy_of_the_settings(
    policy: str, expected: list[float]
) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        retry_delays_s=[0.2, 0.4, 0.6],
        callback_retry_delays_s=[1, 3],
        alert_retry_max_s=2.5,
    )
    chosen: BackoffPolicy = getattr(settings, policy)
    assert [chosen.delay_s(n) for n in range(1, 5)] == expected
