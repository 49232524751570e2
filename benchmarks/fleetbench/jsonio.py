"""Strict JSON out: every JSON text the suite writes goes through `dumps` (or `dump`) here.

Python's json module writes NaN and infinities as the bare tokens `NaN` and `Infinity`, which
strict JSON readers (jq, JavaScript's JSON.parse, Go, Rust, browsers) refuse. A metric that was not
measured is NaN in memory; in a file it is `null`, the value a JSON reader expects for "no value".
So `dumps` first replaces every non-finite float by None (through dicts, lists, tuples and
dataclasses), then encodes with `allow_nan=False`. A non-finite value that still reaches the encoder
(through a `default` or an encoder class) is written as null too: a run never fails on writing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable
from typing import IO, Any

log = logging.getLogger(__name__)


def _key(key: Any) -> Any:
    """A dict key JSON can hold: a non-finite float key becomes its name ("nan", "inf", "-inf")."""
    return str(key) if isinstance(key, float) and not math.isfinite(key) else key


def finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, recursively.

    Dicts, lists and tuples are rebuilt (a tuple becomes a list, as JSON writes it); a dataclass
    instance becomes the dict of its fields, as `dataclasses.asdict` makes it. Anything else is
    returned as it is.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_key(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: finite(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _null_constant(token: str) -> None:
    """json.loads' parse_constant for NaN, Infinity and -Infinity: null."""
    return None


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(obj, **kwargs)` as strict JSON: NaN and infinities are written as null.

    Takes json.dumps' keyword arguments (indent, sort_keys, default, cls, ...); `allow_nan` is
    always False.
    """
    kwargs.pop("allow_nan", None)
    default: Callable[[Any], Any] | None = kwargs.pop("default", None)
    if default is not None:
        convert = default
        kwargs["default"] = lambda o: finite(convert(o))
    try:
        return json.dumps(finite(obj), allow_nan=False, **kwargs)
    except ValueError as exc:
        if "Out of range float values" not in str(exc):
            raise
    # A non-finite float came from an encoder class: encode leniently, read back with null, again.
    log.debug("non-finite float in JSON output (through %s): written as null", kwargs.get("cls", "default"))
    loose = json.dumps(obj, allow_nan=True, **kwargs)
    plain = {k: v for k, v in kwargs.items() if k not in ("cls", "default")}
    return json.dumps(json.loads(loose, parse_constant=_null_constant), allow_nan=False, **plain)


def dump(obj: Any, handle: IO[str], **kwargs: Any) -> None:
    """`json.dump(obj, handle, **kwargs)` as strict JSON (see `dumps`)."""
    handle.write(dumps(obj, **kwargs))
