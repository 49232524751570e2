"""What one edge measurement is: a kernel's row (latencies, errors, rates) and a model's summary."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fleetbench.edge.pte import ModelTiming
from fleetbench.edge.stability import Stability, supported_percentile
from fleetbench.edge.timing import coefficient_of_variation, trimmed_mean

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))


@dataclass
class KernelRow:
    """One kernel at one dtype and size: correctness, latency statistics (seconds), rates and the raw samples."""

    kernel: str
    lang: str
    dtype: str
    size: str
    timing: str
    correct: bool
    max_abs_error: float
    max_rel_error: float
    tolerance: float
    flops: float = 0.0
    bytes_moved: float = 0.0
    p50_s: float = math.nan
    p90_s: float = math.nan
    p99_s: float = math.nan
    mean_s: float = math.nan
    min_s: float = math.nan
    variation: float = math.nan  # CV of the tries' medians
    stable: bool = False
    cv_target: float = math.nan
    verdict: str = ""  # stable, unstable or single sample (fleetbench.edge.stability); "" when untimed
    tries: int = 0
    dispatches: int = 0
    flop_per_second: float = 0.0
    bytes_per_second: float = 0.0
    peak_ratio: float | None = None
    peak_ratio_refused: str | None = None  # why a GEMM/peak ratio was not published (e.g. above 1)
    sizing: dict[str, Any] | None = None  # the peak probe's sizing (fleetbench.edge.peak_sizing)
    # Thermal state around the tries (fleetbench.edge.discipline): hottest sensor before and after,
    # throttling seen (None: no throttle indicator could be read), the cooldown before the kernel.
    celsius_before: float | None = None
    celsius_after: float | None = None
    throttled: bool | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    cooldown_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    thermal: dict[str, Any] = field(default_factory=dict)  # both full states: edge_results.json only
    try_medians_s: list[float] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)

    CSV_FIELDS = (
        "kernel",
        "lang",
        "dtype",
        "size",
        "timing",
        "correct",
        "max_abs_error",
        "max_rel_error",
        "tolerance",
        "p50_s",
        "p90_s",
        "p99_s",
        "mean_s",
        "min_s",
        "variation",
        "stable",
        "verdict",
        "tries",
        "dispatches",
        "flop_per_second",
        "bytes_per_second",
        "peak_ratio",
        "celsius_before",
        "celsius_after",
        "throttled",
        "cooldown_s",
    )

    def summary(self) -> dict[str, Any]:
        """Everything but the raw latencies and full thermal states (those go to edge_results.json only)."""
        data = asdict(self)
        data.pop("latencies_s")
        data.pop("thermal")
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def model_summary(t: ModelTiming, trim_ratio: float, cv_target: float) -> dict[str, Any]:
    """A model path's figures for the record and the table: load, mean, trimmed mean, the percentiles its
    iterations support (seconds; None where too few) and the iterations' stability against `cv_target`."""
    out: dict[str, Any] = {
        "runtime": t.runtime,
        "model": t.model,
        "load_s": t.load_s,
        "iterations": len(t.latencies),
        "mean_s": sum(t.latencies) / len(t.latencies),
        "trimmed_mean_s": trimmed_mean(t.latencies, trim_ratio),
        "trim_ratio": trim_ratio,
        "max_abs_error": t.max_abs_error,
        "max_rel_error": t.max_rel_error,
        "agrees": t.agrees,
        "note": t.note,
        "memory_bytes": t.memory,
    }
    for name, q in PERCENTILES:
        value = supported_percentile(t.latencies, q)
        out[f"{name}_s"] = value if math.isfinite(value) else None
    out["stability"] = Stability(len(t.latencies), coefficient_of_variation(t.latencies), cv_target).as_dict()
    return out
