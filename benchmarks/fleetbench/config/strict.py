"""The base of every config section: unknown keys and wrong types fail on load and on assignment.

Pydantic's lax mode would take `threads: true` as 1 and `fsdp: 1` as true: a YAML or TOML boolean
where a number belongs (or the reverse) is almost always a slip, so every section refuses both.
Numbers stay lax otherwise (PyYAML reads `3e-4` as text, which a float field still takes), but
infinities, NaN and integers beyond 64 bits are refused: no setting means them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

__all__ = ["INT_LIMIT", "StrictModel"]

INT_LIMIT = 2**63 - 1  # the largest integer a setting may hold (int64, what every consumer can store)
_MARK = "fleetbench_strict"  # metadata key of the checks this module wraps around a scalar schema
# Keys of a core schema that hold values or annotations, not schemas to tighten.
_NOT_SCHEMAS = frozenset({"metadata", "serialization", "default", "expected", "ref", "schema_ref", "cls"})


def _number_check(what: str) -> Callable[[Any], Any]:
    """A before-validator for an int or float field: no booleans, no integers beyond INT_LIMIT."""

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError("number_not_bool", f"Input should be {what}, not true or false")
        if isinstance(value, int) and abs(value) > INT_LIMIT:
            raise PydanticCustomError("number_too_large", f"Input should be {what} of at most 64 bits")
        return value

    return check


def _bool_check(value: Any) -> Any:
    """A before-validator for a bool field: only true or false (no 0/1, no 'yes' written as text)."""
    if not isinstance(value, bool):
        raise PydanticCustomError("bool_strict", "Input should be true or false")
    return value


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "int": _number_check("an integer"),
    "float": _number_check("a number"),
    "bool": _bool_check,
}


def tighten(schema: Any) -> Any:
    """A copy of a pydantic core schema whose int, float and bool schemas refuse the others' values."""
    if isinstance(schema, list):
        return [tighten(item) for item in schema]
    if isinstance(schema, tuple):
        return tuple(tighten(item) for item in schema)
    if not isinstance(schema, dict) or schema.get("metadata", {}).get(_MARK):
        return schema
    tightened = {key: value if key in _NOT_SCHEMAS else tighten(value) for key, value in schema.items()}
    kind = schema.get("type")
    check = _CHECKS.get(kind) if isinstance(kind, str) else None
    if check is None:
        return tightened
    return core_schema.no_info_before_validator_function(check, tightened, metadata={_MARK: True})


class StrictModel(BaseModel):
    """A config model that rejects unknown keys, boolean/number mix-ups, infinities and NaN, and
    validates values on assignment as well as on load."""

    # A misspelt key would otherwise be ignored silently and the run would measure the default.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type[BaseModel], handler: GetCoreSchemaHandler, /) -> CoreSchema:
        """The model's schema with its scalar fields tightened (see the module docstring)."""
        schema: CoreSchema = tighten(handler(source))
        return schema
