"""A declared type's params model: a pydantic model whose validation is the declared JSON Schema (Draft
2020-12), so submits get the same 422s (`loc`, `msg`, `type` per bad field) as a Python type's model.
"""

from __future__ import annotations

import copy
import re
from typing import Any, ClassVar, Self

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.exceptions import ValidationError as SchemaViolation
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.reports.declared.errors import DeclarationError

MAX_ERRORS = 20


def check_schema(schema: Any) -> dict[str, Any]:
    """The params schema as declared, or DeclarationError: it must be a valid Draft 2020-12 schema of an
    object (params are always a JSON object)."""
    if not isinstance(schema, dict):
        raise DeclarationError("params", "must be a table (a JSON Schema object)")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        raise DeclarationError("params", f"invalid JSON Schema at '{where}': {exc.message}") from None
    if schema.get("type", "object") != "object":
        raise DeclarationError("params", "the schema's type must be 'object' (params are a JSON object)")
    return schema


def properties(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _extra_keys(schema: dict[str, Any], instance: dict[str, Any]) -> list[str]:
    props = properties(schema)
    patterns = [re.compile(p) for p in schema.get("patternProperties", {}) if isinstance(p, str)]
    return [k for k in instance if k not in props and not any(p.search(k) for p in patterns)]


def _line_errors(schema: dict[str, Any], error: SchemaViolation) -> list[InitErrorDetails]:
    """One jsonschema error as pydantic's: `missing` and `extra_forbidden` per field as pydantic names
    them, anything else as `json_schema_<keyword>` with jsonschema's message, at the value's path."""
    loc = tuple(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        return [{"type": "missing", "loc": (*loc, name), "input": error.instance} for name in missing]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        subschema = error.schema if isinstance(error.schema, dict) else schema
        return [
            {"type": "extra_forbidden", "loc": (*loc, key), "input": error.instance[key]}
            for key in _extra_keys(subschema, error.instance)
        ]
    kind = f"json_schema_{error.validator}"
    return [{"type": PydanticCustomError(kind, error.message), "loc": loc, "input": error.instance}]


class DeclaredParams(BaseModel):
    """Base of every declared type's params model: `model_validate` runs the JSON Schema and keeps the
    params as given plus the schema's top-level defaults; `model_dump()` and `values()` give them back."""

    model_config = ConfigDict(extra="ignore")
    declared_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    validator: ClassVar[Draft202012Validator]
    _values: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        errors: list[InitErrorDetails] = []
        for error in sorted(cls.validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
            errors += _line_errors(cls.declared_schema, error)
            if len(errors) >= MAX_ERRORS:
                break
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors[:MAX_ERRORS])
        values = copy.deepcopy(dict(obj))
        for name, prop in properties(cls.declared_schema).items():
            if name not in values and isinstance(prop, dict) and "default" in prop:
                values[name] = copy.deepcopy(prop["default"])
        model = cls()
        model._values = values
        return model

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(cls.declared_schema)

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(self._values)

    def values(self) -> dict[str, Any]:
        """The params as a plain dict (what a kind binds or fills in)."""
        return dict(self._values)


def params_model(type_name: str, schema: dict[str, Any]) -> type[DeclaredParams]:
    """The params model of a declared type (the schema already passed `check_schema`)."""
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    name = "Params_" + re.sub(r"\W", "_", type_name)
    attrs = {"declared_schema": schema, "validator": validator, "__module__": __name__}
    return type(name, (DeclaredParams,), attrs)
