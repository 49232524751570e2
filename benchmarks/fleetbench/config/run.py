"""Sections `run` (where results go, the run id) and `telemetry` (Pushgateway, textfile, /metrics)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from fleetbench.config.strict import StrictModel
from fleetbench.results.store import DEFAULT_RESULTS_DIR
from fleetbench.runinfo import RUN_ID_PATTERN, RUN_ID_RULE

__all__ = ["RunConfig", "TelemetryConfig", "validate_pushgateway_url"]


def validate_pushgateway_url(url: str) -> str:
    """Accept http(s)://host[:port][/prefix]; anything else is a typo we should catch before a run."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has an invalid port; expected http(s)://HOST[:PORT], e.g. http://127.0.0.1:9091") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("is not an http(s) URL; expected http(s)://HOST[:PORT], e.g. http://127.0.0.1:9091")
    if parts.query or parts.fragment or any(c.isspace() for c in url):
        raise ValueError("must not carry a query, fragment or spaces; expected http(s)://HOST[:PORT]")
    if port == 0:
        raise ValueError("has port 0; expected a port in 1-65535")
    return url.rstrip("/")


class RunConfig(StrictModel):
    """Section `run`: the results root and the run id (folder name and `run_id` label)."""

    results_dir: Path = DEFAULT_RESULTS_DIR
    run_id: str | None = None

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
    http_port: int | None = Field(default=None, ge=0, le=65535, description="serve /metrics while running")
    http_addr: str = "127.0.0.1"

    @field_validator("pushgateway")
    @classmethod
    def _pushgateway(cls, value: str | None) -> str | None:
        return None if value is None else validate_pushgateway_url(value)
