"""Roofline: achieved FLOP/s against arithmetic intensity, under the compute and memory roofs.

Two sources of points:
  ncu          one point per kernel (grouped launches) with FLOPs and DRAM bytes from Nsight
               Compute; roofs from the report's own peak counters, else the datasheet table; a
               kernel with tensor-core FLOPs sits under the tensor roof, one whose tensor work could
               not be counted is flagged (its point may sit low), one ncu did not measure is left off;
  analytical   one point per torch op with FLOPs (torch.profiler's with_flops, torch.utils.flop_counter
               or the op table of profile/flops.py) and its tensor traffic (inputs read once, outputs
               written once) against the measured peaks; ops with bytes and no FLOPs are classed by
               their bytes in the op rows but have no point (no intensity to place).
Every point is placed against the ridge point (peak FLOP/s / bandwidth) of its roof: left of the
ridge the memory roof caps it (`memory` side), right of it the compute roof (`compute` side); its
`roof_fraction` says how close it gets to the roof above it. The chart is a log-log PNG (matplotlib
Agg backend, no display needed) with the roofs, the ridge and the labelled points.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.fsutil import atomic_path
from fleetbench.gpus import DatasheetPeak, Peaks, peaks_of, unknown_gpu
from fleetbench.profile.classify import FIXES, FIXES_SHORT, Classification, Thresholds, classify, classify_traffic
from fleetbench.profile.flops import FLOP_SOURCES, VIEW_OPS
from fleetbench.profile.names import short_name
from fleetbench.profile.ncu.summary import KernelGroup, NcuSummary
from fleetbench.profile.ncu.tensor import CAPTURE_HINT

log = logging.getLogger(__name__)

CLASS_COLOURS = {
    "memory_bound": "#1f77b4",
    "compute_bound": "#d62728",
    "balanced": "#9467bd",
    "latency_bound": "#7f7f7f",
    "cache_resident": "#17becf",
    "unknown": "#bcbd22",
    "not_measured": "#000000",  # never drawn: not-measured kernels have no point
}


@dataclass
class OpStat:
    """One torch op over the profiled steps (from torch.profiler events)."""

    name: str
    label: str
    count: int
    time_s: float  # inclusive device time on GPU, inclusive CPU time on CPU: the op's own rate
    self_time_s: float  # what the op itself spent (for ranking, no double counting)
    flops: float
    bytes: float
    dtype: str | None
    flop_source: str = "none"  # where the FLOPs come from: one of profile.flops.FLOP_SOURCES


@dataclass
class RooflinePoint:
    """One kernel or op on the chart: what it achieved, the roof above it and its class."""

    label: str
    short: str
    name: str
    time_s: float | None
    flop_per_second: float
    arithmetic_intensity: float
    roof: str
    ridge: float
    side: str  # memory | compute: which roof caps the point
    roof_fraction: float  # achieved / attainable at this intensity
    cls: str
    reason: str
    fix: str
    tensor_uncounted: str | None = None  # why the point may sit low: tensor-core work the report did not count


@dataclass
class Roofline:
    """The points of one chart with the peaks they sit under; `notes` say what was left off and why."""

    title: str
    source: str  # ncu | analytical
    device: str
    peaks: dict[str, Any]
    points: list[RooflinePoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as roofline.json holds it."""
        return asdict(self)

    def note(self, text: str, level: int = logging.INFO) -> None:
        """Keep `text` with the chart and its record, and log it."""
        self.notes.append(text)
        log.log(level, text)


def attainable(intensity: float, peak: float, bandwidth: float) -> float:
    """The roofline itself: FLOP/s reachable at `intensity` (FLOP/byte) under both roofs."""
    return min(peak, intensity * bandwidth)


@dataclass(frozen=True)
class Roof:
    """The roofs over a point: a compute peak (FLOP/s, named by dtype and source) and a bandwidth (bytes/s)."""

    name: str
    peak: float
    bandwidth: float


@dataclass(frozen=True)
class Achieved:
    """What one kernel or op reached: its names, its time, FLOP/s and FLOPs per byte."""

    label: str
    short: str
    name: str
    time_s: float | None
    flop_per_second: float
    intensity: float


def _place(achieved: Achieved, roof: Roof, verdict: Classification) -> RooflinePoint:
    ridge = roof.peak / roof.bandwidth
    return RooflinePoint(
        label=achieved.label,
        short=achieved.short,
        name=achieved.name,
        time_s=achieved.time_s,
        flop_per_second=achieved.flop_per_second,
        arithmetic_intensity=achieved.intensity,
        roof=roof.name,
        ridge=ridge,
        side="memory" if achieved.intensity < ridge else "compute",
        roof_fraction=achieved.flop_per_second / attainable(achieved.intensity, roof.peak, roof.bandwidth),
        cls=verdict.cls,
        reason=verdict.reason,
        fix=verdict.fix,
    )


def op_ratios(op: OpStat, peaks: Peaks) -> tuple[float | None, float | None]:
    """Compute and memory utilisation of an op against the peaks (None when unknown)."""
    if op.time_s <= 0:
        return None, None
    roof = peaks.compute_peak(op.dtype)
    compute = op.flops / op.time_s / roof[1] if roof is not None and op.flops > 0 else None
    memory = op.bytes / op.time_s / peaks.bytes_per_second if peaks.bytes_per_second and op.bytes > 0 else None
    return compute, memory


NO_FIGURES = "no FLOP count and no tensor bytes recorded (record_shapes off, or no tensor inputs)"
VIEW_REASON = "a view or an empty allocation: no FLOPs and no tensor traffic, its time is per-call overhead"
NO_FIGURES_FIX = (
    "not classified without FLOPs or bytes: profile with record_shapes and with_flops; on a GPU, "
    "fleetbench ncu run classifies its kernels"
)


def op_verdict(op: OpStat, peaks: Peaks, thresholds: Thresholds | None = None) -> Classification:
    """An op's class: by both roofs with a FLOP count, by its bytes alone without one (memory traffic)."""
    compute, memory = op_ratios(op, peaks)
    if op.flops > 0:
        return classify(compute, memory, thresholds, "compute", "memory")
    if op.bytes > 0:
        return classify_traffic(memory, thresholds)
    if op.name in VIEW_OPS:
        return Classification("latency_bound", VIEW_REASON, FIXES["latency_bound"])
    return Classification("unknown", NO_FIGURES, NO_FIGURES_FIX)


def op_rows(ops: list[OpStat], peaks: Peaks, thresholds: Thresholds, top: int) -> list[dict[str, Any]]:
    """The top ops by self time, each with its analytical figures, class, fix and FLOP source."""
    rows = []
    for op in [o for o in ops if o.self_time_s > 0][:top]:
        compute, memory = op_ratios(op, peaks)
        verdict = op_verdict(op, peaks, thresholds)
        rows.append(
            {
                "label": op.label,
                "short": short_name(op.name),
                "name": op.name,
                "calls": op.count,
                "self_time_s": op.self_time_s,
                "time_s": op.time_s,
                "flops": op.flops,
                "flop_source": op.flop_source if op.flops > 0 else "none",
                "bytes": op.bytes,
                "dtype": op.dtype,
                "flop_per_second": op.flops / op.time_s if op.flops > 0 and op.time_s > 0 else None,
                "arithmetic_intensity": op.flops / op.bytes if op.flops > 0 and op.bytes > 0 else None,
                "compute_ratio": compute,
                "memory_ratio": memory,
                "class": verdict.cls,
                "reason": verdict.reason,
                "fix": verdict.fix,
                "fix_short": "record shapes and FLOPs, or ncu"
                if verdict.fix == NO_FIGURES_FIX
                else FIXES_SHORT[verdict.cls],
            }
        )
    return rows


def flop_source_note(ops: list[OpStat]) -> str:
    """How many ops took their FLOPs from each source (profile.flops), for the record's notes."""
    counts = Counter(op.flop_source if op.flops > 0 else "none" for op in ops)
    parts = [f"{source} {counts[source]}" for source in FLOP_SOURCES if counts[source]]
    return f"FLOP counts of the {len(ops)} ops by source: {', '.join(parts)} (none: classed by their bytes; views as overhead)"


def analytical_roofline(ops: list[OpStat], peaks: Peaks, thresholds: Thresholds | None = None) -> Roofline:
    """One point per op with FLOPs and bytes, under the measured peaks, slowest first."""
    roofline = Roofline(
        title=f"analytical roofline: torch ops on {peaks.device}",
        source="analytical",
        device=peaks.device,
        peaks=asdict(peaks),
    )
    if not peaks.bytes_per_second or not peaks.flop_per_second:
        roofline.note("no peaks for this device: points cannot be placed against roofs", logging.WARNING)
        return roofline
    skipped = 0
    for op in ops:
        roof = peaks.compute_peak(op.dtype)
        if op.flops <= 0 or op.bytes <= 0 or op.time_s <= 0 or roof is None:
            skipped += 1
            continue
        achieved = Achieved(op.label, op.label, op.name, op.time_s, op.flops / op.time_s, op.flops / op.bytes)
        roofline.points.append(
            _place(
                achieved,
                Roof(f"{roof[0]} ({peaks.source})", roof[1], peaks.bytes_per_second),
                op_verdict(op, peaks, thresholds),
            )
        )
    if ops:
        roofline.note(flop_source_note(ops))
    if skipped:
        roofline.note(
            f"{skipped} ops without a FLOP count or without tensor bytes are not on the chart (no "
            "intensity to place them at); those with bytes alone (copy_, fill_) are memory traffic, "
            "classed by their bytes among the top ops"
        )
    cached = sum(1 for p in roofline.points if p.cls == "cache_resident")
    if cached:
        roofline.note(
            f"{cached} ops sit above the DRAM roof, labelled cache_resident: their data come from caches "
            "(small tensors beat the DRAM bandwidth), or the measured bandwidth is low (a busy machine; remeasure)"
        )
    above = [p.roof_fraction for p in roofline.points if p.cls != "cache_resident" and p.roof_fraction > 1.05]
    if above:
        # Seen on an H100: the model's bf16 GEMMs reached 112 % of an 8192^3 probe's 725 TFLOP/s. A GPU's
        # sustained matmul is power-limited, while the ops' bursts run at higher clocks.
        roofline.note(
            f"{len(above)} ops sit above the compute roof (up to {max(above):.0%} of it): the measured peak is "
            "below what they reached, on a busy machine or where the peak probe's sustained matmul ran at lower "
            "clocks than the ops' bursts (a GPU's power limit); remeasure with profile.remeasure_peaks=true"
        )
    roofline.points.sort(key=lambda p: p.time_s or 0.0, reverse=True)
    return roofline


def _sheet_tensor(sheet: DatasheetPeak | None) -> float | None:
    dense = [v for v in (sheet.bf16_tensor, sheet.fp16_tensor) if v is not None] if sheet else []
    return max(dense) if dense else None


def ncu_peaks(summary: NcuSummary) -> Peaks | None:
    """Roofs for an ncu report: its own peak counters (median over kernels), else the datasheet or --peak.

    A `tensor` roof joins the fp32 one where the report has tensor peak counters or the datasheet
    (or --peak) gives the device's dense bf16/fp16 peak.
    """
    device = summary.devices[0] if summary.devices else "unknown device"
    flop_peaks = [k.peak_fp32_flop_per_second for k in summary.kernels if k.peak_fp32_flop_per_second]
    bw_peaks = [k.peak_dram_bytes_per_second for k in summary.kernels if k.peak_dram_bytes_per_second]
    tensor_peaks = [k.peak_tensor_flop_per_second for k in summary.kernels if k.peak_tensor_flop_per_second]
    peaks: Peaks | None = None
    sheet = summary.peaks
    if flop_peaks and bw_peaks:
        peaks = Peaks(
            device=device,
            backend="cuda",
            source="ncu counters",
            flop_per_second={"float32": statistics.median(flop_peaks)},
            bytes_per_second=statistics.median(bw_peaks),
            detail={"note": "fp32 FMA peak and DRAM peak at the clocks ncu profiled with"},
        )
    elif sheet is not None:
        peaks = peaks_of(sheet, device)
    tensor = statistics.median(tensor_peaks) if tensor_peaks else _sheet_tensor(sheet)
    if peaks is not None and peaks.source != "ncu counters":  # its bf16/fp16 roofs are the tensor roof
        for dtype in ("bfloat16", "float16"):
            peaks.flop_per_second.pop(dtype, None)
    if peaks is not None and tensor is not None:
        peaks.flop_per_second["tensor"] = tensor
        where = "--peak" if sheet is not None and sheet.source.startswith("--peak") else "datasheet"
        peaks.detail["tensor"] = "ncu tensor peak counters" if tensor_peaks else f"{where} dense bf16/fp16 peak"
    return peaks


def _roof_for(group: KernelGroup, peaks: Peaks) -> Roof | None:
    """The tensor roof for a kernel with tensor-core FLOPs, else the fp32 roof; None without a bandwidth."""
    if not peaks.bytes_per_second:
        return None
    if group.tensor_flops and "tensor" in peaks.flop_per_second:
        return Roof(f"tensor ({peaks.detail['tensor']})", peaks.flop_per_second["tensor"], peaks.bytes_per_second)
    if "float32" not in peaks.flop_per_second:
        return None
    return Roof(f"float32 ({peaks.source})", peaks.flop_per_second["float32"], peaks.bytes_per_second)


def _ncu_notes(roofline: Roofline, summary: NcuSummary, off_chart: list[KernelGroup]) -> None:
    """Say what the chart leaves out or may understate: unmeasured kernels, uncounted tensor work."""
    unmeasured = [g for g in summary.groups if g.not_measured]
    if unmeasured:
        launches = sum(g.not_measured for g in unmeasured)
        roofline.note(
            f"{launches} launches ncu did not measure (NaN: replay failed) are left out: "
            + ", ".join(g.short for g in unmeasured[:5]),
            logging.WARNING,
        )
    missing = [g for g in off_chart if g.cls != "not_measured"]
    if missing:
        roofline.note(
            f"{len(missing)} of {len(summary.groups)} kernels ({sum(g.launches for g in missing)} launches) lack "
            "FLOP or DRAM byte counters (capture with --set full) and are not on the chart"
        )
    low = [p for p in roofline.points if p.tensor_uncounted]
    if low:
        roofline.note(
            f"{len(low)} kernels probably ran on tensor cores whose FLOPs the report does not count, so their "
            f"points may sit far too low ({', '.join(p.short for p in low[:5])}); {CAPTURE_HINT}",
            logging.WARNING,
        )


def ncu_roofline(summary: NcuSummary) -> Roofline:
    """One point per kernel with FLOP and DRAM byte counters, under the report's roofs (`ncu_peaks`)."""
    peaks = ncu_peaks(summary)
    device = summary.devices[0] if summary.devices else "unknown device"
    roofline = Roofline(
        title=f"roofline: Nsight Compute kernels on {device}",
        source="ncu",
        device=device,
        peaks=asdict(peaks) if peaks else {},
    )
    for note in summary.notes:  # a cut or damaged report is drawn from what it holds, and says so
        if note.startswith("warning: "):
            roofline.note(note.removeprefix("warning: "), logging.WARNING)
    if len(summary.devices) > 1:
        roofline.note(f"report spans devices {', '.join(summary.devices)}; roofs of {device}")
    if peaks is None or not peaks.bytes_per_second or not peaks.flop_per_second:
        roofline.note(
            f"no compute peak and bandwidth known for {device} (no peak counters in the report, no "
            f"datasheet entry): no roofline; {unknown_gpu(device)}",
            logging.WARNING,
        )
        return roofline
    off_chart: list[KernelGroup] = []
    for group in summary.groups:
        roof = _roof_for(group, peaks)
        if group.flop_per_second is None or not group.arithmetic_intensity or roof is None:
            off_chart.append(group)
            continue
        achieved = Achieved(
            group.label, group.short, group.name, group.duration_s, group.flop_per_second, group.arithmetic_intensity
        )
        point = _place(achieved, roof, Classification(group.cls, group.reason, group.fix))
        point.tensor_uncounted = group.tensor_uncounted
        roofline.points.append(point)
    _ncu_notes(roofline, summary, off_chart)
    return roofline


def _nice_range(values: list[float], pad: float = 10.0) -> tuple[float, float]:
    low, high = min(values), max(values)
    return 10 ** math.floor(math.log10(low / pad)), 10 ** math.ceil(math.log10(high * pad))


def plot_roofline(roofline: Roofline, path: Path, labels: int = 8) -> Path:
    """Write the log-log chart; roofs from roofline.peaks, points coloured by class."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 6), dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    axes.set_xscale("log")
    axes.set_yscale("log")
    flops: dict[str, float] = dict(roofline.peaks.get("flop_per_second") or {})
    bandwidth = roofline.peaks.get("bytes_per_second")
    points = roofline.points
    xs = [p.arithmetic_intensity for p in points] + ([v / bandwidth for v in flops.values()] if bandwidth else [])
    ys = [p.flop_per_second for p in points] + list(flops.values())
    if not xs:
        xs, ys = [1.0], [1e9]
    x_low, x_high = _nice_range(xs)
    y_low, y_high = _nice_range(ys)
    if bandwidth and flops:
        grid = [x_low * (x_high / x_low) ** (i / 200) for i in range(201)]
        source = roofline.peaks.get("source", "")
        for index, (dtype, peak) in enumerate(sorted(flops.items(), key=lambda kv: -kv[1])):
            style = "-" if index == 0 else "--"
            axes.plot(
                grid,
                [attainable(x, peak, bandwidth) for x in grid],
                style,
                color="black",
                linewidth=1.6 if index == 0 else 1.0,
                label=f"{dtype} roof {peak / 1e12:.3g} TFLOP/s",
            )
            ridge = peak / bandwidth
            axes.axvline(ridge, color="grey", linestyle=":", linewidth=1)
            axes.annotate(
                f"ridge {ridge:.3g} FLOP/B",
                (ridge, peak),
                textcoords="offset points",
                xytext=(4, -14),
                fontsize=7,
                color="grey",
            )
        axes.plot([], [], " ", label=f"memory roof {bandwidth / 1e9:.4g} GB/s ({source})")
    seen: set[str] = set()
    for point in points:
        colour = CLASS_COLOURS.get(point.cls, "black")
        axes.scatter(
            [point.arithmetic_intensity],
            [point.flop_per_second],
            color=colour,
            s=28,
            zorder=3,
            label=point.cls if point.cls not in seen else None,
        )
        seen.add(point.cls)
        if point.tensor_uncounted:  # an upward arrow: the true point lies higher
            axes.annotate(
                "",
                (point.arithmetic_intensity, point.flop_per_second * 4),
                (point.arithmetic_intensity, point.flop_per_second),
                arrowprops={"arrowstyle": "->", "color": colour, "linewidth": 0.8},
            )
    if any(p.tensor_uncounted for p in points):
        axes.plot([], [], " ", label="^ tensor work not counted: may sit low")
    for index, point in enumerate(sorted(points, key=lambda p: p.time_s or 0.0, reverse=True)[:labels]):
        axes.annotate(
            point.short,
            (point.arithmetic_intensity, point.flop_per_second),
            textcoords="offset points",
            xytext=(5, 4 - 10 * (index % 3)),
            fontsize=7,
        )  # staggered: neighbours stay readable
    axes.set_xlim(x_low, x_high)
    axes.set_ylim(y_low, y_high)
    axes.set_xlabel("arithmetic intensity (FLOP / byte)")
    axes.set_ylabel("performance (FLOP/s)")
    axes.set_title(roofline.title, fontsize=10)
    axes.grid(True, which="major", linestyle=":", linewidth=0.5)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, loc="lower right")
    if not points:
        axes.text(
            0.5,
            0.5,
            "no points: " + ("; ".join(roofline.notes) or "nothing measured"),
            transform=axes.transAxes,
            ha="center",
            fontsize=8,
            wrap=True,
        )
    figure.tight_layout()
    with atomic_path(path, "roofline plot") as tmp:  # a failed write leaves no half PNG and no .tmp
        figure.savefig(tmp, format="png")
    return path
