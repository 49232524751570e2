"""argparse that reports bad flags as one line (via UserError) instead of usage text plus an error."""

from __future__ import annotations

import argparse
from typing import NoReturn

from fleetbench.errors import UserError


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")
