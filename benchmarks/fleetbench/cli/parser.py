"""argparse that reports bad flags as one line (via UserError) instead of usage text plus an error."""

from __future__ import annotations

import argparse
from typing import NoReturn

from fleetbench.errors import UserError


class OneLineParser(argparse.ArgumentParser):
    """The parser of `fleetbench` and its subcommands: a usage error is a UserError, printed by main."""

    def error(self, message: str) -> NoReturn:
        """Raise the argparse error as a UserError that points at --help (argparse would print usage and exit)."""
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")
