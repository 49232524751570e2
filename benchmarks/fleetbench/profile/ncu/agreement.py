"""How often our class agrees with NVIDIA's SOLBottleneck rule over a set of reports (`make perf`, the tests).

Every launch our summary classes (memory_bound, compute_bound, balanced, latency_bound) and whose file
carries NVIDIA's bottleneck verdict is judged: it agrees, or disagrees with a stated reason (thresholds
set away from NVIDIA's, derived figures, a figure at a threshold to the file's printed precision), or
disagrees unexplained. The memory level is judged the same way where NVIDIA's rule names one.
Launches count with their invocations (an entry of ncu's --print-summary stands for several).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetbench.profile.classify import VERDICTS
from fleetbench.profile.ncu.summary import NcuSummary


@dataclass
class Agreement:
    """Counts of launches over reports, and the launches that disagree (file, launch, why)."""

    launches: int = 0  # every launch summarised
    classed: int = 0  # with one of our verdict classes (not unknown, not_measured)
    judged: int = 0  # classed, and the file has NVIDIA's verdict on it
    agree: int = 0
    explained: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    levels_judged: int = 0  # memory levels NVIDIA names and ours names too
    levels_agree: int = 0
    level_differences: list[str] = field(default_factory=list)

    def add(self, summary: NcuSummary, name: str) -> None:
        """Count the launches of one summarised report (`name`: how the report is called in the lists)."""
        for k in summary.kernels:
            n = k.invocations
            self.launches += n
            if k.cls not in VERDICTS:
                continue
            self.classed += n
            if k.nvidia_class is None:
                continue
            self.judged += n
            if k.nvidia_class == k.cls:
                self.agree += n
            elif k.disagreement_why:
                self.explained.append(f"{name} {k.id} {k.short}: {k.disagreement}")
            else:
                self.unexplained.append(f"{name} {k.id} {k.short}: {k.disagreement}")
            if k.nvidia_level and k.level:
                self.levels_judged += n
                if k.nvidia_level == k.level:
                    self.levels_agree += n
                else:
                    self.level_differences.append(
                        f"{name} {k.id} {k.short}: ours {k.level} ({k.level_source}), NVIDIA {k.nvidia_level}"
                    )

    @property
    def disagree_share(self) -> float:
        """The share of judged launches whose class differs from NVIDIA's, explained or not."""
        return (self.judged - self.agree) / self.judged if self.judged else 0.0
