"""Energy of a rank's training steps: its GPU's NVML counter, or on the CPU the machine's RAPL packages read
by the node's first rank (the packages are shared by the node's ranks: read once, not once per rank)."""

from __future__ import annotations

from fleetbench.devices import DeviceInfo
from fleetbench.energy.meter import EnergyMeter, EnergyReading
from fleetbench.telemetry import energy as telemetry_energy
from fleetbench.telemetry.session import BenchmarkRun
from fleetbench.train.parallel import DistEnv

OTHER_CPU_RANK = "the CPU packages are the node's: its first rank (local rank 0) records their energy"


def meter_for(device: DeviceInfo, env: DistEnv) -> EnergyMeter | None:
    """The meter of this rank, or None for a CPU rank that is not its node's first."""
    if device.backend == "cuda":
        index = device.torch_device.index
        return EnergyMeter(gpu_index=index if index is not None else env.local_rank)
    return EnergyMeter() if env.local_rank == 0 else None


def covered_ranks(device: DeviceInfo, env: DistEnv) -> int:
    """How many ranks' work the meter's energy covers: one GPU, or every rank of the node on the CPU."""
    return 1 if device.backend == "cuda" else env.local_world_size


def record_energy(run: BenchmarkRun, reading: EnergyReading | None, steps: int, tokens: int) -> None:
    """The rank's energy in its record and metrics; a CPU rank that is not its node's first says why it has none."""
    if reading is None:
        run.summary["energy"] = {"source": None, "joules": None, "reason": OTHER_CPU_RANK}
        return
    telemetry_energy.record_energy(run, reading, steps, tokens)
