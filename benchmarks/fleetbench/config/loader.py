"""Load a config file (YAML or TOML), apply `KEY=VALUE` overrides, validate, explain errors in one line."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError

log = logging.getLogger(__name__)

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}


def read_config_file(path: Path) -> dict[str, Any]:
    """The sections of a YAML or TOML file (an empty file is {}); unreadable or malformed files are UserErrors."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise UserError(f"{path}: unsupported config format {path.suffix or '(none)'!r}; accepted: .yaml, .yml, .toml")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; expected a .yaml or .toml file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read config file: {exc}") from None
    try:
        data = yaml.safe_load(text) if kind == "yaml" else tomllib.loads(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UserError(f"{path}: invalid YAML{where}: {problem}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: invalid TOML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: top level must be a mapping of sections (run, telemetry, probe, ...)")
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`section.key=value`; the value is read as a YAML scalar or flow collection (`[1, 2]`)."""
    key, sep, raw = text.partition("=")
    path = [part.strip() for part in key.split(".")]
    if not sep or not all(path):
        raise UserError(f"override {text!r} is not accepted: use SECTION.KEY=VALUE, e.g. probe.matmul_sizes=[256,512]")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        raise UserError(f"override {text!r}: value {raw!r} is not a valid scalar or [list]") from None
    return path, value


def apply_override(data: dict[str, Any], path: list[str], value: Any, origin: str) -> None:
    """Set `value` at the key `path` of `data`, creating sections on the way; `origin` names it in errors."""
    node = data
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"override {origin!r}: {part!r} is a value, not a section")
        node = child
    node[path[-1]] = value


def load_config(
    path: Path | None = None,
    overrides: list[str] | None = None,
    flags: dict[str, tuple[Any, str]] | None = None,
    model: type[BaseModel] = FleetbenchConfig,
) -> Any:
    """File, then `--set` overrides, then dedicated flags ({"run.run_id": (value, "--run-id")})."""
    data: dict[str, Any] = read_config_file(path) if path is not None else {}
    origins: dict[tuple[str, ...], str] = {}
    for text in overrides or []:
        key_path, value = parse_override(text)
        apply_override(data, key_path, value, text)
        origins[tuple(key_path)] = f"--set {text}"
    for dotted, (value, flag) in (flags or {}).items():
        if value is not None:
            apply_override(data, dotted.split("."), value, flag)
            origins[tuple(dotted.split("."))] = flag
    log.debug("config: %s, then %s", path or "defaults", ", ".join(origins.values()) or "no overrides")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc, model, path, origins)) from None


def describe_validation_error(
    exc: ValidationError,
    model: type[BaseModel],
    path: Path | None,
    origins: dict[tuple[str, ...], str],
) -> str:
    """The first validation error as one line, blamed on the flag or --set that supplied the key, else the file."""
    errors = exc.errors()
    first = errors[0]
    loc = tuple(str(part) for part in first["loc"])
    key = ".".join(loc) or "(top level)"
    source = next(
        # The override that set this key, or one that set a key inside it.
        (origin for keys, origin in origins.items() if loc[: len(keys)] == keys or keys[: len(loc)] == loc),
        str(path) if path is not None else "config",
    )
    if first["type"] == "extra_forbidden":
        accepted = ", ".join(accepted_keys(model, loc[:-1]))
        message = f"unknown key; accepted: {accepted}"
    else:
        message = f"{first['msg']} (got {first['input']!r})"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {key}: {message}{more}"


def accepted_keys(model: type[BaseModel], section: tuple[str, ...]) -> list[str]:
    """The keys the section at `section` accepts, sorted; [] when that path is not a section."""
    current: type[BaseModel] = model
    for part in section:
        field = current.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        current = annotation
    return sorted(current.model_fields)
