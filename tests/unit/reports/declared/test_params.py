"""A declared type's params model: the JSON Schema decides, the errors come out as pydantic's (so submits
get the same 422 entries), the schema's top-level defaults are filled in, and the schema is what is shown."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.reports.declared.errors import DeclarationError
from app.reports.declared.params import check_schema, params_model

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["since"],
    "properties": {
        "since": {"type": "string", "format": "date"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "regions": {"type": "array", "items": {"type": "string", "maxLength": 3}},
    },
}


def errors_of(params: Any) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        params_model("t", SCHEMA).model_validate(params)
    return [(tuple(e["loc"]), e["type"]) for e in caught.value.errors()]


def test_valid_params_come_back_with_the_schema_defaults_filled_in() -> None:
    model = params_model("t", SCHEMA).model_validate({"since": "2026-11-01"})
    assert model.model_dump(mode="json") == {"since": "2026-11-01", "limit": 10}
    assert model.values() == {"since": "2026-11-01", "limit": 10}


def test_each_bad_field_is_one_error_at_its_own_location() -> None:
    assert errors_of({"limit": 0, "extra": 1, "regions": ["abcd"]}) == [
        (("extra",), "extra_forbidden"),
        (("since",), "missing"),
        (("limit",), "json_schema_minimum"),
        (("regions", 0), "json_schema_maxLength"),
    ]


def test_a_format_the_schema_names_is_checked() -> None:
    assert errors_of({"since": "not-a-date"}) == [(("since",), "json_schema_format")]


def test_the_schema_shown_is_the_one_declared() -> None:
    assert params_model("t", SCHEMA).model_json_schema() == SCHEMA


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (
            {"type": "object", "properties": {"n": {"type": "integr"}}},
            "invalid JSON Schema at 'properties/n/type'",
        ),
        ({"type": "array"}, "type must be 'object'"),
        ({"type": "object", "properties": {"n": {"pattern": "("}}}, "'(' is not a 'regex'"),
        ("object", "must be a table"),
    ],
)
def test_an_invalid_json_schema_is_refused(schema: Any, reason: str) -> None:
    with pytest.raises(DeclarationError) as caught:
        check_schema(schema)
    assert caught.value.field == "params" and reason in caught.value.reason
