"""The root of the configuration: one field per section, each section's model in its own module.

Every section rejects unknown keys, wrong types and out-of-range values. The section models are
re-exported here for the modules that import them from this one.
"""

from __future__ import annotations

from pydantic import Field

from fleetbench.config.collectives import CollectivesConfig
from fleetbench.config.compare import CompareConfig
from fleetbench.config.edge import EDGE_KERNELS, EdgeConfig, EdgeGemmSize, EdgeKernel
from fleetbench.config.probe import CopyMiB, ProbeConfig, Size
from fleetbench.config.profile import NcuConfig, ProfileConfig, ProfileThresholds, Ratio
from fleetbench.config.run import RunConfig, TelemetryConfig, validate_pushgateway_url
from fleetbench.config.strict import StrictModel
from fleetbench.config.trace import TraceConfig
from fleetbench.config.train import TrainConfig
from fleetbench.runinfo import RUN_ID_PATTERN, RUN_ID_RULE

__all__ = [
    "EDGE_KERNELS",
    "RUN_ID_PATTERN",
    "RUN_ID_RULE",
    "CollectivesConfig",
    "CompareConfig",
    "CopyMiB",
    "EdgeConfig",
    "EdgeGemmSize",
    "EdgeKernel",
    "FleetbenchConfig",
    "NcuConfig",
    "ProbeConfig",
    "ProfileConfig",
    "ProfileThresholds",
    "Ratio",
    "RunConfig",
    "Size",
    "StrictModel",
    "TelemetryConfig",
    "TraceConfig",
    "TrainConfig",
    "validate_pushgateway_url",
]


class FleetbenchConfig(StrictModel):
    """A whole config file: `run` and `telemetry`, shared by every command, and one section per job."""

    run: RunConfig = Field(default_factory=RunConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    probe: ProbeConfig = Field(default_factory=ProbeConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    profile: ProfileConfig = Field(default_factory=ProfileConfig)
    edge: EdgeConfig = Field(default_factory=EdgeConfig)
    compare: CompareConfig = Field(default_factory=CompareConfig)
    collectives: CollectivesConfig = Field(default_factory=CollectivesConfig)
    trace: TraceConfig = Field(default_factory=TraceConfig)
