"""The energy meter of an edge run: NVML when the Vulkan adapter is an NVIDIA GPU, RAPL for the host's
CPU packages, then the sampled board power of tegrastats, powermetrics or a battery (edge.energy_sources,
in that order of preference; the first figure wins, every other source says why it gave none)."""

from __future__ import annotations

from fleetbench.config.edge import EdgeConfig
from fleetbench.edge.gpu import AdapterReport
from fleetbench.energy.meter import EnergyMeter, EnergyReading
from fleetbench.energy.sampled import SAMPLED_SOURCES

NVIDIA_VENDOR_ID = 0x10DE
NO_SOURCES = "edge.energy_sources is empty: no energy was read"


def edge_meter(cfg: EdgeConfig, adapter: AdapterReport | None) -> EnergyMeter | None:
    """The meter for the timed work, or None when no source is asked for."""
    sources = cfg.energy_sources
    if not sources:
        return None
    nvidia = adapter is not None and adapter.vendor_id == NVIDIA_VENDOR_ID
    return EnergyMeter(
        gpu_index=0 if nvidia and "nvml" in sources else None,  # the first GPU: Vulkan's adapter order is NVML's
        sampled=tuple(s for s in sources if s in SAMPLED_SOURCES),
        read_rapl="rapl" in sources,
    )


def unmetered(seconds: float) -> EnergyReading:
    """The reading of a run that asked for no source: no figure, and why."""
    return EnergyReading(None, None, seconds, NO_SOURCES)
