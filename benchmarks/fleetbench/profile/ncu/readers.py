"""Read Nsight Compute results: .ncu-rep through NVIDIA's `ncu_report`, and `ncu --csv` exports.

Every reader returns the same thing: one `KernelResult` per profiled launch, holding the metrics
of `WANTED` that the file has, in ncu's base units (time in ns, bytes, rates per second, `%`).
A metric the file lacks is simply not in the dict: absent, never zero.

CSV exports come in two layouts, both accepted:
  --page details  one row per (launch, metric): ID, Kernel Name, Device, ..., Metric Name,
                  Metric Unit, Metric Value
  --page raw      one wide row per launch, metric names as columns; the row after the header
                  may hold the units
Program output and `==PROF==` lines before the header are skipped; values may carry thousands
separators (`134,221,568`); units may be scaled (`usecond`, `us`, `ms`, `Gbyte/second`,
`cycle/nsecond`) and are converted to the base units.
"""

from __future__ import annotations

import csv
import importlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.errors import UserError
from fleetbench.profile.ncu.rules import RuleResult, rules_of_action
from fleetbench.profile.ncu.tensor import TENSOR_METRICS

FLOP_OPS = ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")

WANTED: tuple[str, ...] = (
    "device__attribute_display_name",
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
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
    "sm__cycles_elapsed.avg.per_second",
    "smsp__cycles_elapsed.avg.per_second",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "launch__grid_size",
    "launch__block_size",
    *(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed" for op in FLOP_OPS),
    *(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in FLOP_OPS),
    *TENSOR_METRICS,
)

INSTALL_HINT = "pip install 'fleetbench[ncu]' (NVIDIA's ncu-report package)"
REP_MAGIC = b"NVR\x00"

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


@dataclass
class NcuReport:
    """Every launch a report holds, in file order; `notes` keeps ncu's `==` lines from a CSV."""

    path: str
    format: str  # ncu-rep, csv-details, csv-raw
    kernels: list[KernelResult]
    notes: list[str] = field(default_factory=list)


def read_report(path: Path) -> NcuReport:
    """Dispatch on the content: the .ncu-rep magic, else ncu CSV text."""
    if not path.is_file():
        raise UserError(f"report {path} not found; pass a .ncu-rep file or an ncu --csv export")
    with path.open("rb") as handle:
        head = handle.read(4)
    if head == REP_MAGIC or path.suffix in (".ncu-rep", ".ncu-repz"):
        return read_ncu_rep(path)
    return read_ncu_csv(path)


# --- .ncu-rep ---------------------------------------------------------------------------------------
def read_ncu_rep(path: Path) -> NcuReport:
    """Read a .ncu-rep with NVIDIA's ncu_report; UserError when that module is missing or no kernel is in it."""
    try:
        ncu_report = importlib.import_module("ncu_report")  # NVIDIA's SWIG module: no type information
    except ImportError:
        raise UserError(f"reading {path.name} needs NVIDIA's ncu_report module: {INSTALL_HINT}") from None
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # the SWIG layer raises assorted types for unreadable files
        raise UserError(f"report {path} could not be loaded by ncu_report: {exc}") from None
    kernels: list[KernelResult] = []
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        for action_index in range(profiled_range.num_actions()):
            action = profiled_range.action_by_idx(action_index)
            metrics: dict[str, Value] = {}
            for name in WANTED:
                metric = action.metric_by_name(name)
                if metric is None or not metric.has_value():
                    continue
                value = _rep_value(metric)
                if value is not None:
                    metrics[name] = value
            display = metrics.get("device__attribute_display_name")
            kernels.append(
                KernelResult(
                    index=len(kernels),
                    id=f"{range_index}:{action_index}",
                    name=action.name(action.NameBase_DEMANGLED) or action.name(),
                    device=str(display) if display is not None else "unknown device",
                    metrics=metrics,
                    rules=rules_of_action(action),
                )
            )
    if not kernels:
        raise UserError(
            f"report {path} holds no profiled kernels (empty, damaged, or not an Nsight "
            "Compute report); re-run the capture, e.g. fleetbench ncu run -- python script.py"
        )
    return NcuReport(path=str(path), format="ncu-rep", kernels=kernels)


def _rep_value(metric: Any) -> Value | None:
    kind = metric.kind()
    if kind == metric.ValueKind_STRING:
        text = metric.as_string()
        return None if text is None else str(text)
    if kind in (metric.ValueKind_UINT32, metric.ValueKind_UINT64):
        return float(metric.as_uint64())
    return float(metric.as_double())


# --- CSV ---------------------------------------------------------------------------------------------
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
_TIME_S = {unit: factor * 1e-9 for unit, factor in _TIME_NS.items()}
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
        if denominator in _TIME_S:
            base = "hz" if num_base == "cycle" else f"{num_base}/s"
            return num_factor / _TIME_S[denominator], base
        return num_factor, f"{num_base}/{denominator}"
    scaled = _scale(unit)
    if scaled is not None:
        return scaled
    return 1.0, unit


def parse_value(text: str, unit: str = "") -> Value | None:
    """A CSV cell in the base unit: float when numeric (thousands separators removed), else str."""
    cell = text.strip()
    if cell == "" or cell.lower() == "n/a":
        return None
    if cell.lower() == "nan":  # ncu's mark for a metric it tried and failed to measure (replay failed)
        return float("nan")
    number = cell.replace(",", "")
    if _NUMBER.match(number):
        factor, _ = normalise_unit(unit)
        return float(number) * factor
    return cell


def _split_preamble(text: str) -> tuple[list[str], str]:
    """(lines before the CSV header, the CSV from its header on)."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    for index, line in enumerate(lines):
        stripped = line.lstrip("\ufeff").lstrip()
        if stripped.startswith('"ID",') or stripped.startswith("ID,"):
            return [ln.rstrip("\r\n") for ln in lines[:index]], "".join(lines[index:])
    return [ln.rstrip("\r\n") for ln in lines], ""


def read_ncu_csv(path: Path) -> NcuReport:
    """Read an `ncu --csv` export (details or raw page); UserError when it has no kernel rows."""
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise UserError(f"report {path} cannot be read: {exc.strerror or exc}") from None
    preamble, body = _split_preamble(text)
    if not body:
        errors = [ln.strip() for ln in preamble if ln.startswith("==ERROR==")]
        why = f" (ncu said {errors[-1]!r})" if errors else ""
        raise UserError(
            f'report {path} holds no kernel data: no ncu CSV header row starting with "ID"; '
            f"the capture failed{why}; fix the program and capture again"
        )
    rows = list(csv.reader(io.StringIO(body)))
    header = rows[0]
    notes = [ln for ln in preamble if ln.startswith("==")]
    if "Metric Name" in header and "Metric Value" in header:
        kernels = _details(header, rows[1:])
        layout = "csv-details"
    else:
        kernels = _raw(header, rows[1:])
        layout = "csv-raw"
    if not kernels:
        raise UserError(f"report {path} has a CSV header but no kernel rows; no kernels were profiled")
    return NcuReport(path=str(path), format=layout, kernels=kernels, notes=notes)


def _details(header: list[str], rows: list[list[str]]) -> list[KernelResult]:
    col = {name: index for index, name in enumerate(header)}
    wanted = set(WANTED)
    kernels: dict[str, KernelResult] = {}
    for row in rows:
        if len(row) < len(header):
            continue
        kernel_id = row[col["ID"]]
        result = kernels.get(kernel_id)
        if result is None:
            device = f"device {row[col['Device']]}" if "Device" in col else "unknown device"
            if "CC" in col and row[col["CC"]]:
                device += f" (CC {row[col['CC']]})"
            result = KernelResult(index=len(kernels), id=kernel_id, name=row[col.get("Kernel Name", 0)], device=device)
            kernels[kernel_id] = result
        metric = row[col["Metric Name"]]
        if metric not in wanted:
            continue
        unit = row[col["Metric Unit"]] if "Metric Unit" in col else ""
        value = parse_value(row[col["Metric Value"]], unit)
        if value is not None:
            result.metrics[metric] = value
    for result in kernels.values():
        display = result.metrics.get("device__attribute_display_name")
        if display is not None:
            result.device = str(display)
    return list(kernels.values())


def _raw(header: list[str], rows: list[list[str]]) -> list[KernelResult]:
    col = {name: index for index, name in enumerate(header)}
    units = [""] * len(header)
    if rows and "ID" in col and rows[0][col["ID"]] == "":
        units = rows[0] + [""] * (len(header) - len(rows[0]))
        rows = rows[1:]
    wanted = [(name, col[name]) for name in WANTED if name in col]
    kernels: list[KernelResult] = []
    for row in rows:
        if len(row) < len(header):
            continue
        metrics: dict[str, Value] = {}
        for name, index in wanted:
            value = parse_value(row[index], units[index])
            if value is not None:
                metrics[name] = value
        display = metrics.get("device__attribute_display_name")
        device = (
            str(display)
            if display is not None
            else f"device {row[col['Device']]}"
            if "Device" in col
            else "unknown device"
        )
        kernels.append(
            KernelResult(
                index=len(kernels),
                id=row[col["ID"]] if "ID" in col else str(len(kernels)),
                name=row[col["Kernel Name"]] if "Kernel Name" in col else "?",
                device=device,
                metrics=metrics,
            )
        )
    return kernels
