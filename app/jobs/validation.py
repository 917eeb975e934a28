"""What a submit request must satisfy before anything is written: bounded params, a known report type,
params valid for that type, and a `run_at` neither in the past nor too far ahead.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from app.core.config import get_settings
from app.core.errors import ValidationFailed
from app.reports.registry import ReportType, registry

MAX_SCHEDULE_AHEAD_S = 30 * 86400
RUN_AT_PAST_TOLERANCE_S = 1.0
MAX_ERRORS = 20
MAX_KEY_CHARS = 200


def params_shape_errors(params: Any, max_depth: int, max_string: int, max_items: int) -> list[dict[str, Any]]:
    """Bound what any params object may be, before a report type's own schema looks at it."""
    errors: list[dict[str, Any]] = []
    items = 0

    def error(loc: list[str | int], msg: str, kind: str) -> None:
        errors.append({"loc": ["params", *loc], "msg": msg, "type": kind})

    def walk(value: Any, loc: list[str | int], depth: int) -> None:
        nonlocal items
        if len(errors) >= MAX_ERRORS:
            return
        items += 1
        if items == max_items + 1:
            error([], f"more than {max_items} values", "too_many")
        if depth > max_depth:
            error(loc, f"nested deeper than {max_depth}", "too_deep")
            return
        if isinstance(value, str) and len(value) > max_string:
            error(loc, f"string longer than {max_string}", "string_too_long")
        elif isinstance(value, dict):
            for key, child in value.items():
                if len(key) > MAX_KEY_CHARS:
                    error(loc, f"key longer than {MAX_KEY_CHARS}", "key_too_long")
                walk(child, [*loc, key[:MAX_KEY_CHARS]], depth + 1)
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, [*loc, index], depth + 1)

    walk(params, [], 0)
    return errors


def validate_submit(
    report_type: str, raw_params: dict[str, Any], run_at: datetime | None, now: datetime
) -> tuple[ReportType, dict[str, Any]]:
    """Check the report type, its params and run_at; raise ValidationFailed listing every bad field.
    Returns the type and the params as its model normalised them."""
    settings = get_settings()
    errors = params_shape_errors(
        raw_params, settings.max_params_depth, settings.max_params_string_chars, settings.max_params_items
    )
    if errors:
        raise ValidationFailed("The job's params are too large or too deep.", errors)
    rtype = registry.get(report_type)
    params = raw_params
    if rtype is None:
        known = ", ".join(t.name for t in registry.all()) or "none"
        errors.append(
            {
                "loc": ["report_type"],
                "msg": f"unknown report type (known: {known})",
                "type": "unknown_report_type",
            }
        )
    else:
        try:
            params = rtype.params_model.model_validate(raw_params).model_dump(mode="json")
        except ValidationError as exc:
            errors += [
                {"loc": ["params", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in exc.errors()
            ]
    if run_at is not None:
        if run_at < now - timedelta(seconds=RUN_AT_PAST_TOLERANCE_S):
            errors.append({"loc": ["run_at"], "msg": "run_at is in the past", "type": "run_at_past"})
        elif run_at > now + timedelta(seconds=MAX_SCHEDULE_AHEAD_S):
            errors.append(
                {"loc": ["run_at"], "msg": "run_at is more than 30 days ahead", "type": "run_at_too_far"}
            )
    if errors:
        raise ValidationFailed("The job request is invalid.", errors)
    assert rtype is not None
    return rtype, params
