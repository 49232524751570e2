"""Is the difference between two sets of samples real? The test behind every verdict of `compare`.

Every effect is judged as a factor, on the log scale: a rate that halves and a time that doubles are
the same regression (a factor of 2: shown as -50.0 % and +100.0 %, sized 100 % against every bar).
What is compared are the samples' logs:

- **between processes** (`compare --rounds N`, baselines of several processes): one sample per
  process (its best sample, or with compare.process_summary=median its median). Mann-Whitney U,
  two-sided, on the logs (scipy.stats.mannwhitneyu, normal approximation with the tie correction and
  no continuity correction). The change is the Hodges-Lehmann estimate, exp(median of every
  log(new_j) - log(base_i)), and its interval is the test's own confidence set: the shifts of the
  logs that the same test does not reject at 1 - confidence_level (order statistics of those
  differences). So a test that rejects at alpha has an interval at 1 - alpha that leaves out 1, and
  the reverse: the interval never vetoes the test, nor the test the interval.
- **paired by round** (compare.pair_rounds=true): Wilcoxon's signed-rank test on the pairs' log
  ratios (normal approximation), the one-sample Hodges-Lehmann estimate (the median of the Walsh
  averages) and its matching confidence set.
- **within run** (a single pair of runs): the steps of one process each. Not independent, and blind
  to the run-to-run drift: `compare` shows these figures but judges them only against a noise floor
  calibrated for the machine class (`compare/noise.py`); otherwise "not enough independent samples".

The verdict is one rule: a figure is better or worse when its test rejects at alpha after the
correction across the comparison's figures (Holm by default) and its estimated factor is at least
the figure's minimum change. Fewer than 3 samples a side: no verdict, and the row says why.

Samples are scaled by their largest magnitude before any arithmetic, so figures near the float limits
never overflow (no numpy RuntimeWarning); a change that is itself out of range is a ValueError.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import numpy as np

from fleetbench.catalogue import Better

if TYPE_CHECKING:
    from fleetbench.config.compare import CompareConfig

NOT_ENOUGH: Final = "not enough independent samples to judge"
UNSTABLE: Final = "unstable"
Verdict = Literal[
    "better", "worse", "no significant change", "no direction", "not enough independent samples to judge", "unstable"
]
Scope = Literal["within run", "between processes"]
Correction = Literal["holm", "fdr_bh", "none"]
Summary = Literal["median", "best"]
SAMPLE_METHOD = "mann-whitney on logs + hodges-lehmann"
PAIRED_METHOD = "paired by round: wilcoxon signed-rank on log ratios + hodges-lehmann"
SINGLE = "single value"

# Fewer independent samples than this on a side: no verdict (the test has no power, and nothing else judges).
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
    correction: Correction = "holm"
    scope: Scope = "within run"
    process_summary: Summary = "best"
    paired: bool = False  # the samples are processes paired by round: base[i] ran beside new[i]


def settings_from(cfg: CompareConfig) -> TestSettings:
    """The test settings of a `compare` config section (compare and report --compare read the same section)."""
    return TestSettings(
        cfg.alpha, cfg.confidence_level, cfg.min_change_pct, cfg.single_value_threshold_pct, cfg.correction,
        process_summary=cfg.process_summary, paired=cfg.pair_rounds,
    )  # fmt: skip


def factor_pct(ratio: float) -> float:
    """The size of a change as a factor, whichever way it goes: (exp(|ln ratio|) - 1) x 100.

    0.5 and 2.0 are both 100 %: the same change to a rate and to a time."""
    if not (math.isfinite(ratio) and ratio > 0):
        return math.inf
    return (math.exp(abs(math.log(ratio))) - 1.0) * 100.0


@dataclass(frozen=True)
class Change:
    """The comparison of one figure: values, relative change with its interval, test and verdict."""

    base: float
    new: float
    ratio: float  # new / base: the Hodges-Lehmann estimate of tested figures, the values' ratio otherwise
    ci_low: float | None  # confidence interval of the ratio; None where nothing was tested
    ci_high: float | None
    p_value: float | None  # the test's own p-value
    method: str  # "within run: mann-whitney on logs + hodges-lehmann", "single value", ...
    significant: bool
    verdict: Verdict
    min_change_pct: float = 1.0  # the smallest factor (in %) this figure could be called better or worse by
    p_adjusted: float | None = None  # p after the correction across the comparison's figures
    why: str = ""  # why there is no verdict (too few independent samples, unstable), when there is none

    @property
    def change_pct(self) -> float:
        """(new - base) / base in percent (the display; judged by `factor_pct`)."""
        return (self.ratio - 1.0) * 100.0

    @property
    def factor_pct(self) -> float:
        """The change's size as a factor, in percent: what the minimum change and the gate's bars compare with."""
        return factor_pct(self.ratio)

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


def without_verdict(change: Change, why: str, verdict: Verdict = NOT_ENOUGH) -> Change:
    """The figures and the interval stay; the verdict says why there is none (never significant)."""
    return dataclasses.replace(change, significant=False, verdict=verdict, why=why)


def single(base_value: float, new_value: float, better: Better | None, threshold_pct: float) -> Change:
    """One value a side judged against a calibrated noise floor alone: worse or better beyond it as a factor."""
    ratio = _ratio(base_value, new_value)
    significant = factor_pct(ratio) >= threshold_pct
    return Change(base_value, new_value, ratio, None, None, None, SINGLE, significant,
                  _verdict(ratio, significant, better), threshold_pct)  # fmt: skip


def judge(change: Change, p: float | None, better: Better | None, settings: TestSettings) -> Change:
    """The one rule: p (adjusted) below alpha and the estimated factor at least the minimum change."""
    if change.method == SINGLE or change.why:
        return change
    significant = p is not None and p < settings.alpha and change.factor_pct >= change.min_change_pct
    return dataclasses.replace(change, significant=significant, verdict=_verdict(change.ratio, significant, better))


def _z(confidence_level: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(0.5 + confidence_level / 2.0))


def hodges_lehmann(base_logs: np.ndarray, new_logs: np.ndarray, confidence_level: float) -> tuple[float, float, float]:
    """The shift of new's logs over base's (median of every pairwise difference) and the Mann-Whitney
    confidence set of it: the shifts the normal-approximation test with tie correction does not reject."""
    m, n = len(base_logs), len(new_logs)
    diffs = np.sort(np.subtract.outer(new_logs, base_logs).ravel())
    everything = np.concatenate([base_logs, new_logs])
    _, ties = np.unique(everything, return_counts=True)
    total = m + n
    variance = m * n / 12.0 * ((total + 1) - float(np.sum(ties**3 - ties)) / (total * (total - 1)))
    # U(shift) counts the differences above the shift; it is accepted within mn/2 +- z sigma
    k = math.ceil(m * n / 2.0 - _z(confidence_level) * math.sqrt(max(variance, 0.0)))
    k = max(k, 1)
    low = float(diffs[k - 1]) if k <= len(diffs) else -math.inf
    high = float(diffs[len(diffs) - k]) if k <= len(diffs) else math.inf
    if k > len(diffs) // 2 + 1:  # a degenerate set (every sample tied): the estimate alone
        low = high = float(np.median(diffs))
    return float(np.median(diffs)), min(low, high), max(low, high)


def walsh_hodges_lehmann(log_ratios: np.ndarray, confidence_level: float) -> tuple[float, float, float]:
    """The one-sample Hodges-Lehmann estimate of paired log ratios and the signed-rank confidence set."""
    n = len(log_ratios)
    i, j = np.triu_indices(n)
    walsh = np.sort((log_ratios[i] + log_ratios[j]) / 2.0)
    count = len(walsh)
    sigma = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    k = max(1, math.ceil(count / 2.0 - _z(confidence_level) * sigma))
    if k > count // 2 + 1:
        centre = float(np.median(walsh))
        return centre, centre, centre
    return float(np.median(walsh)), float(walsh[k - 1]), float(walsh[count - k])


def compare_samples(
    base_value: float,
    new_value: float,
    base_samples: Sequence[float],
    new_samples: Sequence[float],
    better: Better | None,
    settings: TestSettings | None = None,
) -> Change:
    """Compare one figure of two runs on the logs of its samples (the verdict on the test's own p-value;
    `adjust` re-judges a comparison's figures together). Fewer than MIN_SAMPLES a side, or a sample
    that is zero: no verdict, said why. Raises ValueError for a sample that is not finite or a change
    out of the float range.
    """
    settings = settings or TestSettings()
    with np.errstate(all="raise"):
        try:
            return _compare(base_value, new_value, base_samples, new_samples, better, settings)
        except FloatingPointError as exc:
            raise ValueError(f"the change is out of range ({exc})") from None


def too_few(base_count: int, new_count: int, scope: Scope) -> str:
    """Why fewer than MIN_SAMPLES independent samples a side give no verdict, and what gives one."""
    what = "processes" if scope == "between processes" else "samples"
    return (
        f"{base_count}+{new_count} {what}: at least {MIN_SAMPLES} independent samples a side are needed "
        f"(compare --rounds {MIN_SAMPLES} or more)"
    )


def _compare(
    base_value: float,
    new_value: float,
    base_samples: Sequence[float],
    new_samples: Sequence[float],
    better: Better | None,
    settings: TestSettings,
) -> Change:
    base, new = _scaled(base_samples, new_samples)
    plain = _ratio(base_value, new_value)
    method = f"{settings.scope}: {SAMPLE_METHOD}"
    shown = Change(base_value, new_value, plain, None, None, None, method, False, "no significant change",
                   settings.min_change_pct)  # fmt: skip
    if len(base) < MIN_SAMPLES or len(new) < MIN_SAMPLES:
        return without_verdict(dataclasses.replace(shown, method=SINGLE if min(len(base), len(new)) <= 1 else method),
                               too_few(len(base), len(new), settings.scope))  # fmt: skip
    if not ((base > 0).all() and (new > 0).all()):
        return without_verdict(shown, "a sample is zero: a factor of it is not defined")
    base_logs, new_logs = np.log(base), np.log(new)
    if settings.paired and len(base) == len(new):
        return _compare_pairs(shown, new_logs - base_logs, better, settings)
    from scipy import stats

    shift, low, high = hodges_lehmann(base_logs, new_logs, settings.confidence_level)
    ratio = math.exp(shift)
    if not math.isfinite(ratio):
        raise ValueError(f"the change is out of range (ratio {ratio})")
    if np.array_equal(np.sort(base_logs), np.sort(new_logs)) or np.ptp(np.concatenate([base_logs, new_logs])) == 0:
        p_value = 1.0  # identical samples: Mann-Whitney's answer is known
    else:
        p_value = float(
            stats.mannwhitneyu(new_logs, base_logs, alternative="two-sided", method="asymptotic", use_continuity=False)
            .pvalue
        )  # fmt: skip
    change = dataclasses.replace(shown, ratio=ratio, ci_low=math.exp(low), ci_high=math.exp(high), p_value=p_value)
    return judge(change, p_value, better, settings)


def _compare_pairs(shown: Change, log_ratios: np.ndarray, better: Better | None, settings: TestSettings) -> Change:
    """Processes paired by round: Wilcoxon signed-rank on the log ratios, the Walsh-average estimate."""
    from scipy import stats

    method = f"{settings.scope}, {PAIRED_METHOD}"
    centre, low, high = walsh_hodges_lehmann(log_ratios, settings.confidence_level)
    if not log_ratios.any():  # every pair equal: nothing to rank (p = 1)
        p_value = 1.0
    else:
        p_value = float(stats.wilcoxon(log_ratios, alternative="two-sided", method="approx", correction=False).pvalue)
    change = dataclasses.replace(shown, ratio=math.exp(centre), ci_low=math.exp(low), ci_high=math.exp(high),
                                 p_value=p_value, method=method)  # fmt: skip
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
    """Every tested figure of one comparison re-judged on its corrected p-value (the others unchanged)."""
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
    logs = []
    for change, better in changes:
        if better is None or not (math.isfinite(change.ratio) and change.ratio > 0):
            continue
        logs.append(math.log(change.ratio) if better == "higher" else -math.log(change.ratio))
    if not logs:
        return None
    return float(math.exp(sum(logs) / len(logs))), len(logs)
