"""Load a config file (YAML or TOML), apply `KEY=VALUE` overrides, validate, explain errors in one line."""

from __future__ import annotations

import logging
import reprlib
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError
from fleetbench.names import path_problem

log = logging.getLogger(__name__)

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}
MAX_CONFIG_BYTES = 1 << 20  # a config is a few KiB; anything this large is the wrong file
MAX_VALUES = 100_000  # values in a config once YAML aliases are expanded (a few hundred in practice)
_SHOW = reprlib.Repr()  # how an offending value is quoted in an error: short, whatever its size
_SHOW.maxstring = _SHOW.maxother = 80
_SHOW.maxlist = _SHOW.maxdict = _SHOW.maxtuple = 6
SHOWN_MAX = 200  # characters of a quoted value, whatever its nesting


class _YAMLLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader, but a key given twice in one mapping is an error instead of the last one winning."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of `node`; a duplicate key raises a ConstructorError that names both lines."""
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {shown(key_node.value)} (first at line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def shown(value: Any) -> str:
    """A value as an error message quotes it: YAML's spelling of true, false and null, the rest as repr,
    cut short (a config value can be a huge or self-referencing structure)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    text = _SHOW.repr(value)  # reprlib cuts each level, but nested lists multiply: cut the whole too
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 3] + "..."


def load_yaml(text: str) -> Any:
    """A YAML document as Python values (safe types only, duplicate keys refused); YAMLError or ValueError."""
    return yaml.load(text, Loader=_YAMLLoader)  # a safe loader: SafeConstructor with the duplicate check


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """What PyYAML found wrong, with its line, in one line; a tab where YAML wants spaces is named."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        return f"invalid YAML at line {line}: character #x{code:04x} is not allowed ({exc.reason})"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document ..., but found another document"
        problem = f"{context}, {problem}"
    if mark is not None and "\t" in (text.splitlines()[mark.line : mark.line + 1] or [""])[0]:
        problem += " (a tab: YAML indents with spaces)"
    return f"invalid YAML{where}: {problem}"


def _read_text(path: Path) -> str:
    """The file as text (UTF-8, a byte-order mark allowed); anything else is a UserError naming the file."""
    try:
        if path.exists() and not path.is_dir() and not path.is_file():
            raise UserError(f"{path}: is not a regular file; expected a .yaml or .toml file")
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; expected a .yaml or .toml file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise UserError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB; a config file is a few KiB of YAML or TOML")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}); save it as UTF-8"
        ) from None


def _parse(text: str, kind: str) -> Any:
    """The document of a YAML or TOML text; ValueError (YAMLError, TOMLDecodeError) saying what is wrong."""
    try:
        return load_yaml(text) if kind == "yaml" else tomllib.loads(text)
    except yaml.YAMLError as exc:
        raise ValueError(_yaml_problem(exc, text)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ValueError(f"invalid {kind.upper()}: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts (its message has advice for coders)
        raise ValueError(f"invalid {kind.upper()}: {str(exc).split(';')[0]}") from None


def count_values(data: Any, limit: int = MAX_VALUES) -> int:
    """How many values `data` holds, a container shared through YAML aliases counted at every use.

    Counting stops soon after `limit`. RecursionError for data nested too deeply or holding itself.
    """
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            return 1
        if id(node) not in sizes:
            total = 1
            for child in children:
                total += size(child)
                if total > limit:
                    break
            sizes[id(node)] = total
        return sizes[id(node)]

    return size(data)


def check_size(data: Any) -> None:
    """ValueError when `data` is too large or too deep to be a config (YAML aliases can make it both)."""
    try:
        too_many = count_values(data) > MAX_VALUES
    except RecursionError:
        raise ValueError("nested too deeply, or a YAML alias refers to its own anchor") from None
    if too_many:
        raise ValueError(f"holds more than {MAX_VALUES} values once YAML aliases are expanded")


def read_config_file(path: Path) -> dict[str, Any]:
    """The sections of a YAML or TOML file (an empty file is {}); unreadable or malformed files are UserErrors."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise UserError(f"{path}: unsupported config format {path.suffix or '(none)'!r}; accepted: .yaml, .yml, .toml")
    text = _read_text(path)
    try:
        data = _parse(text, kind)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: top level must be a mapping of sections (run, telemetry, probe, ...)")
    try:
        check_size(data)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`section.key=value`; the value is read as a YAML scalar or flow collection (`[1, 2]`)."""
    key, sep, raw = text.partition("=")
    path = [part.strip() for part in key.split(".")]
    if not sep or not all(path):
        raise UserError(
            f"override {shown(text)} is not accepted: use SECTION.KEY=VALUE, e.g. probe.matmul_sizes=[256,512]"
        )
    try:
        value = _parse(raw, "yaml") if raw.strip() else ""
        check_size(value)
    except ValueError as exc:
        raise UserError(f"override {shown(text)}: value {shown(raw)} is not a valid scalar or [list]: {exc}") from None
    return path, value


def apply_override(data: dict[str, Any], path: list[str], value: Any, origin: str) -> None:
    """Set `value` at the key `path` of `data`, creating sections on the way; `origin` names it in errors."""
    node = data
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"override {shown(origin)}: {shown(part)} is a value, not a section")
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
    if path is not None:  # the file's own sections first: an override must not take the blame for them
        check_sections(data, model, path)
    origins: dict[tuple[str, ...], str] = {}
    for text in overrides or []:
        key_path, value = parse_override(text)
        apply_override(data, key_path, value, text)
        origins[tuple(key_path)] = f"--set {text if len(text) <= 120 else shown(text)}"
    for dotted, (value, flag) in (flags or {}).items():
        if value is not None:
            apply_override(data, dotted.split("."), value, flag)
            origins[tuple(dotted.split("."))] = flag
    log.debug("config: %s, then %s", path or "defaults", ", ".join(origins.values()) or "no overrides")
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc, model, path, origins)) from None
    check_paths(config, path, origins)
    return config


def check_paths(
    config: BaseModel, path: Path | None, origins: dict[tuple[str, ...], str], at: tuple[str, ...] = ()
) -> None:
    """Every path a config holds obeys fleetbench.names (length per name and in all, no control character):
    a UserError blamed on the flag, --set or file that set it, as a validation error is."""
    for name in type(config).model_fields:
        value = getattr(config, name)
        key = (*at, name)
        if isinstance(value, BaseModel):
            check_paths(value, path, origins, key)
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            problem = path_problem(str(item)) if isinstance(item, Path) else None
            if problem is not None:
                source = next((o for keys, o in origins.items() if key[: len(keys)] == keys), str(path or "config"))
                raise UserError(f"{source}: {'.'.join(key)}: {problem}")


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
    elif isinstance(first["input"], dict):  # a whole section's check: its message says what is wrong
        message = first["msg"]
    else:
        message = f"{first['msg']} (got {shown(first['input'])})"
        if first["type"] == "string_type" and isinstance(first["input"], int | float):
            message += "; quote a number to make it text, e.g. '\"2024\"'"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {key}: {message}{more}"


def check_sections(data: dict[str, Any], model: type[BaseModel], path: Path, prefix: str = "") -> None:
    """A UserError naming the file and key where a section of `model` holds something else than keys."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if name not in data or not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            continue
        value = data[name]
        if value is None:  # a section whose keys are all commented out
            data[name] = value = {}
        if not isinstance(value, dict):
            raise UserError(
                f"{path}: {prefix}{name}: a section holds keys ({', '.join(accepted_keys(annotation, ()))}), "
                f"not {shown(value)}"
            )
        check_sections(value, annotation, path, f"{prefix}{name}.")


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
