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

Rows become the metrics of `WANTED` (readers.py) through their display names (`DISPLAY`), with the
unit the table prints converted to ncu's base unit; a row whose unit is not the one its metric has
(Memory Workload Analysis prints a "Memory Throughput" in byte/second beside the speed-of-light's %)
is some other figure and is not taken. A row named by an ncu metric itself (`ncu --metrics ...`,
"Command line profiler metrics") is taken when the metric is in WANTED. `n/a` is absent, `nan` is
ncu's "failed to measure" (readers.parse_value). The console names no rule identifiers: each
paragraph becomes a RuleResult whose rule and section are the section's title. "Est. Speedup" is
ncu's global estimate, "Est. Local Speedup" the one within the rule's own scope.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.profile.ncu.readers import WANTED, KernelResult, NcuReport, Value, normalise_unit, parse_value
from fleetbench.profile.ncu.rules import RuleResult

COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_HZ = "dram__cycles_elapsed.avg.per_second"

# Display name -> (ncu metric, the base unit its value must have: "%", "ns", "hz", "" for a count).
DISPLAY: dict[str, tuple[str, str]] = {
    "Duration": ("gpu__time_duration.sum", "ns"),
    "Compute (SM) Throughput": (COMPUTE_SOL, "%"),
    "Compute (SM) [%]": (COMPUTE_SOL, "%"),  # ncu 2021-2022
    "SM [%]": (COMPUTE_SOL, "%"),  # ncu 2019-2020
    "Memory Throughput": (MEMORY_SOL, "%"),  # the same label in byte/second is another figure
    "Memory [%]": (MEMORY_SOL, "%"),
    "DRAM Throughput": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "L1/TEX Cache Throughput": ("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
    "L2 Cache Throughput": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "SM Frequency": ("sm__cycles_elapsed.avg.per_second", "hz"),
    "DRAM Frequency": (DRAM_HZ, "hz"),
    "Memory Frequency": (DRAM_HZ, "hz"),  # ncu 2019-2020
    "Grid Size": ("launch__grid_size", ""),
    "Block Size": ("launch__block_size", ""),
}
assert {metric for metric, _ in DISPLAY.values()} <= set(WANTED)
_TEXT_METRICS = {"device__attribute_display_name"}

_NCU_LINE = re.compile(r"^==[A-Z]+==")
_PROCESS = re.compile(r"^\[\d+\] \S.*@\S+$")
_KERNEL = re.compile(r"^(?P<indent>\s*)(?P<head>\S.*?), Context \d+, Stream \d+(?P<rest>.*)$")
_DEVICE = re.compile(r"Device (\d+)")
_CC = re.compile(r"CC (\d+\.\d+)")
_LAUNCH = re.compile(r"\s*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)$")  # " (grid)x(block)"
_STAMP = re.compile(r", \d{4}-\w{3}-\d{2} \d{2}:\d{2}:\d{2}$")  # ", 2022-Jun-02 19:46:33"
_SECTION = re.compile(r"^\s*Section: (?P<title>\S.*?)\s*$")
_RULE = re.compile(r"^(?P<indent>\s*)(?P<kind>OPT|INF|WRN|ERR)(?:\s{2,}(?P<text>.*?))?\s*$")
_SPEEDUP = re.compile(r"^Est\. (?:(?P<scope>Local|Global) )?Speedup: (?P<pct>[0-9.]+)%\s*(?P<rest>.*)$")
_DASHES = re.compile(r"^\s*-{3,}(\s+-+)*\s*$")
_MARKER = re.compile(r", Context \d+, Stream \d+|^\s*Section: \S", re.MULTILINE)


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
    parser = _Parser(path.name)
    for line in text.splitlines():
        parser.feed(line)
    parser.end_rule()
    if not parser.kernels:
        raise UserError(
            f"report {path} holds no kernel data: it looks like ncu's console output but has no launch line "
            "('NAME (GRID)x(BLOCK), Context N, Stream N, ...'), so it was cut before ncu printed its results; "
            "capture again, e.g. fleetbench ncu run -- PROGRAM"
        )
    return NcuReport(path=str(path), format="console", kernels=parser.kernels, notes=parser.notes)


def _row(text: str) -> tuple[str, str, str] | None:
    """(name, unit, value) of a table row `Name   Unit   Value`; None for a line that is not one."""
    head, _, value = text.strip().rpartition(" ")
    parts = re.split(r"\s{2,}", head.strip())
    if not head.strip() or len(parts) > 2:
        return None
    if len(parts) == 2:
        return parts[0], parts[1], value
    name = parts[0]
    if name not in DISPLAY and " " in name:  # a full name column leaves one space before the unit
        shorter, unit = name.rsplit(" ", 1)
        if shorter in DISPLAY:
            return shorter, unit, value
    return name, "", value


def _metric_of(name: str, unit: str) -> str | None:
    """The WANTED metric a row holds: by display name when its unit is the metric's, or by the metric's own name."""
    if name in DISPLAY:
        metric, base = DISPLAY[name]
        return metric if normalise_unit(unit)[1] == base else None
    return name if name in WANTED else None


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
    kernels: list[KernelResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    kernel: KernelResult | None = None
    section: str = ""
    rule: _Rule | None = None

    def feed(self, line: str) -> None:
        """Take one line of the console output."""
        if _NCU_LINE.match(line.lstrip()):
            self.end_rule()
            self.notes.append(line.strip())
        elif _PROCESS.match(line.strip()):
            self.end_rule()
            self.kernel = None
        elif (launch := _KERNEL.match(line)) is not None:
            self.start_kernel(launch)
        elif self.kernel is None:
            return  # the program's output
        elif (section := _SECTION.match(line)) is not None:
            self.end_rule()
            self.section = section["title"]
        elif (rule := _RULE.match(line)) is not None:
            self.start_rule(rule)
        else:
            self.other(line)

    def other(self, line: str) -> None:
        """A rule's continuation, a separator, a table row, or the program's output inside a launch."""
        if not line.strip() or _DASHES.match(line):
            self.end_rule()
        elif self.rule is not None and len(line) - len(line.lstrip()) > self.rule.indent:
            self.rule.lines.append(line.strip())
        else:
            self.end_rule()
            self.table_row(line)

    def start_kernel(self, launch: re.Match[str]) -> None:
        """A launch line: its name (without the launch shape or time stamp) and its device."""
        self.end_rule()
        name = _STAMP.sub("", _LAUNCH.sub("", launch["head"]))
        device, cc = _DEVICE.search(launch["rest"]), _CC.search(launch["rest"])
        where = f"device {device[1]}" if device else "unknown device"
        if cc:
            where += f" (CC {cc[1]})"
        index = len(self.kernels)
        self.kernel = KernelResult(index=index, id=str(index), name=name.strip(), device=where)
        self.kernels.append(self.kernel)
        self.section = ""

    def start_rule(self, match: re.Match[str]) -> None:
        """`OPT   Est. Speedup: 13.41%` or `INF   first line of the message`."""
        self.end_rule()
        self.rule = _Rule(indent=len(match["indent"]), kind=match["kind"], section=self.section)
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
        """A row of a section's table, kept when it holds a WANTED metric the launch does not have yet."""
        assert self.kernel is not None
        row = _row(line)
        if row is None:
            return
        name, unit, text = row
        metric = _metric_of(name, unit)
        if metric is None or metric in self.kernel.metrics:
            return
        value: Value | None = parse_value(text, unit)
        if isinstance(value, str) and metric not in _TEXT_METRICS:
            self.notes.append(
                f"warning: {self.name}: {name} of launch {self.kernel.id} ({self.kernel.name}) is {text!r}, "
                "not a number; left out"
            )
        elif value is not None:
            self.kernel.metrics[metric] = value
