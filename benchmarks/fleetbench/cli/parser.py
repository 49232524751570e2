"""argparse that reports bad flags as one line (via UserError) instead of usage text plus an error, and
checks every name, id and path argument against fleetbench.names before any command sees it."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from fleetbench.errors import UserError
from fleetbench.names import name_problem, path_problem

# Arguments whose text becomes one file or folder name, or part of one, and that no stricter rule checks
# later (run ids and baseline names have their own alphabet of at most 64 characters, which says more).
NAME_DESTS = frozenset({"names", "run_prefix", "metric", "benchmark"})
# Arguments of plain text that are paths, or run ids that may be run folders (`compare BASE NEW`).
PATH_DESTS = frozenset({"runs", "run", "output", "compare"})
# Arguments that hold a benchmark command when the option named here is given (`compare --rounds -- probe`).
COMMAND_WHEN = {"runs": "rounds"}


def checked_path(text: str) -> Path:
    """The type of every `type=Path` argument: the text checked first (an empty one would become '.')."""
    problem = path_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


class OneLineParser(argparse.ArgumentParser):
    """The parser of `fleetbench` and its subcommands: a usage error is a UserError, printed by main."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", Path, checked_path)  # argparse looks types up here: type=Path means checked_path

    def error(self, message: str) -> NoReturn:
        """Raise the argparse error as a UserError that points at --help (argparse would print usage and exit)."""
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, then check this parser's name and path arguments (each subcommand checks its own)."""
        parsed, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            problem = self._problem(action, parsed)
            if problem is not None:
                self.error(f"argument {argparse._get_action_name(action)}: {problem}")
        return parsed, extras

    @staticmethod
    def _problem(action: argparse.Action, parsed: argparse.Namespace) -> str | None:
        """What is wrong with the value `action` stored, when it is a name or a path; else None."""
        value = getattr(parsed, action.dest, None)
        if value is None or isinstance(action, argparse._SubParsersAction):
            return None
        if getattr(parsed, COMMAND_WHEN.get(action.dest, ""), None) is not None:
            return None  # a command line of its own, checked by the command it runs
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, os.PathLike):
                problem = path_problem(os.fspath(item))
            elif not isinstance(item, str):
                continue
            elif action.dest in NAME_DESTS:
                problem = name_problem(item)
            elif action.dest in PATH_DESTS and item != "-":
                problem = path_problem(item)
            else:
                continue
            if problem is not None:
                return problem
        return None
