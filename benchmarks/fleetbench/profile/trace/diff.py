"""`fleetbench trace diff A B`: which kernels and CPU ops were added, removed or changed between two traces.

HTA's TraceDiff (hta/trace_diff.py, `compare_traces`) counts each op and kernel name in two traces
and the total of their durations, and lists the names only one side has. Here each side is a trace,
a folder of rank traces, or a run folder whose `profile/` holds them (the rank traces of a side
are added up); both are read over the same window (`steps`, HTA's default, or `trace`). A row is:
  - added:   the name occurs in B only;
  - removed: in A only;
  - changed: in both, with a different count or total time;
  - same:    equal count and time (left out of the table, counted in the totals).
Kernel time is device time; op time is inclusive (nested ops count in their parents too, as in
HTA). Rows are ranked by the size of their time change, largest first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.profile.names import label, short_name
from fleetbench.profile.trace.load import US, find_traces, read_events
from fleetbench.profile.trace.windows import choose_window

KINDS = ("kernel", "op")


@dataclass
class Side:
    """One side of a diff: its traces and, per kind and name, launches or calls and total seconds."""

    paths: list[str]
    steps: int = 0  # ProfilerSteps inside the window, over all its traces
    totals: dict[str, dict[str, list[float]]] = field(default_factory=lambda: {k: {} for k in KINDS})


@dataclass
class DiffRow:
    """One name's change from A to B."""

    kind: str  # kernel or op
    name: str
    short: str
    status: str  # added, removed, changed
    count_a: int
    count_b: int
    time_a_s: float
    time_b_s: float

    @property
    def delta_s(self) -> float:
        """B's total time minus A's."""
        return self.time_b_s - self.time_a_s


@dataclass
class TraceDiff:
    """The rows that changed, largest time change first, and what each side held."""

    window: str
    a: Side
    b: Side
    rows: list[DiffRow]
    unchanged: dict[str, int]  # kind -> names with equal count and time

    def totals(self, kind: str) -> tuple[float, float]:
        """Total seconds of `kind` on side A and side B."""
        return (
            sum(t for _, t in self.a.totals[kind].values()),
            sum(t for _, t in self.b.totals[kind].values()),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with each row's delta."""
        rows = []
        for row in self.rows:
            raw = asdict(row)
            raw["delta_s"] = row.delta_s
            rows.append(raw)
        return {
            "window": self.window,
            "a": {"paths": self.a.paths, "steps": self.a.steps},
            "b": {"paths": self.b.paths, "steps": self.b.steps},
            "totals_s": {kind: dict(zip(("a", "b"), self.totals(kind), strict=True)) for kind in KINDS},
            "unchanged": self.unchanged,
            "rows": rows,
        }

    def to_json(self) -> str:
        """Strict JSON text."""
        return jsonio.dumps(self.to_dict(), indent=1)


def side_traces(path: Path) -> list[Path]:
    """The trace files of one side: a trace, a folder of them, or a run folder with `profile/`."""
    profile = path / "profile"
    if path.is_dir() and profile.is_dir():
        try:
            return find_traces([path])
        except UserError:
            return find_traces([profile])
    return find_traces([path])


def read_side(path: Path, window: str) -> Side:
    """Counts and times per kernel and op name over the window, summed over the side's traces."""
    files = side_traces(path)
    side = Side([str(f) for f in files])
    totals: dict[str, dict[str, list[float]]] = {kind: defaultdict(lambda: [0, 0.0]) for kind in KINDS}
    for file in files:
        events = read_events(file)
        chosen = choose_window(events.steps, window)
        side.steps += len(chosen.steps)
        for e in events.device:
            if chosen.holds_device(e):
                row = totals["kernel"][e.name]
                row[0] += 1
                row[1] += (e.end - e.start) * US
        for op in events.cpu_ops:
            if chosen.holds(op.start):
                row = totals["op"][op.name]
                row[0] += 1
                row[1] += (op.end - op.start) * US
    side.totals = {kind: dict(names) for kind, names in totals.items()}
    return side


def compare_sides(a: Side, b: Side, window: str) -> TraceDiff:
    """Every name whose count or time differs between the sides, largest time change first."""
    rows: list[DiffRow] = []
    unchanged = dict.fromkeys(KINDS, 0)
    for kind in KINDS:
        ours, theirs = a.totals[kind], b.totals[kind]
        for name in ours.keys() | theirs.keys():
            count_a, time_a = ours.get(name, (0, 0.0))
            count_b, time_b = theirs.get(name, (0, 0.0))
            if name not in theirs:
                status = "removed"
            elif name not in ours:
                status = "added"
            elif count_a != count_b or time_a != time_b:
                status = "changed"
            else:
                unchanged[kind] += 1
                continue
            rows.append(DiffRow(kind, name, short_name(name), status, int(count_a), int(count_b), time_a, time_b))
    rows.sort(key=lambda r: (-abs(r.delta_s), r.kind, r.name))
    _unique_shorts(rows)
    return TraceDiff(window, a, b, rows, unchanged)


def _unique_shorts(rows: list[DiffRow]) -> None:
    """Two names of one short form print as their labels (short form and a hash of the name)."""
    names: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        names[(row.kind, row.short)].add(row.name)
    for row in rows:
        if len(names[(row.kind, row.short)]) > 1:
            row.short = label(row.name)


def diff_traces(a: Path, b: Path, window: str = "steps") -> TraceDiff:
    """The diff of side `a` against side `b`; UserError when either is no trace, folder of traces or run."""
    return compare_sides(read_side(a, window), read_side(b, window), window)
