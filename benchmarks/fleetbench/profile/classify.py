"""Which unit limits a kernel, and the main fix, from its compute and memory utilisation (0-1).

The rule of thumb of the product brief, on Nsight Compute's speed-of-light figures (or, for the
analytical roofline, achieved FLOP/s and bytes/s over the measured peaks):

  cache_resident memory above 100 % of the measured DRAM roof: the data come from caches (small
                 tensors re-read while still in L1/L2/LLC), so DRAM bandwidth is not the limit
  memory_bound   compute < 25 % and memory > 75 %: tensor cores idle, the HBM bus saturated
                 (LayerNorm, Softmax, decode attention)
  compute_bound  compute > 75 % and memory < 50 %: near peak FLOP/s (large-batch GEMM, prefill)
  latency_bound  both below 60 % (Nsight Compute's own latency threshold): neither unit is busy,
                 the kernel is under-utilised (too little parallel work, launch overhead, stalls)
  balanced       everything else: both units carry real load, or one leads without saturating
  unknown        a figure is absent from the data; never guessed as zero
  not_measured   Nsight Compute returned NaN for the kernel (its replay failed): no figure to judge,
                 and it is left out of every aggregate and chart

An op with tensor bytes but no FLOPs (copies, fills, index ops) is memory traffic, classed by its
bytes alone (`classify_traffic`): cache_resident above the DRAM roof, memory_bound above the
memory-bound threshold (75 %), else latency_bound.

Thresholds are configurable (`profile.thresholds.*`); the class names are fixed (a bounded label).
The DRAM roof is the roof itself (100 %), not a tunable threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:  # an annotation only: the ncu summary path loads no pydantic
    from pydantic import BaseModel


class ThresholdSettings(Protocol):
    """Anything with a `thresholds` model, as the profile config section has."""

    @property
    def thresholds(self) -> BaseModel:
        """The `profile.thresholds` model, whose fields are those of `Thresholds`."""


CLASSES: Final = (
    "memory_bound",
    "compute_bound",
    "balanced",
    "latency_bound",
    "cache_resident",
    "unknown",
    "not_measured",
)

# Achieved bytes/s over the measured DRAM bandwidth above which data must come from caches.
DRAM_ROOF: Final = 1.0

FIXES: Final[dict[str, str]] = {
    "memory_bound": "fuse kernels (Triton / torch.compile) to cut HBM traffic, quantise (FP8/INT4) "
    "to move fewer bytes, or raise the batch size so each byte is reused",
    "compute_bound": "lower precision (FP8/NVFP4) for more FLOP/s per cycle, align GEMM dimensions to "
    "tensor-core tiles (multiples of 64/128), or move to a bigger GPU",
    "balanced": "both units carry load: cut work and traffic together (fusion with torch.compile, "
    "lower precision), then look at the leading unit in ncu's workload-analysis sections",
    "latency_bound": "neither unit is busy: give every SM work (larger batch or grid, more waves), "
    "fuse small kernels or use CUDA graphs against launch overhead, check occupancy "
    "and warp stalls",
    "cache_resident": "its data come from caches, faster than DRAM: the op is small, so fuse it with its "
    "neighbours (torch.compile) to keep intermediates on chip and drop the per-op overhead, or give each "
    "call more work; judge it against the cache bandwidth (a smaller profile.peak_copy_mib), not DRAM's",
    "unknown": "collect the missing figures: ncu --set full (or at least --section SpeedOfLight)",
    "not_measured": "ncu could not replay this kernel: profile it alone (ncu -k <name> -c 1), try "
    "--replay-mode application (kernels that change their own inputs) and read ncu's ==ERROR== lines",
}

# The same fixes in a few words, for tables; the record keeps the full sentence.
FIXES_SHORT: Final[dict[str, str]] = {
    "memory_bound": "fuse (Triton/torch.compile), FP8/INT4, bigger batch",
    "compute_bound": "FP8/NVFP4, dims multiple of 64/128, bigger GPU",
    "balanced": "fuse + lower precision; see ncu workload analysis",
    "latency_bound": "more parallel work, fuse or CUDA graphs, occupancy",
    "cache_resident": "fuse with neighbours (torch.compile), more work per call",
    "unknown": "collect the figures: ncu --set full",
    "not_measured": "replay failed: ncu -k <name> alone, --replay-mode application",
}


@dataclass(frozen=True)
class Thresholds:
    """The class boundaries, as utilisations in 0-1 (see the module docstring for the rules)."""

    memory_bound_compute_below: float = 0.25
    memory_bound_memory_above: float = 0.75
    compute_bound_compute_above: float = 0.75
    compute_bound_memory_below: float = 0.50
    latency_bound_below: float = 0.60


@dataclass(frozen=True)
class Classification:
    """A verdict: the class, the figures that led to it, and the main fix for that class."""

    cls: str
    reason: str
    fix: str


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def classify(
    compute: float | None,
    memory: float | None,
    thresholds: Thresholds | None = None,
    compute_name: str = "compute",
    memory_name: str = "memory",
) -> Classification:
    """Classify one kernel or op from utilisations in 0-1 (None: the figure is absent)."""
    t = thresholds or Thresholds()
    missing = [name for name, value in ((compute_name, compute), (memory_name, memory)) if value is None]
    if compute is None or memory is None:
        return Classification("unknown", f"{' and '.join(missing)} absent", FIXES["unknown"])
    both = f"{compute_name} {_pct(compute)}, {memory_name} {_pct(memory)}"
    if memory > DRAM_ROOF:
        return Classification(
            "cache_resident", f"{both}: above the DRAM roof, data from caches", FIXES["cache_resident"]
        )
    if compute < t.memory_bound_compute_below and memory > t.memory_bound_memory_above:
        cls = "memory_bound"
    elif compute > t.compute_bound_compute_above and memory < t.compute_bound_memory_below:
        cls = "compute_bound"
    elif compute < t.latency_bound_below and memory < t.latency_bound_below:
        cls = "latency_bound"
    else:
        cls = "balanced"
        leader = compute_name if compute >= memory else memory_name
        both += f" ({leader} leads)"
    return Classification(cls, both, FIXES[cls])


def classify_traffic(
    memory: float | None, thresholds: Thresholds | None = None, memory_name: str = "memory"
) -> Classification:
    """Classify an op that moves bytes but has no FLOP count, by its memory utilisation alone."""
    t = thresholds or Thresholds()
    if memory is None:
        return Classification("unknown", f"no FLOP count and {memory_name} absent", FIXES["unknown"])
    said = f"no FLOPs counted (memory traffic), {memory_name} {_pct(memory)}"
    if memory > DRAM_ROOF:
        cls, said = "cache_resident", f"{said}: above the DRAM roof, data from caches"
    elif memory > t.memory_bound_memory_above:
        cls = "memory_bound"
    else:
        cls = "latency_bound"
    return Classification(cls, said, FIXES[cls])


def not_measured(names: list[str]) -> Classification:
    """The verdict on a kernel Nsight Compute returned NaN for (`names`: the figures that were NaN)."""
    return Classification(
        "not_measured",
        f"ncu returned NaN for {', '.join(names)}: the kernel was not measured (its replay failed)",
        FIXES["not_measured"],
    )


def thresholds_of(settings: ThresholdSettings) -> Thresholds:
    """The class boundaries a profile config section sets (`profile.thresholds.*`)."""
    return Thresholds(**settings.thresholds.model_dump())
