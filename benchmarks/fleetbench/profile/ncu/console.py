"""Read Nsight Compute's console output: what `ncu ./app` (any `--set`/`--section`) prints, or a log of it.

The layout every ncu version since 2019 prints:
  ==PROF== ... / ==WARNING== ... / ==ERROR== ...   ncu's own messages; kept in NcuReport.notes
  anything else                                    the program's output; skipped
  [pid] process@host                               one per profiled process
    name (grid)x(block), Context N, Stream N, Device N, CC x.y      one launch; older versions print
    name, YYYY-Mon-DD hh:mm:ss, Context N, Stream N                  the second form (no device)
      Section: <title>                             then a table of rows `Name  Unit  Value` between
                                                   dashed rules (the unit may be empty; older
                                                   versions print no `Metric Name` header)
      OPT|INF|WRN|ERR  [Est. Speedup: X%]          NVIDIA's guided analysis: the first line, then the
                       message ...                 message on deeper-indented lines; `----- ---`
                                                   separates two results of one section

The summaries `--print-summary per-kernel` and `per-gpu` print, instead of each launch, one entry per
kernel and launch shape with the minimum, maximum and average of its invocations:
  NAME (GRID)x(BLOCK), Device N, CC x.y, Invocations K      per-kernel
  Device N, CC x.y                                          per-gpu: a device line, then under it
    NAME (GRID)x(BLOCK), Invocations K                      one line per kernel
      Section: <title>                                      tables `Name  Unit  Minimum Maximum Average`
Each entry becomes one KernelResult standing for its K invocations (`invocations`) with the
averages as its figures (format `console-summary`); such a summary prints no rule results.

Rows become the metrics of `WANTED` (model.py) through their display names (model.DISPLAY), with
the unit the table prints converted to ncu's base unit; a row whose unit is not the one its metric
has is some other figure ("Memory Throughput" in byte/second, Memory Workload Analysis', is the
DRAM bytes per second, in % the speed-of-light's memory SOL). A row named by an ncu metric itself
(`ncu --metrics ...`, "Command line profiler metrics") is taken when the metric is in WANTED. `n/a`
is absent, `nan` is ncu's "failed to measure" (model.parse_value); a text where a number belongs,
a negative figure and a metric given twice with two values are left out with a warning. The console
names no rule identifiers: each paragraph becomes a RuleResult whose rule and section are the
section's title. "Est. Speedup" is ncu's global estimate, "Est. Local Speedup" the one within the
rule's own scope.

A log cut short says so in a warning, and what it holds is still read: a table open at the end of the
file, fewer launches than ncu's `==PROF== Profiling` lines announced, or a process ncu connected to
and never disconnected from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.profile.ncu.model import (
    COMPUTE_SOL,
    DISPLAY,
    DRAM_HZ,
    MEMORY_SOL,
    WANTED,
    Cut,
    KernelResult,
    Launch,
    NcuReport,
    Warnings,
    display_metric,
)
from fleetbench.profile.ncu.rules import RuleResult

__all__ = ["COMPUTE_SOL", "DISPLAY", "DRAM_HZ", "MEMORY_SOL", "looks_like_console", "parse_console"]
assert {metric for choices in DISPLAY.values() for metric, _ in choices} <= set(WANTED)

_NCU_LINE = re.compile(r"^==[A-Z]+==")
_PROCESS = re.compile(r"^\[\d+\] \S.*@\S+$")
_KERNEL = re.compile(r"^(?P<indent>\s*)(?P<head>\S.*?), Context \d+, Stream \d+(?P<rest>.*)$")
# --print-summary: "NAME (GRID)x(BLOCK)[, Device N, CC x.y], Invocations K" and, per-gpu, "Device N, CC x.y"
_SUMMARY = re.compile(
    r"^(?P<indent>\s*)(?P<head>\S.*?)(?P<rest>(?:, Device \d+)?(?:, CC \d+\.\d+)?), Invocations (?P<n>\d+)\s*$"
)
_GPU = re.compile(r"^\s*Device (?P<device>\d+), CC (?P<cc>\d+\.\d+)\s*$")
_PROFILING = re.compile(r"^==PROF== Profiling ")
_DEVICE = re.compile(r"Device (\d+)")
_CC = re.compile(r"CC (\d+\.\d+)")
_LAUNCH = re.compile(r"\s*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)$")  # " (grid)x(block)"
_STAMP = re.compile(r", \d{4}-\w{3}-\d{2} \d{2}:\d{2}:\d{2}$")  # ", 2022-Jun-02 19:46:33"
_SECTION = re.compile(r"^\s*Section: (?P<title>\S.*?)\s*$")
_RULE = re.compile(r"^(?P<indent>\s*)(?P<kind>OPT|INF|WRN|ERR)(?:\s{2,}(?P<text>.*?))?\s*$")
_SPEEDUP = re.compile(r"^Est\. (?:(?P<scope>Local|Global) )?Speedup: (?P<pct>[0-9.]+)%\s*(?P<rest>.*)$")
# The paragraph --print-summary closes with ("Note: The shown averages are calculated as the arithmetic mean
# ..."): ncu's remark on what an average means, not a table row; its continuation lines follow unindented.
_SUMMARY_NOTE = re.compile(r"^\s*Note: ")
_DASHES = re.compile(r"^\s*-{3,}(\s+-+)*\s*$")
_MARKER = re.compile(r", Context \d+, Stream \d+|^\s*Section: \S|, Invocations \d+\s*$", re.MULTILINE)


def looks_like_console(text: str) -> bool:
    """Whether `text` holds ncu console output: a launch line (`..., Context N, Stream N`) or a `Section:`."""
    return _MARKER.search(text) is not None


def read_ncu_console(path: Path) -> NcuReport:
    """Read a file of ncu's console output; UserError when it cannot be read or holds no launch."""
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise UserError(f"report {path} cannot be read: {exc.strerror or exc}") from None
    return parse_console(path, text)


def parse_console(path: Path, text: str) -> NcuReport:
    """The launches, metrics, rule results and ncu messages of console output already read from `path`."""
    parser = _Parser(path.name, Warnings(path.name))
    for line in text.splitlines():
        parser.feed(line)
    parser.end_rule()
    if not parser.kernels:
        raise UserError(
            f"report {path} holds no kernel data: it looks like ncu's console output but has no launch line "
            "('NAME (GRID)x(BLOCK), Context N, Stream N, ...') and no --print-summary entry "
            "('NAME (GRID)x(BLOCK), ..., Invocations N'), so it was cut before ncu printed its results; "
            "capture again, e.g. fleetbench ncu run -- PROGRAM"
        )
    notes = parser.notes
    parser.warnings.into(notes)
    cut_notes = parser.cut(text)
    notes.extend(cut_notes)
    layout = "console-summary" if parser.summary else "console"
    launches = sum(k.invocations for k in parser.kernels)
    cut = Cut(launches, parser.profiled if parser.profiled > launches else None) if cut_notes else None
    return NcuReport(path=str(path), format=layout, kernels=parser.kernels, notes=notes, cut=cut)


def _split_row(text: str, values: int) -> tuple[str, str, list[str]] | None:
    """(name, unit, the last `values` cells) of a table row `Name   Unit   Value...`; None for another line."""
    cells = text.strip().rsplit(None, values)
    if len(cells) != values + 1:
        return None
    head, found = cells[0], cells[1:]
    parts = re.split(r"\s{2,}", head.strip())
    if not head.strip() or len(parts) > 2:
        return None
    if len(parts) == 2:
        return parts[0], parts[1], found
    name = parts[0]
    if name not in DISPLAY and " " in name:  # a full name column leaves one space before the unit
        shorter, unit = name.rsplit(" ", 1)
        if shorter in DISPLAY:
            return shorter, unit, found
    return name, "", found


def _metric_of(name: str, unit: str) -> tuple[str, bool] | None:
    """The WANTED metric a row holds and whether the row names it exactly: by the metric's own name, or by a
    display name in the unit of its metric."""
    if name in WANTED:
        return name, True
    metric = display_metric(name, unit)
    return None if metric is None else (metric, False)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class _Rule:
    """A guided-analysis paragraph being read."""

    indent: int
    kind: str
    section: str
    lines: list[str] = field(default_factory=list)
    speedup_pct: float | None = None
    speedup_type: str | None = None

    def result(self) -> RuleResult:
        message = " ".join(self.lines)
        return RuleResult(self.section, self.section, self.kind, "", message, self.speedup_pct, self.speedup_type)


@dataclass
class _Parser:
    """Reads the console line by line: launches, their sections' rows and rule paragraphs, ncu's messages."""

    name: str
    warnings: Warnings
    kernels: list[KernelResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    launch: Launch | None = None
    section: str = ""
    rule: _Rule | None = None
    summary: bool = False  # --print-summary: entries of K invocations with min/max/average columns
    gpu: str = ""  # per-gpu summary: the device line the entries below belong to
    in_table: bool = False  # a dashed rule was seen in the current section
    dashes: int = 0  # dashed rules in the current section: a table has 3 with a `Metric Name` header, else 2
    header: bool = False  # the current section's table has a `Metric Name` header
    last_row: bool = False  # the last non-blank line was a table row (a table ends with a dashed rule)
    sections: list[list[str]] = field(default_factory=list)  # each launch's section titles, in order
    profiled: int = 0  # launches ncu announced (`==PROF== Profiling "name" - N: ...`)
    connected: int = 0
    disconnected: int = 0

    @property
    def kernel(self) -> KernelResult | None:
        return None if self.launch is None else self.launch.kernel

    def feed(self, line: str) -> None:
        """Take one line of the console output."""
        stripped = line.strip()
        if _NCU_LINE.match(line.lstrip()):
            self.end_rule()
            self.notes.append(stripped)
            self.profiled += bool(_PROFILING.match(stripped))
            self.connected += stripped.startswith("==PROF== Connected to process")
            self.disconnected += stripped.startswith("==PROF== Disconnected from process")
        elif _PROCESS.match(stripped):
            self.end_rule()
            self.launch, self.gpu = None, ""
        elif (launch := _KERNEL.match(line)) is not None:
            self.start_kernel(launch["head"], launch["rest"])
        elif (entry := _SUMMARY.match(line)) is not None:
            self.summary = True
            self.start_kernel(entry["head"], f"{entry['rest']}{self.gpu}", int(entry["n"]))
        elif (gpu := _GPU.match(line)) is not None:
            self.end_rule()
            self.launch, self.gpu = None, f", Device {gpu['device']}, CC {gpu['cc']}"
        elif self.kernel is None:
            return  # the program's output (or the rest of a closing note)
        elif self.summary and self.in_table and not self.last_row and _SUMMARY_NOTE.match(line):
            self.end_rule()  # ncu's closing note of a summary: read as a note, the launch's tables are over
            self.notes.append(f"note: ncu: {line.strip().removeprefix('Note: ')}")
            self.launch = None
        elif (section := _SECTION.match(line)) is not None:
            self.end_rule()
            self.section, self.in_table, self.last_row = section["title"], False, False
            self.dashes, self.header = 0, False
            self.sections[-1].append(self.section)
        elif (rule := _RULE.match(line)) is not None:
            self.start_rule(rule)
        else:
            self.other(line)

    def other(self, line: str) -> None:
        """A rule's continuation, a separator, a table row, or the program's output inside a launch."""
        if _DASHES.match(line):
            self.end_rule()
            self.in_table, self.last_row = True, False
            self.dashes += 1
        elif not line.strip():
            self.end_rule()
        elif self.rule is not None and len(line) - len(line.lstrip()) > self.rule.indent:
            self.rule.lines.append(line.strip())
        else:
            self.end_rule()
            self.last_row = self.in_table
            self.header = self.header or line.split()[:2] == ["Metric", "Name"]
            self.table_row(line)

    def start_kernel(self, head: str, rest: str, invocations: int = 1) -> None:
        """A launch line (or a summary entry): its name (without the launch shape or time stamp) and its device."""
        self.end_rule()
        name = _STAMP.sub("", _LAUNCH.sub("", head))
        device, cc = _DEVICE.search(rest), _CC.search(rest)
        where = f"device {device[1]}" if device else "unknown device"
        if cc:
            where += f" (CC {cc[1]})"
        index = len(self.kernels)
        kernel = KernelResult(index=index, id=str(index), name=name.strip(), device=where, invocations=invocations)
        self.launch = Launch(kernel, self.warnings)
        self.kernels.append(kernel)
        self.sections.append([])
        self.section, self.in_table, self.last_row = "", False, False
        self.dashes, self.header = 0, False

    def start_rule(self, match: re.Match[str]) -> None:
        """`OPT   Est. Speedup: 13.41%` or `INF   first line of the message`."""
        self.end_rule()
        self.rule = _Rule(indent=len(match["indent"]), kind=match["kind"], section=self.section)
        self.last_row = False
        text = match["text"] or ""
        speedup = _SPEEDUP.match(text)
        if speedup is not None and (pct := _number(speedup["pct"])) is not None:
            self.rule.speedup_pct = pct
            self.rule.speedup_type = (speedup["scope"] or "global").lower()
            text = speedup["rest"]
        if text:
            self.rule.lines.append(text)

    def end_rule(self) -> None:
        """The paragraph being read is complete: attach it to its launch."""
        if self.rule is not None and self.kernel is not None:
            self.kernel.rules.append(self.rule.result())
        self.rule = None

    def table_row(self, line: str) -> None:
        """A row of a section's table, kept when it holds a WANTED metric (a summary's: the average)."""
        assert self.launch is not None
        row = _split_row(line, 3) if self.summary else _split_row(line, 1)
        if row is None:
            return
        name, unit, cells = row
        found = _metric_of(name, unit)
        if found is None:
            return
        metric, exact = found
        kernel = self.launch.kernel
        value = self.warnings.checked(f"{kernel.id} ({kernel.name})", metric, cells[-1], unit, name)
        if value is not None:
            self.launch.put(metric, value, (self.section, name), exact)

    def cut(self, text: str) -> list[str]:
        """Warnings that the log was cut short: where, and that what precedes the cut was read."""
        said: list[str] = []
        last = self.kernels[-1]
        unclosed = self.dashes % (3 if self.header else 2) != 0
        if (self.last_row or unclosed) and self.kernel is last:
            said.append(
                f"the table of section {self.section!r} of the last launch ({last.id}, {last.name}) is not closed"
            )
        first, final = self.sections[0], self.sections[-1]
        if len(self.sections) > 1 and len(final) < len(first) and first[: len(final)] == final:
            said.append(f"the last launch ({last.id}) has {len(final)} of the {len(first)} sections the first one has")
        launches = sum(k.invocations for k in self.kernels)
        if self.profiled > launches:
            said.append(f"ncu announced {self.profiled} profiled launches and the log holds {launches}")
        if self.connected > self.disconnected:
            said.append("ncu never printed that the profiled process disconnected")
        if text.rsplit("\n", 1)[-1].strip():  # ncu ends every line it prints
            said.append("the file ends inside a line")
        if not said:
            return []
        return [
            f"warning: {self.name} is cut: {'; '.join(said)}; summarised up to the cut (the last launch may "
            "lack figures); capture again for the whole log"
        ]
