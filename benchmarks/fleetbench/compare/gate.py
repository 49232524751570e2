"""The CI gate: what fails a comparison (exit 1), each named on one line.

- An introduced failure: a benchmark ok in base and failed, crashed or missing in new, or a figure
  base has that new lost under the same configuration (asv continuous counts these as regressions).
- A figure judged *worse*: significant after the correction across the comparison's figures, with an
  interval that excludes no change, and beyond its minimum change (which the machine's noise
  calibration sets, `compare/noise.py`). That is the default gate.
- With `--fail-on-regression PCT` (or `compare.fail_on_regression_pct`, and per metric
  `compare.fail_thresholds_pct`), a worse figure fails only when it is worse by a factor of more than
  1 + PCT/100: like asv continuous' factor, on top of the test. A factor, so a rate that halved and a
  time that doubled are both 100 % worse: PCT 50 fails both, where a plain percentage would let the
  rate's -50 % pass and could never fail a rate past 100 %.
- Figures without a verdict (not enough independent samples, unstable) never fail the gate: they say
  why instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetbench.compare.matching import Comparison


@dataclass(frozen=True)
class Regression:
    """One figure or benchmark that fails the gate."""

    benchmark: str
    metric: str
    labels: dict[str, str]
    change_pct: float | None
    threshold_pct: float | None
    reason: str = ""  # an introduced failure: what happened

    def describe(self) -> str:
        """One line naming the figure and its change against its bar, or the benchmark and its failure."""
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        where = f"{{{labels}}}" if labels else ""
        if self.reason:
            return f"{self.benchmark} {self.metric}{where}".strip() + f": {self.reason}"
        change = f"{self.change_pct:+.1f}%" if self.change_pct is not None else "?"
        bar = f"worse by a factor beyond {self.threshold_pct:g}%" if self.threshold_pct else "significantly worse"
        return f"{self.benchmark} {self.metric}{where} {change} ({bar})"


def introduced_failures(comparison: Comparison) -> list[Regression]:
    """Benchmarks that failed or went missing in new, and figures lost under the same configuration."""
    found = [Regression(f.benchmark, "", {}, None, None, f.reason) for f in comparison.failures]
    for bench in comparison.benchmarks:
        for row in bench.lost_figures:
            found.append(Regression(bench.benchmark, row.metric, row.labels, None, None, "in base, missing in new"))
    return found


def regressions(
    comparisons: list[Comparison], fail_pct: float | None, per_metric_pct: dict[str, float]
) -> list[Regression]:
    """Every introduced failure, and every figure judged worse (by more than its threshold, when one is set)."""
    found = []
    for comparison in comparisons:
        found += introduced_failures(comparison)
        for bench in comparison.benchmarks:
            for row in bench.rows:
                threshold = per_metric_pct.get(row.metric, fail_pct)
                change = row.change
                if change is None or row.excluded or change.verdict != "worse":
                    continue
                if threshold is None or change.factor_pct > threshold:
                    found.append(Regression(bench.benchmark, row.metric, row.labels, change.change_pct, threshold))
    return found
