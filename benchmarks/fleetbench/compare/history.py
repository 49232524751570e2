"""A headline metric over the stored runs and baselines, and the steps in it (change-point detection).

Every run folder under the results root and every baseline is read; of each, the successful rank-0
records that hold the metric give one point per figure (its labels: kernel, size, dtype ...): the
median of the figure's samples (its value without), at the record's start time, with its run id and
commit. A run kept both as a folder and in a baseline counts once. A damaged run folder or baseline
is named in a warning and left out; it never stops the others.

Steps are found the way asv finds them, as a piecewise-constant fit with a penalty per step, here by
ruptures' PELT with the L1 cost (a median per segment: one slow process is not a step) on the log of
the values (a step is a ratio, whatever the unit). The penalty is `penalty` x sigma x ln(n), sigma
being the robust noise of the series (1.4826 x MAD of successive differences / sqrt 2): on a series
of pure noise with 5 % spread it flags a step in under 1 % of series of 30 points, and finds a 10 %
step in the middle of one about 3 times in 4 (measured on simulated series). A step needs two points
on each side.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from fleetbench.compare.baselines import scan_baselines
from fleetbench.compare.validity import ACCEPTED, bad_value, figure_name
from fleetbench.errors import UserError
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import list_runs, read_records

MIN_SIZE = 2  # points on each side of a step
MAD_TO_SIGMA = 1.4826

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Point:
    """One figure of one run: when, which run and commit, the value, and where it was read."""

    time: datetime
    run_id: str
    commit: str
    value: float
    source: str  # "run" or "baseline NAME"


@dataclass
class Series:
    """A metric's figure with one set of labels, over time."""

    benchmark: str
    metric: str
    labels: dict[str, str]
    points: list[Point] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    """A change point: the first run after the step, the medians before and after, the change."""

    index: int  # of the first point after the step
    run_id: str
    commit: str
    time: datetime
    before: float
    after: float

    @property
    def change_pct(self) -> float:
        """(after - before) / before in percent."""
        return (self.after / self.before - 1.0) * 100.0 if self.before else math.inf


@dataclass(frozen=True)
class Found:
    """What history read: the series, and the warnings about what it could not read."""

    series: list[Series]
    warnings: list[str]


def _figure_value(figure: HeadlineFigure) -> float:
    import numpy as np

    samples = figure.samples or [figure.value]
    scale = max(abs(s) for s in samples) or 1.0
    return float(np.median(np.asarray(samples) / scale)) * scale


def _usable(value: float) -> bool:
    return math.isfinite(value) and value > 0  # log scale: a zero has no place on it


def _sources(results_root: Path, warnings: list[str]) -> Iterator[tuple[str, list[ResultRecord]]]:
    """(source, records) of every readable run folder, then every readable baseline."""
    for folder in reversed(list_runs(results_root)):
        try:
            yield "run", read_records(folder)
        except UserError as exc:
            warnings.append(f"left out: {exc}")
    for name, baseline in scan_baselines(results_root):
        if isinstance(baseline, str):
            warnings.append(f"left out: {baseline}")
            continue
        yield f"baseline {name}", baseline.records


def collect(results_root: Path, metric: str, benchmark: str | None, labels: dict[str, str]) -> Found:
    """Every series of `metric` (narrowed to `benchmark` and `labels`) under the results root, oldest first."""
    warnings: list[str] = []
    left_out: list[str] = []
    series: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
    seen: set[tuple[str, str, tuple[tuple[str, str], ...], str]] = set()
    for source, records in _sources(results_root, warnings):
        for record in records:
            if record.status != "ok" or record.rank != 0 or (benchmark and record.benchmark != benchmark):
                continue
            for figure in record.headline:
                if figure.metric != metric or any(figure.labels.get(k) != v for k, v in labels.items()):
                    continue
                bad = bad_value(figure)
                if bad is not None:  # no measurement (NaN, inf, negative, beyond MAX_FIGURE): said, left out
                    left_out.append(f"run {record.run_id} {figure_name(record.benchmark, figure)} = {bad[0]!r}{bad[1]}")
                    continue
                key = (record.benchmark, tuple(sorted(figure.labels.items())))
                once = (record.run_id, record.start.isoformat(), key[1], record.benchmark)
                value = _figure_value(figure)
                if once in seen or not _usable(value):
                    continue
                seen.add(once)
                entry = series.setdefault(key, Series(record.benchmark, metric, dict(figure.labels)))
                entry.points.append(Point(record.start, record.run_id, record.git_revision, value, source))
    if left_out:
        warnings.append(
            f"left out {len(left_out)} figure(s) that are no measurement (accepted: {ACCEPTED}), e.g. {left_out[0]}"
        )
    for entry in series.values():
        entry.points.sort(key=lambda p: p.time)
    return Found(sorted(series.values(), key=lambda s: (s.benchmark, sorted(s.labels.items()))), warnings)


def noise_sigma(logs: list[float]) -> float:
    """The robust noise of a series of logs: 1.4826 x MAD of successive differences / sqrt 2."""
    import numpy as np

    diffs = np.diff(np.asarray(logs))
    if len(diffs) == 0:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2.0))


def steps(series: Series, penalty: float = 2.0) -> list[Step]:
    """The change points of a series (see the module docstring); none in fewer than 2 x MIN_SIZE points."""
    import numpy as np
    import ruptures

    values = [p.value for p in series.points]
    if len(values) < 2 * MIN_SIZE:
        return []
    logs = [math.log(v) for v in values]
    # A floor on sigma: a perfectly flat series must not turn every rounding difference into a step.
    sigma = max(noise_sigma(logs), 1e-4)
    signal = np.asarray(logs).reshape(-1, 1)
    ends = (
        ruptures.Pelt(model="l1", min_size=MIN_SIZE, jump=1)
        .fit(signal)
        .predict(pen=penalty * sigma * math.log(len(logs)))
    )
    bounds = [0, *ends]
    found = []
    for start, cut, stop in zip(bounds, bounds[1:], bounds[2:], strict=False):
        point = series.points[cut]
        before, after = float(np.median(values[start:cut])), float(np.median(values[cut:stop]))
        found.append(Step(cut, point.run_id, point.commit, point.time, before, after))
    return found
