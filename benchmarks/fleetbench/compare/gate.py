"""Which worse figures fail a comparison: the CI gate.

A figure fails when its verdict is `worse` (significant, in the bad direction) and the change goes
beyond its threshold: the metric's own (`compare.fail_thresholds_pct`) or `--fail-on-regression PCT`.
Like asv continuous, the gate is a factor on top of the test: noise never fails a build, and neither
does a real but small slow-down below the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetbench.compare.matching import Comparison


@dataclass(frozen=True)
class Regression:
    """One figure that fails the gate."""

    benchmark: str
    metric: str
    labels: dict[str, str]
    change_pct: float
    threshold_pct: float

    def describe(self) -> str:
        """One line naming the figure, its change and the threshold it crossed."""
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        where = f"{{{labels}}}" if labels else ""
        return f"{self.benchmark} {self.metric}{where} {self.change_pct:+.1f}% (threshold {self.threshold_pct:g}%)"


def regressions(
    comparisons: list[Comparison], fail_pct: float | None, per_metric_pct: dict[str, float]
) -> list[Regression]:
    """Every figure that is significantly worse by more than its threshold."""
    found = []
    for comparison in comparisons:
        for bench in comparison.benchmarks:
            for row in bench.rows:
                threshold = per_metric_pct.get(row.metric, fail_pct)
                change = row.change
                if threshold is None or change is None or change.verdict != "worse":
                    continue
                if abs(change.change_pct) > threshold:
                    found.append(Regression(bench.benchmark, row.metric, row.labels, change.change_pct, threshold))
    return found
