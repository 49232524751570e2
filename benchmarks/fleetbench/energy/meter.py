"""Energy over a stretch of work: a reading before, one after; joules per step and per token, average watts.

On a GPU rank the figure is that GPU's NVML energy; on the CPU it is every CPU package's RAPL energy
(the whole machine's packages: shared by the ranks of one node). At the edge, where a board prints its
power instead of counting energy, sampled sources follow (energy/sampled.py: tegrastats, powermetrics,
a battery's rail on Linux or over adb). The first source with a figure gives it; where none can be read,
the reading says why for each and carries no figure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from fleetbench.energy import nvml, rapl
from fleetbench.energy.sampled import PowerSampler


@dataclass(frozen=True)
class EnergyReading:
    """Joules over `seconds` from `source` (nvml, rapl), or None with the reason."""

    source: str | None
    joules: float | None
    seconds: float
    reason: str | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # every source tried that gave nothing, and why
    covered_share: float | None = None  # a sampled source: the share of the stretch its samples span

    @property
    def watts(self) -> float | None:
        """Average power over the stretch."""
        return self.joules / self.seconds if self.joules is not None and self.seconds > 0 else None

    def per(self, count: float) -> float | None:
        """Joules per step, token ... (None when unknown or nothing was done)."""
        return self.joules / count if self.joules is not None and count > 0 else None

    def summary(self, steps: int, tokens: int) -> dict[str, object]:
        """What a record keeps: the source, joules, watts, per step and per token, or the reason."""
        return {
            "source": self.source,
            "joules": self.joules,
            "seconds": self.seconds,
            "average_watts": self.watts,
            "joules_per_step": self.per(steps),
            "joules_per_token": self.per(tokens),
            "reason": self.reason,
            "unavailable": self.reasons,
            "covered_share": self.covered_share,
        }


@dataclass
class EnergyMeter:
    """Start before the work, stop after. `gpu_index` None: the CPU packages (RAPL); `sampled`: power
    sources tried after those (energy/sampled.py SAMPLED_SOURCES), for boards without an energy counter."""

    gpu_index: int | None = None
    powercap: Path = rapl.POWERCAP
    sampled: tuple[str, ...] = ()
    read_rapl: bool = True  # without a GPU: read the CPU packages (False: the sampled sources only)
    _samplers: list[PowerSampler] = field(default_factory=list)
    _started: float = 0.0
    _gpu_mj: int | None = None
    _zones: list[rapl.Zone] = field(default_factory=list)
    _reasons: dict[str, str] = field(default_factory=dict)

    def start(self) -> EnergyMeter:
        """Take the first reading of every source this meter uses."""
        self._reasons = {}
        if self.gpu_index is not None:
            self._gpu_mj, why = nvml.read_millijoules(self.gpu_index)
            if why:
                self._reasons["nvml"] = why
        elif self.read_rapl:
            self._zones, why = rapl.read_zones(self.powercap)
            if why:
                self._reasons["rapl"] = why
        self._samplers = [PowerSampler(source).start() for source in self.sampled]
        self._started = time.monotonic()
        return self

    def stop(self) -> EnergyReading:
        """The energy since start, from the source that could be read both times."""
        seconds = time.monotonic() - self._started
        sampled = [(sampler.source, *sampler.stop(seconds)) for sampler in self._samplers]  # every thread ends here
        if self.gpu_index is not None and self._gpu_mj is not None:
            now, why = nvml.read_millijoules(self.gpu_index)
            if now is not None:
                return EnergyReading("nvml", (now - self._gpu_mj) / 1000, seconds)
            self._reasons["nvml"] = why or "NVML stopped answering"
        if self.gpu_index is None and self._zones:
            zones, why = rapl.read_zones(self.powercap)
            if zones:
                return EnergyReading("rapl", rapl.joules_between(self._zones, zones), seconds)
            self._reasons["rapl"] = why or "RAPL stopped answering"
        for source, joules, covered, why in sampled:
            if joules is not None:
                return EnergyReading(source, joules, seconds, covered_share=covered)
            self._reasons[source] = why or "no power samples"
        reason = "; ".join(f"{source}: {why}" for source, why in self._reasons.items()) or "no power source"
        return EnergyReading(None, None, seconds, reason, dict(self._reasons))
