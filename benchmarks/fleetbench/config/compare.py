"""The `compare` section: how strict `fleetbench compare` is, and when it fails a CI job."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from fleetbench.catalogue import HEADLINES
from fleetbench.config.strict import StrictModel

Percent = Annotated[float, Field(gt=0, le=1000)]
__all__ = ["CompareConfig"]

HEADLINE_METRICS = frozenset(name for names in HEADLINES.values() for name in names)


class CompareConfig(StrictModel):
    """Significance test, effect size and the regression gate of `fleetbench compare`."""

    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="the test (Mann-Whitney U, or the signed-rank test on pairs) rejects below this p-value",
    )
    confidence_level: float = Field(
        default=0.95, gt=0.5, lt=1, description="of the Hodges-Lehmann interval (the test's own confidence set)"
    )
    min_change_pct: float = Field(
        default=1.0, ge=0, le=1000, description="smaller changes are no significant change, however certain"
    )
    single_value_threshold_pct: float = Field(
        default=5.0, ge=0, le=1000, description="figures without samples: a change beyond this counts"
    )
    correction: Literal["holm", "fdr_bh", "none"] = Field(
        default="holm",
        description="across the figures of one comparison: holm (family-wise error), fdr_bh (false discovery rate)",
    )
    noise_factor: float = Field(
        default=2.0,
        ge=0,
        le=100,
        description="k in the minimum change max(min_change_pct, k x noise x sqrt(2/n)) (fleetbench noise)",
    )
    process_summary: Literal["median", "best"] = Field(
        default="best",
        description="each process's figure in compare --rounds: its best sample (other work on a shared machine "
        "only slows a process down; README: 17/20 planted slow-downs caught against 3/20 by the median, the same "
        "0/20 false positives) or the median of its samples",
    )
    pair_rounds: bool = Field(
        default=False,
        description="compare --rounds: test each round's base and new process as a pair (Wilcoxon signed-rank "
        "on their log ratios), for machines whose speed drifts over minutes (a device heating up); off: "
        "Mann-Whitney U on the two sides, which caught as many planted slow-downs on a shared VM whose "
        "disturbances hit single processes (README)",
    )
    rounds: int = Field(
        default=20,
        ge=3,
        le=1000,
        description="processes per side of compare --rounds (--rounds N); 20 as pyperf's worker processes: on a "
        "shared 2-core VM the gate caught planted 10 % slow-downs in 20 of 20 trials at 20, in 50-85 % at 10 (README)",
    )
    bootstrap_resamples: int = Field(
        default=2000,
        ge=100,
        le=100_000,
        description="unused since the interval is Hodges-Lehmann's; older configs load",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="unused since the interval is Hodges-Lehmann's")
    unstable_spread_pct: float = Field(
        default=10.0,
        gt=0,
        le=1000,
        description="a figure whose per-process figures spread by more than this (1.4826 x MAD of their logs) "
        "on either side is unstable: no verdict (pyperf warns above 10 %)",
    )
    max_load_per_core: float = Field(
        default=1.0,
        gt=0,
        le=1000,
        description="a median load average above this x the cores during the processes (measured by "
        "compare --rounds, else kept in the records) makes every figure unstable (other work was waiting for the CPUs)",
    )
    max_steal_pct: float = Field(
        default=5.0,
        gt=0,
        le=100,
        description="above this median share of CPU time stolen during the processes: unstable",
    )
    fail_on_regression_pct: Percent | None = Field(
        default=None,
        description="exit 1 only when a figure is significantly worse by more than this (--fail-on-regression); "
        "unset: every figure judged worse fails the gate",
    )
    fail_thresholds_pct: dict[str, Percent] = Field(
        default_factory=dict, description="per headline metric, overriding fail_on_regression_pct"
    )

    @field_validator("fail_thresholds_pct")
    @classmethod
    def _headline_metrics(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - HEADLINE_METRICS)
        if unknown:
            raise ValueError(f"{unknown[0]} is not a headline metric; accepted: {', '.join(sorted(HEADLINE_METRICS))}")
        return value
