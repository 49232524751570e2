"""Every dashboard the suite ships, in the order they appear in Grafana's folder."""

from __future__ import annotations

from fleetbench.dashboards.compare import COMPARE
from fleetbench.dashboards.definition import Dashboard
from fleetbench.dashboards.edge import EDGE
from fleetbench.dashboards.overview import OVERVIEW
from fleetbench.dashboards.profiling import PROFILING
from fleetbench.dashboards.training import TRAINING
from fleetbench.slurm.exporter import METRICS as SLURM_EXPORTER_METRICS

DASHBOARDS: list[Dashboard] = [OVERVIEW, TRAINING, PROFILING, EDGE, COMPARE]

# Series the DCGM exporter documents; dashboards may query these beside the catalogue's.
DCGM_METRICS = frozenset(
    {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    }
)

# Series Prometheus makes itself: ALERTS (one per pending or firing alert of the rules).
PROMETHEUS_METRICS = frozenset({"ALERTS"})

# Series of node_exporter (the node_exporter role on every node) that the alert rules read.
NODE_EXPORTER_METRICS = frozenset({"node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes"})

# Series of the Slurm exporter (fleetbench/slurm/exporter.py, run by the slurm role beside slurmctld).
SLURM_METRICS = frozenset(SLURM_EXPORTER_METRICS)
