"""What a Nsight Compute report is to fleetbench, whichever file it came from: the metrics wanted
(`WANTED`) and the display names ncu's sections give them (`DISPLAY`), one profiled launch
(`KernelResult`) and a report (`NcuReport`), ncu's units turned into base units (`parse_value`), and
how a text reader takes a launch's rows (`Launch`) and says what it left out (`Warnings`).

The readers of .ncu-rep and CSV files (readers.py) and of ncu's console output (console.py) both build
on this module; it imports neither.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from fleetbench.profile.ncu.pipes import PIPE_METRICS
from fleetbench.profile.ncu.rules import RuleResult
from fleetbench.profile.ncu.tensor import TENSOR_METRICS

FLOP_OPS = ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")

WANTED: tuple[str, ...] = (
    "device__attribute_display_name",
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__bytes_op_read.sum",
    "dram__bytes_op_write.sum",
    "dram__bytes.sum.per_second",
    "dram__bytes.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg",
    "sm__cycles_elapsed.avg.per_second",
    "smsp__cycles_elapsed.avg.per_second",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "launch__grid_size",
    "launch__block_size",
    "launch__waves_per_multiprocessor",
    *(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed" for op in FLOP_OPS),
    *(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in FLOP_OPS),
    *TENSOR_METRICS,
    *(metric for metric in PIPE_METRICS if metric not in TENSOR_METRICS),
)

TEXT_METRICS = frozenset({"device__attribute_display_name"})  # every other WANTED metric is a number
# NVIDIA's list of the unit metrics memory SOL is the maximum of (a .ncu-rep carries it): which level limits.
BREAKDOWN = "breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_SOL = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_HZ = "dram__cycles_elapsed.avg.per_second"

# The rows of ncu's sections, by display name, in every ncu version's wording found in published console
# logs and CSV exports (2019-2025; "SOL FB/L2/TEX": the legacy section of pre-Volta GPUs): name ->
# (ncu metric, the base unit its value must have: "%", "ns", "hz", "byte/s", "" for a count). A name in
# another unit is some other figure and is not taken.
DISPLAY: dict[str, tuple[tuple[str, str], ...]] = {
    # GPU Speed Of Light Throughput (ncu 2023-), GPU Speed Of Light (2019-2022)
    "Duration": (("gpu__time_duration.sum", "ns"),),
    "Compute (SM) Throughput": ((COMPUTE_SOL, "%"),),
    "Compute (SM) [%]": ((COMPUTE_SOL, "%"),),  # ncu 2021-2022
    "SM [%]": ((COMPUTE_SOL, "%"),),  # ncu 2019-2020
    "Memory Throughput": ((MEMORY_SOL, "%"), ("dram__bytes.sum.per_second", "byte/s")),  # SOL; Memory Workload
    "Memory [%]": ((MEMORY_SOL, "%"),),
    "DRAM Throughput": ((DRAM_SOL, "%"),),
    "SOL FB": ((DRAM_SOL, "%"),),  # ncu 2019-2020: the frame buffer (DRAM)
    "SOL DRAM": ((DRAM_SOL, "%"),),  # ncu 2020-2021, with "SOL L1/TEX Cache" and "SOL L2 Cache"
    "L1/TEX Cache Throughput": (("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),),
    "SOL TEX": (("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),),
    "SOL L1/TEX Cache": (("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),),
    "L2 Cache Throughput": (("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),),
    "SOL L2": (("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),),
    "SOL L2 Cache": (("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),),
    "SM Frequency": (("sm__cycles_elapsed.avg.per_second", "hz"),),
    "DRAM Frequency": ((DRAM_HZ, "hz"),),
    "Memory Frequency": ((DRAM_HZ, "hz"),),  # ncu 2019-2020
    # Launch Statistics
    "Grid Size": (("launch__grid_size", ""),),
    "Block Size": (("launch__block_size", ""),),
    "Waves Per SM": (("launch__waves_per_multiprocessor", ""),),
}
MAX_WARNINGS = 10  # of one kind per file; the rest are counted in one more note
# Beyond these a cell is no measurement: no counter, byte count or rate reaches 1e30 in its base unit,
# and a percentage of peak (a little over 100 at times) does not reach 1000.
MAX_FIGURE = 1e30
MAX_PERCENT = 1000.0

Value = float | str


@dataclass
class KernelResult:
    """One profiled launch and the metrics of WANTED the file has for it (base units)."""

    index: int  # position in the file
    id: str  # ncu's ID column / action index
    name: str  # full (demangled) kernel name
    device: str
    metrics: dict[str, Value] = field(default_factory=dict)
    rules: list[RuleResult] = field(default_factory=list)  # NVIDIA's guided analysis, where the file has it
    breakdown: dict[str, float] = field(default_factory=dict)  # memory SOL's unit metrics (BREAKDOWN), in %

    invocations: int = 1  # launches this entry stands for (ncu's --print-summary: their average figures)


@dataclass
class NcuReport:
    """Every launch a report holds, in file order; `notes` keeps ncu's `==` lines and the reader's warnings."""

    path: str
    format: str  # ncu-rep, csv-details, csv-raw, console
    kernels: list[KernelResult]
    notes: list[str] = field(default_factory=list)  # ncu's `==` lines, then "warning: ..." on damaged input
    cut: Cut | None = None  # the file was cut short (or damaged): how many launches were read of how many

    @property
    def cut_label(self) -> str | None:
        """'cut: 5 of 9 kernels read' (or '... read, the rest lost' where the file does not say how many)."""
        if self.cut is None:
            return None
        if self.cut.total is not None and self.cut.total > self.cut.read:
            return f"cut: {self.cut.read} of {self.cut.total} kernels read"
        return f"cut: {self.cut.read} kernels read, the rest lost"


@dataclass(frozen=True)
class Cut:
    """A report read up to where it was cut: launches read, and how many it had where the file says so."""

    read: int
    total: int | None = None


# --- units ---------------------------------------------------------------------------------------------
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "k": 1e3}
_TIME_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "nsec": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "usec": 1e3,
    "µs": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "second": 1e9,
    "sec": 1e9,
}
_BASES = ("byte", "cycle", "inst", "sector", "request", "warp", "thread", "block", "hz", "flop", "pass")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _scale(token: str) -> tuple[float, str] | None:
    """'Gbyte' -> (1e9, 'byte'); 'Mhz' -> (1e6, 'hz'); None when not a prefixed known unit."""
    for base in _BASES:
        if token.lower().endswith(base):
            prefix = token[: len(token) - len(base)]
            if prefix in _PREFIX:
                return _PREFIX[prefix], base
    return None


def normalise_unit(unit: str) -> tuple[float, str]:
    """Factor that turns a value in `unit` into ncu's base unit, and that base unit's name."""
    unit = unit.strip()
    if unit in ("", "%"):
        return 1.0, unit
    if unit in _TIME_NS:
        return _TIME_NS[unit], "ns"
    if "/" in unit:
        numerator, denominator = (part.strip() for part in unit.split("/", 1))
        num = _scale(numerator)
        num_factor, num_base = num if num is not None else (1.0, numerator)
        if denominator in _TIME_NS:
            base = "hz" if num_base == "cycle" else f"{num_base}/s"
            return num_factor * 1e9 / _TIME_NS[denominator], base  # 1e9 / 1e3, not 1 / 1e-6: exact
        return num_factor, f"{num_base}/{denominator}"
    scaled = _scale(unit)
    if scaled is not None:
        return scaled
    return 1.0, unit


def parse_value(text: str, unit: str = "") -> Value | None:
    """A cell in the base unit: float when numeric (thousands separators removed), else str (the text itself).

    Empty and `n/a` are None (absent); `nan` is NaN (ncu tried and failed to measure); a number past
    the float range (`1e999`) is no measurement either and stays text.
    """
    cell = text.strip()
    if cell == "" or cell.lower() == "n/a":
        return None
    if cell.lower() == "nan":  # ncu's mark for a metric it tried and failed to measure (replay failed)
        return float("nan")
    number = cell.replace(",", "")
    if _NUMBER.match(number):
        factor, _ = normalise_unit(unit)
        value = float(number) * factor
        return value if math.isfinite(value) else cell
    return cell


def display_metric(name: str, unit: str) -> str | None:
    """The WANTED metric a display-name row holds in this unit (`DISPLAY`), or None."""
    choices = DISPLAY.get(name)
    if choices is None:
        return None
    base = normalise_unit(unit)[1]
    return next((metric for metric, wanted in choices if wanted == base), None)


def agree(a: Value, b: Value) -> bool:
    """Two readings of one figure agree: equal, or equal to the precision a display row prints (0.5 %)."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= 0.005 * max(abs(a), abs(b))


@dataclass
class Warnings:
    """What a text reader left out and why, as capped notes (one list per kind)."""

    name: str
    short_rows: list[str] = field(default_factory=list)
    not_numbers: list[str] = field(default_factory=list)
    negatives: list[str] = field(default_factory=list)
    out_of_range: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    def short(self, number: int, row: list[str], needed: int) -> None:
        """Row `number` has fewer cells than the columns read need: left out."""
        self.short_rows.append(
            f"warning: {self.name}: row {number} has {len(row)} cells, fewer than the {needed} its columns need "
            "(cut off?); left out"
        )

    def checked(self, kernel: str, metric: str, text: str, unit: str, row: str | None = None) -> Value | None:
        """The value of a WANTED cell; a text where a number belongs, or a negative figure, is left out with a warning.

        `row`: the display name the file gives the metric, named in the warning so the row can be found.
        """
        value = parse_value(text, unit)
        shown = metric if row is None or row == metric else f"{row} ({metric})"
        if isinstance(value, str) and metric not in TEXT_METRICS:
            self.not_numbers.append(
                f"warning: {self.name}: {shown} of launch {kernel} is {text!r}, not a number; left out"
            )
            return None
        if isinstance(value, float) and value < 0:
            self.negatives.append(
                f"warning: {self.name}: {shown} of launch {kernel} is {text.strip()} {unit}".rstrip()
                + ", negative (no count, duration or percentage is); left out"
            )
            return None
        percent = unit.strip() == "%"
        if isinstance(value, float) and value > (MAX_PERCENT if percent else MAX_FIGURE):
            limit = f"{MAX_PERCENT:.0f} %" if percent else f"{MAX_FIGURE:.0e} in its base unit"
            self.out_of_range.append(
                f"warning: {self.name}: {shown} of launch {kernel} is {text.strip()} {unit}".rstrip()
                + f", beyond {limit} (no measurement); left out"
            )
            return None
        return value

    def into(self, notes: list[str]) -> None:
        """Add the warnings to a report's notes, each kind capped."""
        for kind in (self.short_rows, self.not_numbers, self.negatives, self.out_of_range, self.duplicates):
            capped(notes, kind)


@dataclass
class Launch:
    """The figures of one launch as a text file's rows give them: a metric given twice is flagged, never chosen.

    A row is named by the metric (`exact`) or by a display name; the same name twice in one section, or
    two names for one metric that disagree, leave the metric out with a warning. A display row for a
    metric the file also names exactly, and agreeing with it to the display's precision, is the same
    figure rounded: the exact one is kept.
    """

    kernel: KernelResult
    warnings: Warnings
    origin: dict[str, tuple[tuple[str, str], bool]] = field(default_factory=dict)  # metric -> (section, row), exact
    refused: set[str] = field(default_factory=set)

    def put(self, metric: str, value: Value, key: tuple[str, str], exact: bool) -> None:
        """Take one row's value of `metric` (`key`: the row's section and name)."""
        metrics = self.kernel.metrics
        if metric in self.refused:
            return
        if metric not in metrics:
            metrics[metric] = value
            self.origin[metric] = (key, exact)
            return
        before, (first, first_exact) = metrics[metric], self.origin[metric]
        where = f"{metric} of launch {self.kernel.id}"
        if first == key:
            if agree(before, value):
                self.warnings.duplicates.append(
                    f"warning: {self.warnings.name}: {where} is given twice ({key[1]!r}, the same value); kept once"
                )
                return
            self._refuse(metric, f"{where} is given twice ({key[1]!r}): {before!r} and {value!r}")
        elif agree(before, value):
            if exact and not first_exact:  # the metric's own row is more precise than its display row
                metrics[metric] = value
                self.origin[metric] = (key, exact)
        else:
            self._refuse(metric, f"{where} is given as {first[1]!r} = {before!r} and as {key[1]!r} = {value!r}")

    def _refuse(self, metric: str, said: str) -> None:
        del self.kernel.metrics[metric]
        self.refused.add(metric)
        self.warnings.duplicates.append(f"warning: {self.warnings.name}: {said}; left out (neither is chosen)")


def capped(notes: list[str], warnings: list[str]) -> None:
    """Add warnings of one kind to the notes, the first MAX_WARNINGS of them and a count of the rest."""
    notes.extend(warnings[:MAX_WARNINGS])
    if len(warnings) > MAX_WARNINGS:
        notes.append(f"warning: ... and {len(warnings) - MAX_WARNINGS} more like these")


# --- .ncu-rep ---------------------------------------------------------------------------------------
