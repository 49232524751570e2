"""What every `make perf` row shares: quick settings, a verdict against the row's target, and the
summary line `scripts/perf.py` collects.

A row is a ratio (or a count) with a target such as ">= 2" or "<= 1.01". Its verdict:
- PASS: the figure meets the target, and where the row has per-round samples, the whole 95 %
  bootstrap interval of their median does (scipy.stats.bootstrap, fixed seed);
- FAIL: the figure misses it, and so does the whole interval;
- NOISY: the interval straddles the target: on a shared machine this run could not tell.
- SKIP: the row could not be measured here (its reason says why).

`scripts/perf.py` sets FLEETBENCH_PERF_QUICK=1 (fewer rounds: `make perf` fits in about ten minutes)
and FLEETBENCH_PERF_SUMMARY=FILE, where each row appends one JSON line.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

QUICK = os.environ.get("FLEETBENCH_PERF_QUICK") == "1"
SUMMARY_ENV = "FLEETBENCH_PERF_SUMMARY"
VERDICTS = ("PASS", "FAIL", "NOISY", "SKIP")


def rounds(full: int, quick: int) -> int:
    """The round count of a row: `quick` under `make perf`, `full` when the script runs alone."""
    return quick if QUICK else full


@dataclass(frozen=True)
class Target:
    """A bound on a row's figure: `op` is '>=' or '<=' (between two bounds: two targets)."""

    op: str
    bound: float

    def met(self, value: float) -> bool:
        """Whether `value` meets this bound."""
        return value >= self.bound if self.op == ">=" else value <= self.bound

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


def parse_target(text: str) -> list[Target]:
    """'>= 2', '<= 1.01' or '0.9-1.1' (both bounds) as targets."""
    text = text.strip()
    if text.startswith((">=", "<=")):
        return [Target(text[:2], float(text[2:]))]
    low, high = text.split("-", 1)
    return [Target(">=", float(low)), Target("<=", float(high))]


def median_interval(samples: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of the samples' median; None with fewer than 3 samples."""
    finite = [s for s in samples if math.isfinite(s)]
    if len(finite) < 3 or len(set(finite)) == 1:
        return (finite[0], finite[0]) if finite and len(set(finite)) == 1 else None
    from scipy.stats import bootstrap

    result = bootstrap(
        (finite,),
        statistics.median,
        confidence_level=confidence,
        n_resamples=2000,
        method="percentile",
        vectorized=False,
        random_state=0,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def verdict(value: float, target: str, samples: list[float] | None = None) -> tuple[str, tuple[float, float] | None]:
    """PASS, FAIL or NOISY for `value` against `target`, and the interval it was judged on."""
    bounds = parse_target(target)
    interval = median_interval(samples) if samples else None
    if interval is None:
        return ("PASS" if all(b.met(value) for b in bounds) else "FAIL"), None
    low, high = interval
    if all(b.met(low) and b.met(high) for b in bounds):
        return "PASS", interval
    if any(not b.met(low) and not b.met(high) for b in bounds):
        return "FAIL", interval
    return "NOISY", interval


@dataclass
class Row:
    """One row of `make perf`: what was measured, against what, and the verdict."""

    row: str
    value: float | None
    target: str
    verdict: str
    detail: str = ""
    interval: tuple[float, float] | None = None
    samples: list[float] = field(default_factory=list)


def judged(row: str, value: float, target: str, detail: str = "", samples: list[float] | None = None) -> Row:
    """A row judged against its target (see the module's docstring for the verdicts)."""
    decided, interval = verdict(value, target, samples)
    return Row(row, value, target, decided, detail, interval, list(samples or []))


def skipped(row: str, target: str, reason: str) -> Row:
    """A row that could not be measured here, with the reason."""
    return Row(row, None, target, "SKIP", reason)


def emit(row: Row) -> Row:
    """Append the row to the summary `scripts/perf.py` collects (when it runs the script)."""
    path = os.environ.get(SUMMARY_ENV)
    if path:
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(row)) + "\n")
    return row


def read_summary(path: Path) -> list[Row]:
    """The rows a run of the perf scripts appended to `path`."""
    rows: list[Row] = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        data = json.loads(line)
        interval = data.get("interval")
        rows.append(
            Row(
                data["row"],
                data["value"],
                data["target"],
                data["verdict"],
                data.get("detail", ""),
                tuple(interval) if interval else None,
                data.get("samples", []),
            )
        )
    return rows
