"""The CLI's config shortcut flags (`cli/flags.py` tables): each is declared once, names a key the config
schema has, and works: typed on its command, it changes that key of the validated config."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import fleetbench.cli
from fleetbench.cli.flags import TABLES_DEST, Flag, flag_overrides
from fleetbench.cli.main import COMMANDS, build_parser, command_module
from fleetbench.config.loader import load_config
from fleetbench.config.schema import FleetbenchConfig


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (sub)command of `parser` with the words that select it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def declared() -> list[tuple[tuple[str, ...], Flag]]:
    """(command words, flag) of every table every command of `fleetbench` added."""
    return [
        (path, flag)
        for path, parser in commands(build_parser())
        for table in parser.get_default(TABLES_DEST) or ()
        for flag in table
    ]


def module_tables() -> dict[str, tuple[Flag, ...]]:
    """The flag tables the command modules define, found by scanning them."""
    found = {}
    for name in sorted(set(COMMANDS.values())):
        module = command_module(name)
        for attribute, value in vars(module).items():
            if isinstance(value, tuple) and value and all(isinstance(item, Flag) for item in value):
                found[f"{name}:{attribute}"] = value
    return found


def modules_declaring_flags() -> set[str]:
    """The modules of fleetbench.cli whose source builds a `Flag`."""
    folder = Path(fleetbench.cli.__file__).parent
    return {
        str(path.relative_to(folder).with_suffix(""))
        for path in folder.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Flag"
    }


def schema_field(dotted: str, model: type[BaseModel] = FleetbenchConfig) -> bool:
    """Whether `dotted` (train.steps, profile.ncu.gpu) is a key of the config schema."""
    *sections, key = dotted.split(".")
    for part in sections:
        field = model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return False
        model = annotation
    return key in model.model_fields


def config_value(config: BaseModel, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


NEEDED = {
    ("ncu", "summarize"): ["report.ncu-rep"],
    ("trace", "summarize"): ["trace.json"],
}  # a command's own positional argument


def argv_of(path: tuple[str, ...], flag: Flag) -> list[str]:
    if flag.positional:
        return [*path, "--", *flag.example.split()]
    return [*path, *NEEDED.get(path, []), flag.name, *([] if flag.switch else [flag.example])]


FLAGS = declared()


def test_every_table_is_added_to_a_command() -> None:
    """Each table a cli module defines is added to some command (a table nobody adds is dead), and the
    commands' tables are all of them: nothing else declares a shortcut."""
    tables = module_tables()
    added = {id(table) for _, parser in commands(build_parser()) for table in parser.get_default(TABLES_DEST) or ()}
    assert len(tables) >= 9, sorted(tables)  # train, launch, probe, profile, ncu run/summarize, roofline, edge x3
    assert {name for name, table in tables.items() if id(table) not in added} == set()
    assert added == {id(table) for table in tables.values()}
    assert modules_declaring_flags() <= {*COMMANDS.values(), "flags"}


def test_every_flag_key_is_in_the_schema() -> None:
    missing = [(path, flag.name, key) for path, flag in FLAGS for key in flag.keys if not schema_field(key)]
    assert missing == []


def test_a_key_outside_the_schema_is_caught() -> None:
    """The schema check fails a misspelt key (what used to show only when someone typed the flag)."""
    assert schema_field("train.steps") and schema_field("profile.ncu.gpu")
    assert not schema_field("train.step")
    assert not schema_field("profile.ncu.gpu.name")
    assert not schema_field("profiles.device")


def test_each_flag_is_declared_once_per_command() -> None:
    names = [(path, flag.name) for path, flag in FLAGS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(("path", "flag"), FLAGS, ids=[" ".join((*p, f.name)) for p, f in FLAGS])
def test_each_flag_sets_its_key(path: tuple[str, ...], flag: Flag) -> None:
    """Typed with its example, the flag parses, overrides its keys (blaming itself), and the validated
    config differs from the default at exactly those keys."""
    assert flag.switch or flag.example, f"{flag.name}: the table entry needs an example value"
    args = build_parser().parse_args(argv_of(path, flag))
    overrides = {key: given for key, given in flag_overrides(args).items() if given[0] is not None}
    assert set(overrides) == set(flag.keys)
    assert {shown for _, shown in overrides.values()} == {flag.shown}
    config = load_config(None, [], overrides)
    default = FleetbenchConfig()
    for key in flag.keys:
        assert config_value(config, key) != config_value(default, key), key


def test_an_unset_flag_leaves_the_config_alone() -> None:
    """A command typed without its shortcuts gives no override: the file's and --set values stand."""
    for path in {path for path, _ in FLAGS}:
        args = build_parser().parse_args([*path, *NEEDED.get(path, [])])
        assert {key: value for key, (value, _) in flag_overrides(args).items() if value is not None} == {}, path
