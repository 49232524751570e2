"""Read Nsight Compute results: .ncu-rep through NVIDIA's `ncu_report`, `ncu --csv` exports, console output.

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
`cycle/nsecond`) and are converted to the base units. Rows are named by the ncu metric
(`--metrics`, `--page raw`) or by the section's display name, as `--page details` prints them
("Duration", "Compute (SM) Throughput", "DRAM Throughput", ...; `DISPLAY` holds every ncu version's
wording found): a display name counts only in the unit its metric has ("Memory Throughput" in % is
memory SOL, in byte/second the DRAM bytes per second). A row cut short (a file cut off), a text where
a number belongs, a negative count, duration or percentage, and a metric given twice with two
values are left out with a warning in NcuReport.notes, never summarised silently.

ncu's plain console output (`ncu ./app`, or a log of it) is read by fleetbench.profile.ncu.console;
`read_report` tells the three apart by their content.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file
from fleetbench.profile.ncu import report_module
from fleetbench.profile.ncu.console import looks_like_console, parse_console
from fleetbench.profile.ncu.model import (
    BREAKDOWN,
    COMPUTE_SOL,
    MAX_FIGURE,
    MAX_PERCENT,
    MEMORY_SOL,
    WANTED,
    Cut,
    KernelResult,
    Launch,
    NcuReport,
    Value,
    Warnings,
    agree,
    capped,
    display_metric,
)
from fleetbench.profile.ncu.rules import RuleResult, from_csv_row, rules_of_action

INSTALL_HINT = (
    "pip install 'fleetbench[ncu]' (NVIDIA's ncu-report package), or put Nsight Compute's ncu on PATH "
    "(its extras/python holds the module)"
)
REP_MAGIC = b"NVR\x00"
EXPECTED = (
    'fleetbench reads an .ncu-rep, an `ncu --csv` export (a header row starting with "ID") or ncu\'s console '
    "output (launch lines 'NAME (GRID)x(BLOCK), Context N, Stream N, ...' followed by 'Section:' tables)"
)


def read_report(path: Path) -> NcuReport:
    """Dispatch on the content: the .ncu-rep magic, else an ncu CSV header row, else ncu's console output."""
    readable_file(path, "report", "pass a .ncu-rep file, an ncu --csv export or ncu's console output")
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise UserError(f"report {path} cannot be read: {exc.strerror or exc}") from None
    if not head:
        raise UserError(f"report {path} is empty (0 bytes): the capture wrote nothing; capture again")
    if head == REP_MAGIC or path.suffix in (".ncu-rep", ".ncu-repz"):
        return read_ncu_rep(path)
    text = _read_text(path)
    preamble, body = _split_preamble(text)
    if body:
        return _csv_report(path, preamble, body)
    if looks_like_console(text):
        return parse_console(path, text)
    raise UserError(_no_kernel_data(path, preamble))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise UserError(f"report {path} cannot be read: {exc.strerror or exc}") from None


def _no_kernel_data(path: Path, lines: list[str]) -> str:
    """One line: the file holds no launches; what ncu said about its capture, else what was expected."""
    said = [ln.strip() for ln in lines if ln.startswith("==ERROR==")]
    said = said or [ln.strip() for ln in lines if ln.startswith("==WARNING==") and "No kernels were profiled" in ln]
    if said:
        return (
            f"report {path} holds no kernel data: the capture failed (ncu said {said[-1]!r}); fix the program and "
            "capture again"
        )
    profiled = [ln for ln in lines if ln.startswith("==PROF== Profiling ")]
    if profiled:  # ncu says so for each launch it profiled, and prints their results after the program ends
        return (
            f"report {path} is cut: ncu profiled {len(profiled)} launch(es) (its '==PROF== Profiling' lines) but the "
            "file ends before their results; keep the whole console output (ncu ... > FILE 2>&1) and capture again"
        )
    return f"report {path} holds no kernel data: {EXPECTED}; this file is none of these"


def read_ncu_rep(path: Path) -> NcuReport:
    """Read a .ncu-rep with NVIDIA's ncu_report.

    A launch without a name is what a report cut off (or otherwise damaged) leaves: it is left out with a
    warning in the notes. UserError when ncu_report is missing, cannot load the file, fails while reading
    it, or when no whole launch is in it; the C++ layer's own complaints go into that message or the
    notes instead of onto the terminal.
    """
    ncu_report: Any = report_module.load()  # NVIDIA's SWIG module: no type information
    if ncu_report is None:
        raise UserError(f"reading {path.name} needs NVIDIA's ncu_report module: {INSTALL_HINT}")
    notes: list[str] = []
    with _native_stderr() as said:
        try:
            context = ncu_report.load_report(str(path))
            kernels = _rep_kernels(context, path.name, notes)
        except Exception as exc:  # the SWIG layer raises assorted types for unreadable or damaged files
            failure: Exception | None = exc
        else:
            failure = None
    why = f" (ncu_report said {said[0]!r})" if said else ""
    if failure is not None:
        raise UserError(f"report {path} is damaged (cut off?): ncu_report failed reading it: {failure}{why}")
    if not kernels and notes:
        raise UserError(f"report {path} is damaged (cut off?): no launch in it is whole{why}")
    if not kernels:
        raise UserError(
            f"report {path} holds no profiled kernels (empty, damaged, or not an Nsight "
            "Compute report); re-run the capture, e.g. fleetbench ncu run -- python script.py"
        )
    damage = [f"warning: report {path.name} is damaged (cut off?): ncu_report said {line!r}" for line in said[:1]]
    nameless = sum("has no kernel name; left out" in note for note in notes)
    cut = Cut(len(kernels), len(kernels) + nameless) if nameless or damage else None
    return NcuReport(path=str(path), format="ncu-rep", kernels=kernels, notes=damage + notes, cut=cut)


def _rep_kernels(context: Any, name: str, notes: list[str]) -> list[KernelResult]:
    """Every named launch of a loaded report; a nameless one is left out, a garbled one kept, each with a note."""
    kernels: list[KernelResult] = []
    damaged: list[str] = []
    negative: list[str] = []
    out_of_range: list[str] = []
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        for action_index in range(profiled_range.num_actions()):
            action = profiled_range.action_by_idx(action_index)
            launch = f"{range_index}:{action_index}"
            raw = action.name(action.NameBase_DEMANGLED) or action.name()
            if not raw:
                damaged.append(
                    f"warning: report {name} is damaged (cut off?): launch {launch} has no kernel name; left out"
                )
                continue
            kernel_name = _text(str(raw))
            if kernel_name != raw:
                damaged.append(f"warning: report {name} is damaged: the name of launch {launch} is not valid text")
            metrics = _rep_metrics(action, launch, name, negative, out_of_range)
            display = metrics.get("device__attribute_display_name")
            kernels.append(
                KernelResult(
                    index=len(kernels),
                    id=launch,
                    name=kernel_name,
                    device=str(display) if display is not None else "unknown device",
                    metrics=metrics,
                    rules=[_text_rule(rule) for rule in rules_of_action(action)],
                    breakdown=_rep_breakdown(action) if _memory_side(metrics) else {},
                )
            )
    capped(notes, damaged)
    capped(notes, negative)
    capped(notes, out_of_range)
    return kernels


def _text(raw: str) -> str:
    """Text from ncu_report with what a damaged report's bytes leave (lone surrogates) replaced by U+FFFD."""
    return raw.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _text_rule(rule: RuleResult) -> RuleResult:
    texts = (rule.rule, rule.section, rule.title, rule.message)
    clean = tuple(_text(text) for text in texts)
    return rule if clean == texts else replace(rule, rule=clean[0], section=clean[1], title=clean[2], message=clean[3])


def _rep_metrics(action: Any, launch: str, name: str, negative: list[str], out_of_range: list[str]) -> dict[str, Value]:
    """The WANTED metrics of one launch. NaN stays (ncu's "tried and failed to measure"); a negative figure,
    an infinite one or one past what any counter or percentage of peak reaches (the limits of the text
    readers) is damage and is left out with a warning."""
    metrics: dict[str, Value] = {}
    for metric_name in WANTED:
        metric = action.metric_by_name(metric_name)
        if metric is None or not metric.has_value():
            continue
        value = _rep_value(metric)
        if isinstance(value, float) and value < 0:
            negative.append(
                f"warning: report {name}: {metric_name} of launch {launch} is {value:g}, negative; left out"
            )
            continue
        # the unit is asked only past the lower limit: most figures are below it, and asking costs a call
        if isinstance(value, float) and value > MAX_PERCENT:
            percent = _rep_unit(metric) == "%"
            if value > (MAX_PERCENT if percent else MAX_FIGURE):
                limit = f"{MAX_PERCENT:.0f} %" if percent else f"{MAX_FIGURE:.0e} in its base unit"
                out_of_range.append(
                    f"warning: report {name}: {metric_name} of launch {launch} is {value:g}, "
                    f"beyond {limit} (no measurement); left out"
                )
                continue
        if value is not None:
            metrics[metric_name] = value
    return metrics


def _rep_unit(metric: Any) -> str:
    try:
        return str(metric.unit() or "").strip()
    except Exception:  # a damaged report's unit: the wider limit then holds
        return ""


def _memory_side(metrics: dict[str, Value]) -> bool:
    """Whether a launch's memory level may be asked for: one unit from 60 % on and memory SOL at most 10 points
    behind compute SOL, the launches NVIDIA's thresholds class memory_bound or balanced. Reading the breakdown
    of every launch would cost a report reader more than the rest of its figures; a launch outside these (under
    other thresholds) has its level from the SOL section's L1/TEX, L2 and DRAM throughputs."""
    memory, compute = metrics.get(MEMORY_SOL), metrics.get(COMPUTE_SOL)
    if not isinstance(memory, float) or not math.isfinite(memory):
        return False
    if not isinstance(compute, float) or not math.isfinite(compute):
        return memory >= 60
    return max(memory, compute) >= 60 and memory >= compute - 10


def _rep_breakdown(action: Any) -> dict[str, float]:
    """The unit metrics memory SOL is the maximum of (NVIDIA's `breakdown:` list), where the report has them."""
    breakdown: dict[str, float] = {}
    try:
        listed = action.metric_by_name(BREAKDOWN)
        if listed is None or listed.kind() != listed.ValueKind_STRING:
            return {}
        for metric_name in str(listed.as_string() or "").split(","):
            metric = action.metric_by_name(metric_name.strip()) if metric_name.strip() else None
            if metric is not None and metric.has_value() and metric.kind() != metric.ValueKind_STRING:
                value = float(metric.as_double())
                if math.isfinite(value) and value >= 0:
                    breakdown[metric_name.strip()] = value
    except Exception:  # a damaged report's breakdown: the level then comes from the SOL figures
        return {}
    return breakdown


@contextmanager
def _native_stderr() -> Iterator[list[str]]:
    """Hold what native code writes to file descriptor 2 meanwhile; yields its log messages once the block ends.

    ncu_report's protobuf layer logs parse errors of a damaged report there (`E0000 ... ] Can't parse
    message ...`): they belong in the one line that says the report is damaged, not on the terminal.
    """
    said: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 to take over
        yield said
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", errors="replace")
            said.extend(match[1].strip() for match in re.finditer(r"^[EWF]\d{4} [^\]\n]*\] (.+)$", text, re.M))


def _rep_value(metric: Any) -> Value | None:
    kind = metric.kind()
    if kind == metric.ValueKind_STRING:
        text = metric.as_string()
        return None if text is None else _text(str(text))
    if kind in (metric.ValueKind_UINT32, metric.ValueKind_UINT64):
        return float(metric.as_uint64())
    return float(metric.as_double())


# --- CSV ---------------------------------------------------------------------------------------------
def _split_preamble(text: str) -> tuple[list[str], str]:
    """(lines before the CSV header, the CSV from its header on)."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    for index, line in enumerate(lines):
        stripped = line.lstrip("\ufeff").lstrip()
        if stripped.startswith('"ID",') or stripped.startswith("ID,"):
            return [ln.rstrip("\r\n") for ln in lines[:index]], "".join(lines[index:])
    return [ln.rstrip("\r\n") for ln in lines], ""


def _csv_report(path: Path, preamble: list[str], body: str) -> NcuReport:
    """The launches of a CSV export from its header row on; warnings for rows cut short or texts for numbers."""
    try:
        rows = list(csv.reader(io.StringIO(body)))
    except csv.Error as exc:
        raise UserError(f"report {path} is not a readable ncu CSV export: {exc}") from None
    header, rows = rows[0], rows[1:]
    notes = [ln for ln in preamble if ln.startswith("==")]
    cut = _cut_off(body) or (not rows and not body.endswith(("\n", "\r")))  # ncu ends its header with one too
    if rows and cut:
        notes.append(f"warning: {path.name}: its last row is cut off (the file ends inside it); left out")
        rows = rows[:-1]
    warnings = Warnings(path.name)
    if "Metric Name" in header and "Metric Value" in header:
        kernels = _details(header, rows, warnings)
        layout = "csv-details"
    else:
        kernels = _raw(header, rows, warnings)
        layout = "csv-raw"
    warnings.into(notes)
    if not kernels and cut:
        where = "its header row" if len(rows) == 0 and not body.rstrip("\r\n").count("\n") else "its first kernel row"
        raise UserError(
            f"report {path} is cut: the file ends inside {where}, before any whole kernel row; "
            "export it again (ncu --import REPORT --csv --page details > FILE)"
        )
    if not kernels and warnings.short_rows:
        raise UserError(
            f"report {path} is cut or damaged: none of its {len(rows)} kernel rows is whole "
            f"({warnings.short_rows[0].split(': ', 2)[-1].removesuffix('; left out')}); export it again"
        )
    if not kernels:
        raise UserError(f"report {path} has a CSV header but no kernel rows; no kernels were profiled")
    profiled = sum(ln.startswith("==PROF== Profiling ") for ln in preamble)
    read = len(kernels)
    lost = cut or bool(warnings.short_rows) or profiled > read
    return NcuReport(
        path=str(path),
        format=layout,
        kernels=kernels,
        notes=notes,
        cut=Cut(read, profiled if profiled > read else None) if lost else None,
    )


def _cut_off(body: str) -> bool:
    """ncu quotes every cell and ends every row with a newline: a last line without either was cut."""
    if body.endswith(("\n", "\r")):
        return False
    last = body.rsplit("\n", 1)[-1].rstrip()
    return not (last.endswith('"') and last.count('"') % 2 == 0)  # ends on a closing quote


def _needed(col: dict[str, int], names: tuple[str, ...], more: tuple[int, ...] = ()) -> int:
    """Cells a row must have to hold the columns read (newer ncu leaves the rule columns off metric rows)."""
    return 1 + max([col[name] for name in names if name in col] + list(more), default=0)


_DETAIL_COLUMNS = ("ID", "Kernel Name", "Device", "CC", "Metric Name", "Metric Unit", "Metric Value")


def _details(header: list[str], rows: list[list[str]], warnings: Warnings) -> list[KernelResult]:
    col = {name: index for index, name in enumerate(header)}
    needed = _needed(col, _DETAIL_COLUMNS)
    wanted = set(WANTED)
    launches: dict[str, Launch] = {}
    for number, row in enumerate(rows, start=1):
        if len(row) < needed:
            warnings.short(number, row, needed)
            continue
        kernel_id = row[col["ID"]]
        launch = launches.get(kernel_id)
        if launch is None:
            result = KernelResult(
                index=len(launches), id=kernel_id, name=row[col.get("Kernel Name", 0)], device=_csv_device(row, col)
            )
            launch = launches[kernel_id] = Launch(result, warnings)
        rule = from_csv_row(row, col)
        if rule is not None:
            launch.kernel.rules.append(rule)
        name = row[col["Metric Name"]]
        unit = row[col["Metric Unit"]] if "Metric Unit" in col else ""
        exact = name in wanted
        metric = name if exact else display_metric(name, unit)
        if metric is None:
            continue
        value = warnings.checked(kernel_id, metric, row[col["Metric Value"]], unit, name)
        if value is not None:
            section = row[col["Section Name"]] if "Section Name" in col else ""
            launch.put(metric, value, (section, name), exact)
    for launch in launches.values():
        display = launch.kernel.metrics.get("device__attribute_display_name")
        if display is not None:
            launch.kernel.device = str(display)
    return [launch.kernel for launch in launches.values()]


def _csv_device(row: list[str], col: dict[str, int]) -> str:
    device = f"device {row[col['Device']]}" if "Device" in col else "unknown device"
    if "CC" in col and row[col["CC"]]:
        device += f" (CC {row[col['CC']]})"
    return device


def _raw(header: list[str], rows: list[list[str]], warnings: Warnings) -> list[KernelResult]:
    col = {name: index for index, name in enumerate(header)}
    units = [""] * len(header)
    if rows and "ID" in col and len(rows[0]) > col["ID"] and rows[0][col["ID"]] == "":
        units = rows[0] + [""] * (len(header) - len(rows[0]))
        rows = rows[1:]
    columns: dict[str, list[int]] = {}
    for index, name in enumerate(header):
        columns.setdefault(name, []).append(index)
    wanted = [(name, columns[name]) for name in WANTED if name in columns]
    twice = [name for name, indices in wanted if len(indices) > 1]
    if twice:
        warnings.duplicates.append(
            f"warning: {warnings.name}: column{'s' if len(twice) > 1 else ''} {', '.join(twice)} appear more than "
            "once; a launch whose copies disagree has it left out"
        )
    needed = _needed(col, ("ID", "Kernel Name", "Device"), tuple(i for _, indices in wanted for i in indices))
    kernels: list[KernelResult] = []
    for number, row in enumerate(rows, start=1):
        if len(row) < needed:
            warnings.short(number, row, needed)
            continue
        kernel_id = row[col["ID"]] if "ID" in col else str(len(kernels))
        metrics: dict[str, Value] = {}
        for name, indices in wanted:
            values = [warnings.checked(kernel_id, name, row[index], units[index]) for index in indices]
            present = [value for value in values if value is not None]
            if not present:
                continue
            if all(agree(present[0], value) for value in present[1:]):
                metrics[name] = present[0]
            else:
                warnings.duplicates.append(
                    f"warning: {warnings.name}: {name} of launch {kernel_id} is given {len(present)} times with "
                    f"different values ({', '.join(repr(v) for v in present)}); left out (none is chosen)"
                )
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
                id=kernel_id,
                name=row[col["Kernel Name"]] if "Kernel Name" in col else "?",
                device=device,
                metrics=metrics,
            )
        )
    return kernels
