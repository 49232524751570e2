"""A run's energy in its record and metrics: joules, per step, per token and average watts, or the reason
there is no figure (fleetbench.energy reads it; every job that measures energy records it here)."""

from __future__ import annotations

from fleetbench.energy.meter import EnergyReading
from fleetbench.telemetry.session import BenchmarkRun


def record_energy(run: BenchmarkRun, reading: EnergyReading, steps: int, tokens: int) -> None:
    """summary["energy"] always (the figures or the reasons); the metrics where a source gave a figure."""
    run.summary["energy"] = reading.summary(steps, tokens)
    if reading.joules is None or reading.source is None:
        return
    source = reading.source
    run.metrics.set("fleetbench_energy_joules", reading.joules, source=source)
    for metric, value in (
        ("fleetbench_energy_per_step_joules", reading.per(steps)),
        ("fleetbench_energy_per_token_joules", reading.per(tokens)),
        ("fleetbench_energy_average_watts", reading.watts),
    ):
        if value is not None:
            run.metrics.set(metric, value, source=source)
