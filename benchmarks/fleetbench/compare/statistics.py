"""Is the difference between two sets of samples real? The test behind every verdict of `compare`.

A figure with samples on both sides is tested with Mann-Whitney U (two-sided, no assumption of
normality; scipy.stats.mannwhitneyu) and its change is the ratio of medians, new / base, with a
percentile bootstrap confidence interval (scipy.stats.bootstrap). What the samples are decides what
the test can see, and every row says which it used (`scope`):

- **between processes** (`compare --rounds N`): one sample per process, that process's best sample
  (or, with compare.process_summary=median, the median of its samples). Independent, and the
  run-to-run variance is inside the test, as with pyperf's worker processes and asv's interleaved rounds.
- **between processes, paired by round** (`compare --rounds N` with compare.pair_rounds=true): the
  same per-process figures, but each round's base and new process, run one after the other, are a
  pair. The test is Wilcoxon's signed-rank test on the pairs' log ratios (scipy.stats.wilcoxon) and
  the change is the exponential of their median, with a bootstrap interval over the pairs: what
  slowed the machine for a whole round (a device heating up, a frequency step) slows both of its
  processes and drops out of the ratio. Off by default: where disturbances hit single processes it
  caught no more (README, "How far the gate can be trusted").
- **within run** (a single pair of runs): the steps (timed blocks, tries) of one process each. Not
  independent, and blind to the run-to-run drift that dominates on shared machines, so its minimum
  change has to carry that drift (see `min_change_pct` in `compare/noise.py`).

The change is significant when the test rejects at `alpha` (after the correction for testing many
figures of one comparison at once, `adjust`), the interval excludes 1, and the change is at least the
figure's minimum change: a real but negligible shift is no significant change, as in pyperf. A
figure with a single value on either side cannot be tested: it is judged against
`single_value_threshold_pct` alone, and says so.

Samples are scaled by their largest magnitude before any arithmetic, so figures near the float limits
never overflow (no numpy RuntimeWarning); a change that is itself out of range is a ValueError.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fleetbench.catalogue import Better

if TYPE_CHECKING:
    from fleetbench.config.compare import CompareConfig

Verdict = Literal["better", "worse", "no significant change", "no direction"]
Scope = Literal["within run", "between processes"]
Correction = Literal["holm", "fdr_bh", "none"]
Summary = Literal["median", "best"]
SAMPLE_METHOD = "mann-whitney + bootstrap"
PAIRED_METHOD = "paired by round: wilcoxon signed-rank + bootstrap"
SINGLE = "single value"

# Fewer samples than this on a side and the test has no power; the threshold decides instead.
MIN_SAMPLES = 3

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TestSettings:
    """How strict the comparison is (the `compare` config section), and what its samples are."""

    __test__ = False  # its name starts with Test: pytest must not collect it from a test's imports

    alpha: float = 0.05
    confidence_level: float = 0.95
    min_change_pct: float = 1.0
    single_value_threshold_pct: float = 5.0
    bootstrap_resamples: int = 2000
    seed: int = 0
    correction: Correction = "holm"
    scope: Scope = "within run"
    process_summary: Summary = "best"
    paired: bool = False  # the samples are processes paired by round: base[i] ran beside new[i]


def settings_from(cfg: CompareConfig) -> TestSettings:
    """The test settings of a `compare` config section (compare and report --compare read the same section)."""
    return TestSettings(
        cfg.alpha, cfg.confidence_level, cfg.min_change_pct, cfg.single_value_threshold_pct,
        cfg.bootstrap_resamples, cfg.seed, cfg.correction, process_summary=cfg.process_summary,
        paired=cfg.pair_rounds,
    )  # fmt: skip


@dataclass(frozen=True)
class Change:
    """The comparison of one figure: values, relative change with its interval, test and verdict."""

    base: float
    new: float
    ratio: float  # new / base (medians of the samples when both sides have them)
    ci_low: float | None  # confidence interval of the ratio; None for single values
    ci_high: float | None
    p_value: float | None  # the test's own p-value
    method: str  # "within run: mann-whitney + bootstrap", "between processes: ...", "single value"
    significant: bool
    verdict: Verdict
    min_change_pct: float = 1.0  # the smallest change this figure could be called better or worse by
    p_adjusted: float | None = None  # p after the correction across the comparison's figures

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

    @property
    def excludes_one(self) -> bool:
        """Whether the interval leaves out "no change"."""
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 1.0 or self.ci_high < 1.0)


def _ratio_of_medians(base: np.ndarray, new: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(new, axis=axis) / np.median(base, axis=axis))


def _median(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(values, axis=axis))


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


def _scaled(base: Sequence[float], new: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Both sides divided by their largest magnitude: ratios are unchanged, sums cannot overflow."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a sample is not a finite number")
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)))
    return (a / scale, b / scale) if scale > 0 else (a, b)


def _single(base_value: float, new_value: float, better: Better | None, settings: TestSettings) -> Change:
    ratio = _ratio(base_value, new_value)
    significant = abs(ratio - 1.0) * 100.0 >= settings.single_value_threshold_pct
    verdict = _verdict(ratio, significant, better)
    return Change(base_value, new_value, ratio, None, None, None, SINGLE, significant, verdict,
                  settings.single_value_threshold_pct)  # fmt: skip


def judge(change: Change, p: float | None, better: Better | None, settings: TestSettings) -> Change:
    """The verdict of a tested figure from p (raw or adjusted), its interval and its minimum change."""
    if change.method == SINGLE:
        return change
    big_enough = abs(change.ratio - 1.0) * 100.0 >= change.min_change_pct
    significant = p is not None and p < settings.alpha and change.excludes_one and big_enough
    return dataclasses.replace(change, significant=significant, verdict=_verdict(change.ratio, significant, better))


def _interval(base: np.ndarray, new: np.ndarray, settings: TestSettings) -> tuple[float, float]:
    """The bootstrap interval of the ratio of medians (percentile method, seeded)."""
    return _bootstrap((base, new), _ratio_of_medians, settings)


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Any, settings: TestSettings) -> tuple[float, float]:
    """A percentile bootstrap interval of `statistic` over `data` (seeded: the same runs, the same interval)."""
    from scipy import stats  # the `compare` extra; formatting and matching work without it

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interval = stats.bootstrap(
            data,
            statistic,
            vectorized=True,
            n_resamples=settings.bootstrap_resamples,
            confidence_level=settings.confidence_level,
            method="percentile",
            rng=np.random.default_rng(settings.seed),
        ).confidence_interval
    for warning in caught:  # a degenerate resampling (every sample equal) is a fact, not a fault
        log.debug("bootstrap: %s", warning.message)
    return float(interval.low), float(interval.high)


def compare_samples(
    base_value: float,
    new_value: float,
    base_samples: Sequence[float],
    new_samples: Sequence[float],
    better: Better | None,
    settings: TestSettings | None = None,
) -> Change:
    """Compare one figure of two runs: tested on the samples when both have enough, else by threshold.

    The verdict here uses the test's own p-value; `adjust` re-judges a comparison's figures together.
    Raises ValueError for a sample that is not finite or a change out of the float range.
    """
    settings = settings or TestSettings()
    with np.errstate(all="raise"):
        try:
            return _compare(base_value, new_value, base_samples, new_samples, better, settings)
        except FloatingPointError as exc:
            raise ValueError(f"the change is out of range ({exc})") from None


def _compare(
    base_value: float,
    new_value: float,
    base_samples: Sequence[float],
    new_samples: Sequence[float],
    better: Better | None,
    settings: TestSettings,
) -> Change:
    base, new = _scaled(base_samples, new_samples)
    if len(base) < MIN_SAMPLES or len(new) < MIN_SAMPLES or np.median(base) == 0:
        return _single(base_value, new_value, better, settings)
    ratio = float(_ratio_of_medians(base, new))
    if not math.isfinite(ratio):
        raise ValueError(f"the change is out of range (ratio {ratio})")
    if settings.paired and len(base) == len(new) and (base > 0).all() and (new > 0).all():
        return _compare_pairs(base_value, new_value, base, new, better, settings)
    method = f"{settings.scope}: {SAMPLE_METHOD}"
    if np.array_equal(np.sort(base), np.sort(new)):
        # Identical samples: nothing to resample, and Mann-Whitney's answer is known (p = 1).
        return Change(base_value, new_value, ratio, 1.0, 1.0, 1.0, method, False,
                      _verdict(ratio, False, better), settings.min_change_pct)  # fmt: skip
    from scipy import stats

    p_value = float(stats.mannwhitneyu(base, new, alternative="two-sided").pvalue)
    low, high = _interval(base, new, settings)
    change = Change(base_value, new_value, ratio, low, high, p_value, method, False, "no significant change",
                    settings.min_change_pct)  # fmt: skip
    return judge(change, p_value, better, settings)


def _compare_pairs(
    base_value: float,
    new_value: float,
    base: np.ndarray,
    new: np.ndarray,
    better: Better | None,
    settings: TestSettings,
) -> Change:
    """Processes paired by round: Wilcoxon signed-rank on the log ratios, the change their median's exponential."""
    from scipy import stats

    log_ratios = np.log(new) - np.log(base)
    ratio = float(np.exp(np.median(log_ratios)))
    method = f"{settings.scope}, {PAIRED_METHOD}"
    if not log_ratios.any():  # every pair equal: nothing to rank or resample (p = 1)
        return Change(base_value, new_value, ratio, 1.0, 1.0, 1.0, method, False,
                      _verdict(ratio, False, better), settings.min_change_pct)  # fmt: skip
    p_value = float(stats.wilcoxon(log_ratios, alternative="two-sided").pvalue)
    low, high = _bootstrap((log_ratios,), _median, settings)
    change = Change(base_value, new_value, ratio, math.exp(low), math.exp(high), p_value, method, False,
                    "no significant change", settings.min_change_pct)  # fmt: skip
    return judge(change, p_value, better, settings)


def summarise(samples: Sequence[float], better: Better | None, how: Summary) -> float:
    """One process's figure from its samples: their median, or with `best` the best of them (the highest
    where higher is better, the lowest where lower is; the median for figures without a direction).

    The best sample is what a shared machine leaves least disturbed (other work only ever slows a
    process down, as timeit's documentation argues); the median is what asv and pyperf summarise by.
    Scaled first, so values near the float limit never overflow.
    """
    data = np.asarray(samples, dtype=float)
    scale = float(np.max(np.abs(data))) or 1.0
    if how == "best" and better is not None:
        return float(np.max(data) if better == "higher" else np.min(data))
    return float(np.median(data / scale)) * scale


def adjusted_p_values(p_values: Sequence[float], correction: Correction, alpha: float) -> list[float]:
    """p-values corrected for testing them together: Holm (family-wise) or Benjamini-Hochberg (false
    discovery rate), by statsmodels' multipletests; unchanged with `none` or a single test."""
    if correction == "none" or len(p_values) < 2:
        return list(p_values)
    from statsmodels.stats.multitest import multipletests

    corrected = multipletests(list(p_values), alpha=alpha, method=correction)[1]
    return [float(p) for p in corrected]


def adjust(changes: Sequence[tuple[Change, Better | None]], settings: TestSettings) -> list[Change]:
    """Every tested figure of one comparison re-judged on its corrected p-value (single values unchanged)."""
    tested = [i for i, (change, _) in enumerate(changes) if change.p_value is not None]
    corrected = adjusted_p_values([changes[i][0].p_value or 0.0 for i in tested], settings.correction, settings.alpha)
    out = [change for change, _ in changes]
    for i, p in zip(tested, corrected, strict=True):
        change, better = changes[i]
        out[i] = judge(dataclasses.replace(change, p_adjusted=p), p, better, settings)
    return out


def geometric_mean_speed(changes: Sequence[tuple[Change, Better | None]]) -> tuple[float, int] | None:
    """pyperf's summary line: the geometric mean of the figures' changes, each turned so that above 1 is
    better (new / base where higher is better, base / new where lower is); with how many figures."""
    speeds = []
    for change, better in changes:
        if better is None or not (math.isfinite(change.ratio) and change.ratio > 0):
            continue
        speeds.append(change.ratio if better == "higher" else 1.0 / change.ratio)
    if not speeds:
        return None
    return float(math.exp(sum(math.log(s) for s in speeds) / len(speeds))), len(speeds)
