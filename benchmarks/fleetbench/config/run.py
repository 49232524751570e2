"""Sections `run` (where results go, the run id) and `telemetry` (Pushgateway, textfile, /metrics)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from fleetbench.config.strict import StrictModel
from fleetbench.results.store import DEFAULT_RESULTS_DIR
from fleetbench.runinfo import RUN_ID_PATTERN, RUN_ID_RULE
from fleetbench.urls import check_url

__all__ = ["RunConfig", "TelemetryConfig", "validate_listen_address", "validate_pushgateway_url"]

# One DNS label of a host name (RFC 1123): letters, digits and inner hyphens, 1-63 characters.
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_LISTEN_ACCEPTED = (
    "an IP address or a host name, e.g. 127.0.0.1 (this host only, the default), ::1 or 0.0.0.0 (every interface)"
)


def validate_pushgateway_url(url: str) -> str:
    """Accept http(s)://host[:port][/prefix]; anything else is a typo we should catch before a run."""
    return check_url(url, example="http://127.0.0.1:9091")


def validate_listen_address(address: str) -> str:
    """Accept an IP address or a host name for /metrics to listen on; anything else fails before a run.

    Each refusal says what is wrong: a port (that is telemetry.http_port), brackets or a scheme, an
    IPv4 address out of range (999.1.1.1 is no host name either: its last label is a number).
    """
    import ipaddress

    try:
        ipaddress.ip_address(address)
        return address
    except ValueError:
        pass
    labels = address.removesuffix(".").split(".")
    if not address.strip():
        problem = "is empty"
    elif any(c.isspace() for c in address):
        problem = "must not contain spaces"
    elif address.startswith("[") or "/" in address:
        problem = "must be a bare address, without brackets, scheme or path"
    elif ":" in address:
        problem = "is not a valid IPv6 address, nor a host without a port (the port is telemetry.http_port)"
    elif labels[-1].isdigit():
        problem = "is not a valid IPv4 address"
    elif len(address) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        problem = "is not a host name (dot-separated labels of letters, digits and inner hyphens)"
    else:
        return address
    raise ValueError(f"{problem}; accepted: {_LISTEN_ACCEPTED}")


class RunConfig(StrictModel):
    """Section `run`: the results root and the run id (folder name and `run_id` label)."""

    results_dir: Path = DEFAULT_RESULTS_DIR
    run_id: str | None = None
    # Set by a run for the processes it starts (the demo's stages, torchrun's ranks): they add to the
    # run's records. A run a user starts with the id of an existing run is refused instead.
    continues: bool = False

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        if value is not None and (not RUN_ID_PATTERN.fullmatch(value) or value in {".", ".."}):
            raise ValueError(f"use {RUN_ID_RULE}")
        return value


class TelemetryConfig(StrictModel):
    """Section `telemetry`: where a run's metrics go besides its own folder."""

    pushgateway: str | None = Field(
        default=None, description="Pushgateway base URL; unset means no push (records and .prom still written)"
    )
    push_timeout_s: float = Field(default=2.0, gt=0, le=60)
    push_retries: int = Field(default=3, ge=0, le=10)
    push_backoff_s: float = Field(default=0.2, ge=0, le=10)
    push_interval_s: float = Field(default=1.0, ge=0, le=3600, description="least time between background pushes")
    spool_dir: Path | None = Field(default=None, description="default: <results_dir>/.spool")
    textfile_dir: Path | None = Field(
        default=None, description="node_exporter textfile collector folder; the run folder is always written"
    )
    http_port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics while running; 0 takes any free port"
    )
    http_addr: str = Field(default="127.0.0.1", description="address /metrics listens on (loopback by default)")

    @field_validator("pushgateway")
    @classmethod
    def _pushgateway(cls, value: str | None) -> str | None:
        return None if value is None else validate_pushgateway_url(value)

    @field_validator("spool_dir", "textfile_dir", mode="before")
    @classmethod
    def _folder(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must name a folder; leave the key unset for the default")
        return value

    @field_validator("http_addr")
    @classmethod
    def _http_addr(cls, value: str) -> str:
        return validate_listen_address(value)
