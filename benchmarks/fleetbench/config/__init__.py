"""Validated configuration: one schema per benchmark section, loaded from YAML/TOML plus overrides."""

from fleetbench.config.loader import load_config
from fleetbench.config.schema import FleetbenchConfig, ProbeConfig, RunConfig, TelemetryConfig

__all__ = ["FleetbenchConfig", "ProbeConfig", "RunConfig", "TelemetryConfig", "load_config"]
