"""The one retry-delay policy: a list of delays (the last repeats), or doubling from a base up to a cap.

Attempts, completion callbacks and alert deliveries each hold a `BackoffPolicy`; none computes delays itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BackoffPolicy:
    """`delay_s(n)` is the wait after failure number n (1-based)."""

    delays_s: tuple[float, ...] = ()
    base_s: float = 1.0
    cap_s: float | None = None

    @classmethod
    def listed(cls, delays_s: Sequence[float]) -> BackoffPolicy:
        """Delays from a list, e.g. RETRY_DELAYS_S `[10, 30, 60]`; past its end the last one repeats."""
        return cls(delays_s=tuple(float(d) for d in delays_s))

    @classmethod
    def doubling(cls, base_s: float, cap_s: float) -> BackoffPolicy:
        """base, 2×base, 4×base … capped (alert deliveries: 1, 2, 4, 8 … s up to ALERT_RETRY_MAX_S)."""
        return cls(base_s=base_s, cap_s=cap_s)

    def delay_s(self, failures: int) -> float:
        n = max(failures, 1)
        if self.delays_s:
            return self.delays_s[min(n, len(self.delays_s)) - 1]
        if self.cap_s is None:
            return 0.0
        return float(min(self.cap_s, self.base_s * 2 ** (n - 1)))
