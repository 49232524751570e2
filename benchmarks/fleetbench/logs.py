"""Diagnostics: one stderr handler for every module logger, its level set by `--log-level`.

Modules log through `logging.getLogger(__name__)`; what a person reads (tables, progress bars, the
closing summary) is drawn by the CLI. Warnings and errors say their level; info lines are
the message alone, so a run's log reads like what it showed. The level travels to child processes
(torchrun's ranks, the demo's train stage) through `LOG_LEVEL_ENV`, and `--debug` (print the
traceback of an unexpected error) through `DEBUG_ENV`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from fleetbench.envvars import DEBUG_ENV, LOG_LEVEL_ENV
from fleetbench.errors import UserError

__all__ = [
    "DEBUG_ENV",
    "DEFAULT_LEVEL",
    "LEVELS",
    "LOG_LEVEL_ENV",
    "checked_level_from_env",
    "debug_from_env",
    "level_from_env",
    "setup_logging",
]

LEVELS = ("debug", "info", "warning", "error")
DEFAULT_LEVEL = "info"


class _LevelPrefix(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        if record.levelno <= logging.DEBUG:
            return f"debug: {record.name}: {message}"
        return message


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time: a rich progress bar redirects it while it
    shows, so a log line printed then lands above the bar instead of through it."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def level_from_env() -> str:
    """The level a parent process chose, else the default (also for a value that is not a level)."""
    value = os.environ.get(LOG_LEVEL_ENV, DEFAULT_LEVEL).lower()
    return value if value in LEVELS else DEFAULT_LEVEL


def checked_level_from_env() -> str | None:
    """The level `LOG_LEVEL_ENV` names (any case), None when it is unset or empty; another value is a UserError."""
    value = os.environ.get(LOG_LEVEL_ENV, "").strip().lower()
    if not value:
        return None
    if value not in LEVELS:
        raise UserError(
            f"{LOG_LEVEL_ENV}={os.environ[LOG_LEVEL_ENV]!r} is not accepted; use one of {', '.join(LEVELS)}"
            " (or unset it)"
        )
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def debug_from_env() -> bool:
    """Whether `DEBUG_ENV` asks for tracebacks: 1/true/yes/on, or 0/false/no/off/empty; else a UserError."""
    value = os.environ.get(DEBUG_ENV, "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise UserError(f"{DEBUG_ENV}={os.environ[DEBUG_ENV]!r} is not accepted; use 1 or 0 (or unset it)")
    return value in _TRUE


def setup_logging(level: str, export: bool = True) -> None:
    """Send fleetbench's loggers to stderr at `level` (one of LEVELS); with `export`, child processes inherit it."""
    logger = logging.getLogger("fleetbench")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = _CurrentStderr()
    handler.setFormatter(_LevelPrefix("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    if export:
        os.environ[LOG_LEVEL_ENV] = level
