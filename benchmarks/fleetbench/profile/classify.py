"""Which unit limits a kernel, which memory level, and the main fix, from compute and memory utilisation (0-1).

One rule for every class, NVIDIA's own: the SOLBottleneck rule Nsight Compute runs on every profiled
kernel (the Python rule in ncu's `sections/` folder whose get_identifier() is "SOLBottleneck", section
"SpeedOfLight", "High-level bottleneck detection"; the 2023 and 2025 versions agree), on the same two
figures, compute SOL (`sm__throughput`) and memory SOL (`gpu__compute_memory_throughput`), both
`.avg.pct_of_peak_sustained_elapsed`, or achieved FLOP/s and bytes/s over the peaks for the
analytical roofline. Its thresholds (no_bound_threshold 80, latency_bound_threshold 60,
balanced_threshold 10) are the defaults here:

  high throughput   a unit at or above 80 % of its peak ("High Throughput": "utilizing greater than
                    80.0% of the available compute or memory performance"): the more utilized unit
                    is the bound, whatever the other one does, so a kernel at 91 % memory and 50 %
                    compute is memory_bound (NVIDIA's tie goes to compute, as its rule's does)
  latency_bound     both below 60 % ("Latency Issue", "Small Grid": "below 60.0% of peak typically
                    indicate latency issues"): neither unit is busy, the kernel is under-utilised
                    (too little parallel work, launch overhead, stalls)
  leads by 10       in between, a unit 10 points or more above the other ("High Compute
                    Throughput" / "High Memory Throughput": "X is more heavily utilized than Y"):
                    compute_bound or memory_bound
  balanced          in between and within 10 points ("Balanced Throughput": "Compute and Memory are
                    well-balanced"): both units carry real load and neither is near its peak
  cache_resident    memory above 100 % of the measured DRAM roof (analytical roofline only: small
                    tensors re-read while still in L1/L2/LLC), so DRAM bandwidth is not the limit
  unknown           a figure is absent from the data; never guessed as zero
  not_measured      Nsight Compute returned NaN for the kernel (its replay failed): no figure to judge,
                    and it is left out of every aggregate and chart

The rule of thumb of the product brief explains the extremes, which the rule above classes the same:
compute < 25 % with memory > 75 % is memory_bound (tensor cores idle, the HBM bus saturated:
LayerNorm, Softmax, decode attention); compute > 75 % with memory < 50 % is compute_bound (near
peak FLOP/s: large-batch GEMM, prefill); both below 60 % is latency_bound. What the brief's table
called `balanced` beyond those (a kernel at 80-91 % memory and 29-50 % compute) is memory_bound here,
as it is for NVIDIA.

The memory level: a memory-side class names the level that limits it (`level`: L1 for L1/TEX and
shared memory, L2, DRAM), found by the summary from the report's breakdown of memory SOL
(NVIDIA's own choice of "the L1 / L2 / DRAM bottleneck"), else the speed-of-light section's L1/TEX,
L2 and DRAM throughputs, else NVIDIA's rule text; each level has its own fix (`level_fix`).

An op with tensor bytes but no FLOPs (copies, fills, index ops) is memory traffic, classed by its
bytes alone (`classify_traffic`), as the same rule classes it with no compute: cache_resident above
the DRAM roof, memory_bound from 60 % of the memory roof on, else latency_bound.

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
# The classes that make a claim about the kernel (the others say a figure was missing or not measured).
VERDICTS: Final = ("memory_bound", "compute_bound", "balanced", "latency_bound")

# Achieved bytes/s over the measured DRAM bandwidth above which data must come from caches.
DRAM_ROOF: Final = 1.0
# Comparisons at a threshold are made as NVIDIA's rule makes them, in percent points; this absorbs
# the float error of values divided by 100 (0.7 - 0.6 < 0.1 in binary floating point).
EPSILON: Final = 1e-9

FIXES: Final[dict[str, str]] = {
    "memory_bound": "fuse kernels (Triton / torch.compile) to cut HBM traffic, quantise (FP8/INT4) "
    "to move fewer bytes, or raise the batch size so each byte is reused",
    "compute_bound": "find the busiest unit (Nsight Compute's pipe utilisation names it) and cut redundant work; "
    "keep matmuls on the tensor cores (bf16/fp16) with dimensions multiples of the tiles (64/128); lower "
    "precision (FP8) only on GPUs with FP8 tensor cores (Ada, Hopper, Blackwell)",
    "balanced": "both units carry load: cut work and traffic together (fusion with torch.compile, "
    "lower precision), then look at the leading unit in ncu's workload-analysis sections",
    "latency_bound": "neither unit is busy: give every SM work (larger batch or grid, more waves), "
    "fuse small kernels or use CUDA graphs against launch overhead, check occupancy "
    "and warp stalls",
    "cache_resident": "its data come from caches, faster than DRAM: the op is small, so fuse it with its "
    "neighbours (torch.compile) to keep intermediates on chip and drop the per-op overhead, or give each "
    "call more work; judge it against the cache bandwidth (a smaller profile.peak_copy_mib), not DRAM's",
    "unknown": "collect the missing figures: ncu --section SpeedOfLight (or --set full)",
    "not_measured": "ncu could not replay this kernel: profile it alone (ncu -k <name> -c 1), try "
    "--replay-mode application (kernels that change their own inputs) and read ncu's ==ERROR== lines",
}

# The same fixes in a few words, for tables; the record keeps the full sentence.
FIXES_SHORT: Final[dict[str, str]] = {
    "memory_bound": "fuse (Triton/torch.compile), FP8/INT4, bigger batch",
    "compute_bound": "busiest pipe, cut redundant work, tensor cores",
    "balanced": "fuse + lower precision; see ncu workload analysis",
    "latency_bound": "more parallel work, fuse or CUDA graphs, occupancy",
    "cache_resident": "fuse with neighbours (torch.compile), more work per call",
    "unknown": "capture ncu --section SpeedOfLight",
    "not_measured": "replay failed: ncu -k <name> alone, --replay-mode application",
}

# The memory levels a memory-side verdict names, as NVIDIA's rule names them, and the fix that fits each.
LEVELS: Final = ("L1", "L2", "DRAM")
LEVEL_NAMES: Final[dict[str, str]] = {"L1": "L1/TEX and shared memory", "L2": "L2 cache", "DRAM": "DRAM (HBM/GDDR)"}
LEVEL_FIXES: Final[dict[str, str]] = {
    "DRAM": FIXES["memory_bound"],
    "L2": "the L2 cache's bandwidth is the limit, not DRAM: tile into shared memory so each SM reads its "
    "tile from L2 once, order blocks for L2 locality (swizzled rasterisation) and keep hot data resident "
    "(cudaAccessPolicyWindow persisting accesses), coalesce accesses that fetch more sectors than they use, "
    "and cut atomics to the same addresses",
    "L1": "L1/TEX or shared memory is the limit: remove shared-memory bank conflicts (pad or swizzle the "
    "shared arrays), coalesce global accesses (a warp's scattered loads multiply L1 wavefronts), use wider "
    "vector loads (float4, 128-bit LDS), keep reused values in registers, and cut local-memory spills",
}
LEVEL_FIXES_SHORT: Final[dict[str, str]] = {
    "DRAM": "DRAM: " + FIXES_SHORT["memory_bound"],
    "L2": "L2: shared-memory tiling, L2 locality/residency, coalescing",
    "L1": "L1/shared: bank conflicts, coalescing, wider loads, registers",
}


@dataclass(frozen=True)
class Thresholds:
    """The class boundaries, as utilisations in 0-1: NVIDIA's SOLBottleneck rule's (see the module docstring)."""

    high_throughput_at: float = 0.80  # the rule's no_bound_threshold (80)
    latency_bound_below: float = 0.60  # the rule's latency_bound_threshold (60)
    leads_by: float = 0.10  # the rule's balanced_threshold (10 points)

    def nvidias(self) -> bool:
        """Whether these are the thresholds NVIDIA's rule uses (its verdict and ours must then agree)."""
        return self == Thresholds()


@dataclass(frozen=True)
class Classification:
    """A verdict: the class, the figures that led to it, the main fix, and the memory level where one limits."""

    cls: str
    reason: str
    fix: str
    level: str | None = None  # L1, L2 or DRAM: the memory level behind a memory-side verdict
    fix_short: str | None = None  # the table's few words; FIXES_SHORT[cls] when None

    @property
    def short(self) -> str:
        """The fix in a few words."""
        return self.fix_short or FIXES_SHORT[self.cls]


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _at_least(value: float, threshold: float) -> bool:
    return value >= threshold - EPSILON


def bound_class(compute: float, memory: float, thresholds: Thresholds | None = None) -> tuple[str, str]:
    """The class of two utilisations (0-1) by NVIDIA's SOLBottleneck rule, and that rule's name for the case."""
    t = thresholds or Thresholds()
    leader = "compute_bound" if compute >= memory else "memory_bound"  # the rule's tie goes to compute
    if _at_least(compute, t.high_throughput_at) or _at_least(memory, t.high_throughput_at):
        return leader, "High Throughput"
    if not _at_least(compute, t.latency_bound_below) and not _at_least(memory, t.latency_bound_below):
        return "latency_bound", "Latency Issue"
    if _at_least(abs(compute - memory), t.leads_by):
        return leader, "High Compute Throughput" if leader == "compute_bound" else "High Memory Throughput"
    return "balanced", "Balanced Throughput"


def with_level(verdict: Classification, level: str | None, where: str = "") -> Classification:
    """A memory_bound or balanced verdict naming the memory level behind it (`where`: the figure that shows it),
    with that level's fix; any other verdict as it is."""
    if level not in LEVEL_FIXES or verdict.cls not in ("memory_bound", "balanced"):
        return verdict
    said = f"{verdict.reason}; limiting memory level {LEVEL_NAMES[level]}" + (f" ({where})" if where else "")
    if verdict.cls == "memory_bound":
        return Classification(verdict.cls, said, LEVEL_FIXES[level], level, LEVEL_FIXES_SHORT[level])
    if verdict.cls == "balanced":
        fix = f"{FIXES['balanced']}; on the memory side: {LEVEL_FIXES[level]}"
        return Classification(verdict.cls, said, fix, level, f"fuse + lower precision; {LEVEL_FIXES_SHORT[level]}")
    return verdict  # compute_bound and latency_bound: no memory level limits them


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
    cls, case = bound_class(compute, memory, t)
    lead, other = (compute_name, memory_name) if compute >= memory else (memory_name, compute_name)
    high, low = max(compute, memory), min(compute, memory)
    if case == "High Throughput":
        said = f"{both}: {lead} at or above {_pct(t.high_throughput_at)} of its peak"
        if _at_least(low, t.high_throughput_at):
            said += f", {other} too ({lead} taken as the bound, as NVIDIA's rule takes it)"
    elif case == "Latency Issue":
        said = f"{both}: both below {_pct(t.latency_bound_below)}"
    elif cls == "balanced":
        said = f"{both}: within {t.leads_by * 100:.0f} points of each other, neither at {_pct(t.high_throughput_at)}"
    else:
        said = f"{both}: {lead} leads by {(high - low) * 100:.0f} points"
    said += f" (NVIDIA SOLBottleneck: {case})"
    if cls == "memory_bound" and compute < 0.25 and memory > 0.75:
        said += "; the memory-bound extreme: compute idle, the memory bus saturated"
    elif cls == "compute_bound" and compute > 0.75 and memory < 0.50:
        said += "; the compute-bound extreme: near peak FLOP/s"
    return Classification(cls, said, FIXES[cls])


def classify_traffic(
    memory: float | None, thresholds: Thresholds | None = None, memory_name: str = "memory"
) -> Classification:
    """Classify an op that moves bytes but has no FLOP count, by its memory utilisation alone (compute 0)."""
    t = thresholds or Thresholds()
    if memory is None:
        return Classification("unknown", f"no FLOP count and {memory_name} absent", FIXES["unknown"])
    said = f"no FLOPs counted (memory traffic), {memory_name} {_pct(memory)}"
    if memory > DRAM_ROOF:
        cls, said = "cache_resident", f"{said}: above the DRAM roof, data from caches"
    else:
        cls = bound_class(0.0, memory, t)[0]
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
