"""How far an edge figure can be trusted: its sample count, its CV and a verdict, and which
percentiles its samples support.

pyperf prints "the result may be unstable" when the samples' spread is large; an edge row that used
every try and still missed its CV target is "unstable", whatever else it says. A percentile q is
only an estimate when the samples reach past it: p99 of 10 samples is their maximum, so q needs at
least 1 / (1 - q) samples (p90: 10, p99: 100); below that it is left out (None in the record).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Verdict = Literal["stable", "unstable", "single sample"]


def min_samples(q: float) -> int:
    """The fewest samples that support percentile `q` (0-100): 1 up to the median, 10 for p90, 100 for p99."""
    return max(1, math.ceil(round(1.0 / (1.0 - q / 100.0), 9))) if q > 50 else 1


def supported_percentile(values: list[float], q: float) -> float:
    """Percentile `q` of `values` (numpy's linear interpolation), NaN when too few values support it."""
    if len(values) < min_samples(q):
        return math.nan
    return float(np.percentile(values, q))


@dataclass(frozen=True)
class Stability:
    """A figure's independent samples (tries), their CV and the verdict against the CV target."""

    samples: int
    cv: float
    cv_target: float

    @property
    def verdict(self) -> Verdict:
        """stable: CV under the target over >= 2 samples; single sample: no spread to judge; else unstable."""
        if self.samples < 2 or not math.isfinite(self.cv):
            return "single sample"
        return "stable" if self.cv < self.cv_target else "unstable"

    def as_dict(self) -> dict[str, Any]:
        """The record's `stability` entry."""
        return {
            "samples": self.samples,
            "cv": self.cv if math.isfinite(self.cv) else None,
            "cv_target": self.cv_target,
            "verdict": self.verdict,
        }

    def line(self) -> str:
        """`n=5 CV 11.5% unstable`, as the tables show it."""
        cv = f"{self.cv:.1%}" if math.isfinite(self.cv) else "-"
        return f"n={self.samples} CV {cv} {self.verdict}"
