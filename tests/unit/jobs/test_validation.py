"""Submit validation names fields by their place in the request, not by HTTP: the API adds `body`."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.core.errors import ValidationFailed
from app.core.times import utcnow
from app.jobs.validation import params_shape_errors, validate_submit
from app.reports.registry import registry


@pytest.fixture(autouse=True)
def demo_types() -> None:
    registry.load(True, [])


def test_bad_params_and_run_at_are_named_without_an_http_location() -> None:
    now = utcnow()
    with pytest.raises(ValidationFailed) as caught:
        validate_submit("demo.csv", {"rows": 0}, now - timedelta(hours=1), now)
    locs = [e["loc"] for e in caught.value.errors]
    assert ["run_at"] in locs and any(loc[:2] == ["params", "rows"] for loc in locs), locs
    assert caught.value.part == "body"


def test_an_unknown_report_type_is_named_by_its_field() -> None:
    with pytest.raises(ValidationFailed) as caught:
        validate_submit("no.such.type", {}, None, utcnow())
    assert [e["loc"] for e in caught.value.errors] == [["report_type"]]


def test_params_bounds_are_named_by_their_path_inside_params() -> None:
    errors = params_shape_errors({"a": {"b": "x" * 11}}, max_depth=8, max_string=10, max_items=100)
    assert errors == [
        {"loc": ["params", "a", "b"], "msg": "string longer than 10", "type": "string_too_long"}
    ]
