"""Who, where and what of a run: run ids, host name, git revision, package versions.

Every command imports this module (the config's run id rule); the modules behind the run's
identity (secrets, socket, subprocess, importlib.metadata) load in the functions that use them.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from fleetbench.envvars import GIT_REVISION_ENV, HOST_ENV
from fleetbench.errors import UserError

# A run id becomes a folder name and a Prometheus label value: keep it to a safe, short alphabet.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RUN_ID_RULE = "1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"

# Packages whose versions decide what a number means; recorded with every result.
RECORDED_PACKAGES = ("fleetbench", "torch", "numpy", "prometheus-client", "pydantic")


def new_run_id(now: datetime | None = None) -> str:
    """A fresh run id: UTC time (so runs sort by age) plus four random hex digits (so they never collide)."""
    import secrets

    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


def validate_run_id(run_id: str) -> str:
    """Return `run_id` unchanged if it is safe as a folder name and label value; else raise UserError."""
    if not RUN_ID_PATTERN.fullmatch(run_id) or run_id in {".", ".."}:
        from fleetbench.names import shown

        raise UserError(f"run id {shown(run_id)} is not accepted: use {RUN_ID_RULE}")
    return run_id


def host_name() -> str:
    """The host label: $FLEETBENCH_HOST (set by images and deploys), else this machine's name."""
    import socket

    return os.environ.get(HOST_ENV) or socket.gethostname()


@cache
def git_revision() -> str:
    """The source tree's commit, or what the image builder baked in, or 'unknown'."""
    import subprocess

    baked = os.environ.get(GIT_REVISION_ENV)
    if baked:
        return baked
    source_dir = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(source_dir), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source_dir), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}+dirty" if dirty else rev


@cache
def package_versions() -> dict[str, str]:
    """Python's version and those of RECORDED_PACKAGES that are installed, by name."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": sys.version.split()[0]}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            continue
    return versions


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC (what records store)."""
    return datetime.now(UTC)
