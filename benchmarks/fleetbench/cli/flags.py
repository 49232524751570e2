"""Config shortcut flags, each declared once: one table entry gives the argparse argument and the override.

A command lists its shortcuts (`--steps` for `--set train.steps=N`) as a tuple of `Flag`s and adds them
with `add_flags`; the parser remembers the tables it was given, and `config_from_args` applies every
flag the user typed to its config key, blamed on the flag if the value is wrong. A new knob is one
entry, and tests/test_cli_flags.py checks every entry's key against the config schema.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLES_DEST = "config_flags"  # the Namespace attribute holding the tables of the command that was parsed


@dataclass(frozen=True)
class Flag:
    """One shortcut: `name` on the command line sets the config key `key`.

    A name without leading dashes is a positional that takes the rest of the command line (after `--`).
    `example` is a value the flag accepts (what the tests type); a switch takes none.
    """

    name: str
    key: str
    help: str
    example: str = ""
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False
    # The config value of the parsed one, given the flag's name for error messages (default: as parsed,
    # a path as text); None from it leaves the key alone.
    convert: Callable[[Any, str], Any] | None = None
    also: tuple[tuple[str, Any], ...] = ()  # further keys set to fixed values when the flag is given

    @property
    def positional(self) -> bool:
        """Whether this is the command's trailing `-- ARGS` rather than an option."""
        return not self.name.startswith("-")

    @property
    def dest(self) -> str:
        """The Namespace attribute argparse stores the flag's value under."""
        return self.name.lstrip("-").replace("-", "_")

    @property
    def shown(self) -> str:
        """How an error message names the flag."""
        return self.metavar or self.name if self.positional else self.name

    @property
    def keys(self) -> list[str]:
        """Every config key the flag sets."""
        return [self.key, *(key for key, _ in self.also)]

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        """Add the argparse argument; unset, its value is None (a switch too), so the config decides."""
        if self.positional:
            parser.add_argument(self.name, nargs=argparse.REMAINDER, metavar=self.metavar, help=self.help)
        elif self.switch:
            parser.add_argument(self.name, action="store_true", default=None, help=self.help)
        else:
            parser.add_argument(
                self.name, type=self.type or str, metavar=self.metavar, choices=self.choices, help=self.help
            )

    def overrides(self, args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
        """The keys this flag sets, as `load_config` takes them: {key: (value, flag)}; a None value is no override."""
        value = getattr(args, self.dest, None)
        if value is not None and self.convert is not None:
            value = self.convert(value, self.shown)
        elif isinstance(value, Path):
            value = str(value)
        given = value is not None
        return {
            self.key: (value, self.shown),
            **{key: (fixed if given else None, self.shown) for key, fixed in self.also},
        }


def torchrun_flags(section: str) -> tuple[Flag, ...]:
    """The launch flags every torchrun job takes (the trainer, collectives), for its config `section`."""
    return (
        Flag("--nproc", f"{section}.nproc", "ranks on this node (default: GPUs, or 2 on CPU)", "2", int, "N"),
        Flag("--nnodes", f"{section}.nnodes", "nodes in the job (default: 1)", "2", int, "N"),
        Flag("--node-rank", f"{section}.node_rank", "this node's index; 0 hosts the rendezvous", "1", int, "N"),
        Flag(
            "--rdzv-endpoint",
            f"{section}.rdzv_endpoint",
            "node 0's rendezvous address (multi-node)",
            example="node0:29400",
            metavar="HOST:PORT",
        ),
    )


def add_flags(
    parser: argparse.ArgumentParser, flags: tuple[Flag, ...], title: str | None = None
) -> argparse.ArgumentParser | argparse._ArgumentGroup:
    """Add `flags` to `parser` (in an argument group titled `title`, if given) and remember them on it
    for `config_from_args`; returns where they went, for the command's other options of that group."""
    target = parser.add_argument_group(title) if title else parser
    for flag in flags:
        flag.add_to(target)
    tables = parser.get_default(TABLES_DEST) or ()
    parser.set_defaults(**{TABLES_DEST: (*tables, flags)})
    return target


def flag_overrides(args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """The overrides of every shortcut flag the parsed command declared (empty if it declared none)."""
    tables: Iterable[tuple[Flag, ...]] = getattr(args, TABLES_DEST, None) or ()
    found: dict[str, tuple[Any, str]] = {}
    for table in tables:
        for flag in table:
            for key, (value, shown) in flag.overrides(args).items():
                if value is not None or key not in found:
                    found[key] = (value, shown)
    return found
