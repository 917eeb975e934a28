"""The domain's error tree; `app/http/errors.py` maps each class to one HTTP status.

OrchestratorError
 ├── NotFound              job (or other tenant's job) does not exist      → 404
 ├── Conflict              the state machine forbids it                    → 409
 │    ├── IdempotencyConflict   same Idempotency-Key, different body
 │    └── OutputNotReady        output requested before `done`
 ├── ValidationFailed      bad input, with a list of field errors          → 422
 └── Unavailable           MySQL or Redis unreachable                      → 503
"""

from __future__ import annotations

from typing import Any


class OrchestratorError(Exception):
    title = "Error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(OrchestratorError):
    title = "Not Found"


class Conflict(OrchestratorError):
    title = "Conflict"


class IdempotencyConflict(Conflict):
    title = "Idempotency-Key reused with a different body"


class OutputNotReady(Conflict):
    title = "Output not ready"


class ValidationFailed(OrchestratorError):
    """`errors` name fields by their path in the request (`["params", "rows"]`); `part` says which part of
    the request that is, and the API prefixes it (`["body", "params", "rows"]`) the way FastAPI does."""

    title = "Validation failed"

    def __init__(self, detail: str, errors: list[dict[str, Any]], part: str = "body") -> None:
        super().__init__(detail)
        self.errors = errors
        self.part = part


class RateLimited(OrchestratorError):
    title = "Too Many Requests"

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class Unavailable(OrchestratorError):
    title = "Service Unavailable"
