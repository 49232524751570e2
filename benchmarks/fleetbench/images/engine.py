"""The connection to a Docker engine, with one clear line when none answers."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fleetbench.errors import UserError

if TYPE_CHECKING:
    import docker

START_HINT = (
    "start one with `bash scripts/dockerd.sh` (as root: dockerd --bridge=none --iptables=false, "
    "installed by `make setup` as Debian's docker.io), or point DOCKER_HOST at a running engine"
)


def connect(timeout_s: float = 600) -> docker.DockerClient:
    """A client for the engine in DOCKER_HOST (default: the local socket), checked with a ping."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        raise UserError(
            "the Docker SDK for Python is not installed: `.venv/bin/pip install docker` (or `make setup`)"
        ) from None
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except DockerException as exc:
        raise UserError(f"no Docker engine reachable at {where} ({_reason(exc)}); {START_HINT}") from None
    return client


def _reason(exc: Exception) -> str:
    text = str(exc)
    for known in ("No such file or directory", "Connection refused", "Permission denied", "timed out"):
        if known in text:
            return known.lower()
    return text.splitlines()[0][:160] if text else type(exc).__name__
