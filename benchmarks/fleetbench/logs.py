"""Diagnostics: one stderr handler for every module logger, its level set by `--log-level`.

Modules log through `logging.getLogger(__name__)`; the rich Console is kept for what a person reads
(tables, progress bars, the closing summary). Warnings and errors say their level; info lines are
the message alone, so a run's log reads like its console. The level travels to child processes
(torchrun's ranks, the demo's train stage) through `LOG_LEVEL_ENV`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

LOG_LEVEL_ENV = "FLEETBENCH_LOG_LEVEL"
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
    """The level a parent process chose, else the default."""
    value = os.environ.get(LOG_LEVEL_ENV, DEFAULT_LEVEL).lower()
    return value if value in LEVELS else DEFAULT_LEVEL


def setup_logging(level: str) -> None:
    """Send fleetbench's loggers to stderr at `level` (one of LEVELS); child processes inherit it."""
    logger = logging.getLogger("fleetbench")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = _CurrentStderr()
    handler.setFormatter(_LevelPrefix("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    os.environ[LOG_LEVEL_ENV] = level
