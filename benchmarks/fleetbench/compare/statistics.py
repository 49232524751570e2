"""Is the difference between two sets of samples real? The test behind every verdict of `compare`.

A figure with samples on both sides (step times, tries' medians, timed blocks) is tested with
Mann-Whitney U (two-sided, no assumption of normality; scipy.stats.mannwhitneyu) and its change is
the ratio of medians, new / base, with a percentile bootstrap confidence interval
(scipy.stats.bootstrap). The change is significant when the test rejects at `alpha`, the interval
excludes 1, and the change is at least `min_change_pct`: a real but negligible shift is reported as no
significant change, as pyperf does. A figure with a single value on either side cannot be tested:
it is judged against `single_value_threshold_pct` alone, and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from fleetbench.catalogue import Better

if TYPE_CHECKING:
    from fleetbench.config.compare import CompareConfig

Verdict = Literal["better", "worse", "no significant change", "no direction"]
Method = Literal["mann-whitney + bootstrap", "single value"]

# Fewer samples than this on a side and the test has no power; the threshold decides instead.
MIN_SAMPLES = 3


@dataclass(frozen=True)
class TestSettings:
    """How strict the comparison is (the `compare` config section)."""

    alpha: float = 0.05
    confidence_level: float = 0.95
    min_change_pct: float = 1.0
    single_value_threshold_pct: float = 5.0
    bootstrap_resamples: int = 2000
    seed: int = 0


def settings_from(cfg: CompareConfig) -> TestSettings:
    """The test settings of a `compare` config section (compare and report --compare read the same section)."""
    return TestSettings(
        cfg.alpha, cfg.confidence_level, cfg.min_change_pct, cfg.single_value_threshold_pct,
        cfg.bootstrap_resamples, cfg.seed,
    )  # fmt: skip


@dataclass(frozen=True)
class Change:
    """The comparison of one figure: values, relative change with its interval, test and verdict."""

    base: float
    new: float
    ratio: float  # new / base (medians of the samples when both sides have them)
    ci_low: float | None  # confidence interval of the ratio; None for single values
    ci_high: float | None
    p_value: float | None
    method: Method
    significant: bool
    verdict: Verdict

    @property
    def change_pct(self) -> float:
        """(new - base) / base in percent."""
        return (self.ratio - 1.0) * 100.0

    @property
    def ci_pct(self) -> tuple[float, float] | None:
        """The confidence interval of the change in percent."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_low - 1.0) * 100.0, (self.ci_high - 1.0) * 100.0


def _ratio_of_medians(base: np.ndarray, new: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(new, axis=axis) / np.median(base, axis=axis))


def _verdict(ratio: float, significant: bool, better: Better | None) -> Verdict:
    if not significant:
        return "no significant change"
    if better is None:
        return "no direction"
    improved = ratio > 1.0 if better == "higher" else ratio < 1.0
    return "better" if improved else "worse"


def _ratio(base: float, new: float) -> float:
    if base == 0:
        return 1.0 if new == 0 else math.inf
    return new / base


def compare_samples(
    base_value: float,
    new_value: float,
    base_samples: list[float],
    new_samples: list[float],
    better: Better | None,
    settings: TestSettings | None = None,
) -> Change:
    """Compare one figure of two runs: tested on the samples when both have enough, else by threshold."""
    settings = settings or TestSettings()
    base = np.asarray([s for s in base_samples if math.isfinite(s)], dtype=float)
    new = np.asarray([s for s in new_samples if math.isfinite(s)], dtype=float)
    usable = len(base) >= MIN_SAMPLES and len(new) >= MIN_SAMPLES and np.median(base) != 0
    if not usable:
        ratio = _ratio(base_value, new_value)
        significant = abs(ratio - 1.0) * 100.0 >= settings.single_value_threshold_pct
        return Change(
            base_value,
            new_value,
            ratio,
            None,
            None,
            None,
            "single value",
            significant,
            _verdict(ratio, significant, better),
        )
    ratio = float(_ratio_of_medians(base, new))
    if np.array_equal(np.sort(base), np.sort(new)):
        # Identical samples: nothing to resample, and Mann-Whitney's answer is known (p = 1).
        return Change(
            base_value,
            new_value,
            ratio,
            1.0,
            1.0,
            1.0,
            "mann-whitney + bootstrap",
            False,
            _verdict(ratio, False, better),
        )
    from scipy import stats  # the `compare` extra; formatting and matching work without it

    p_value = float(stats.mannwhitneyu(base, new, alternative="two-sided").pvalue)
    interval = stats.bootstrap(
        (base, new),
        _ratio_of_medians,
        vectorized=True,
        n_resamples=settings.bootstrap_resamples,
        confidence_level=settings.confidence_level,
        method="percentile",
        rng=np.random.default_rng(settings.seed),
    ).confidence_interval
    low, high = float(interval.low), float(interval.high)
    excludes_one = low > 1.0 or high < 1.0
    significant = p_value < settings.alpha and excludes_one and abs(ratio - 1.0) * 100.0 >= settings.min_change_pct
    return Change(
        base_value,
        new_value,
        ratio,
        low,
        high,
        p_value,
        "mann-whitney + bootstrap",
        significant,
        _verdict(ratio, significant, better),
    )
