"""A headline metric over the stored runs and baselines, by commit and machine class, and its steps.

Every run folder under the results root and every baseline is read; of each, the successful rank-0
records that hold the metric give one point per figure (its labels: kernel, size, dtype ...): the
median of the figure's samples (its value without), with its run id, commit and machine. A run kept
both as a folder and in a baseline counts once. A damaged run folder or baseline is named in a
warning and left out; it never stops the others.

One series per figure **and machine class** (CPU model, cores, GPU, driver: compare/noise.py's
class): runs of another machine are another series, never a step. Points are ordered by the commit
graph, `git rev-list --topo-order` of the runs' commits in the repository (`--repo`, default the
current folder), the processes of one commit together (both sides of a `compare --rounds` fall into
their commits' groups), by time within a commit. Points whose commit the repository does not hold are
left out with a warning; without a repository the order is the records' time, said in a warning.

Steps are found the way asv finds them: a piecewise-constant fit with a penalty per step, here
ruptures' PELT with the L1 cost (a median per segment: one slow run is not a step) on the log values
(a step is a factor, whatever the unit). The penalty is `penalty` x sigma x ln(n), sigma the robust
noise of the series (1.4826 x MAD of successive differences / sqrt 2), n the points; a step needs
MIN_SIZE points on each side, and is moved to the nearest commit boundary (a commit's processes are
never split). How
often it flags a step in a flat series, and where it puts a real one, is measured by a Monte Carlo
test with a fixed seed (tests/test_compare_round2.py) and stated in docs/compare.md.
"""

from __future__ import annotations

import logging
import math
import subprocess
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
PENALTY = 3.0  # x sigma x ln n per step: the false-step rates of docs/compare.md were measured at it
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
    machine: str = ""  # the machine class in words (compare/noise.py describe_class)


@dataclass
class Series:
    """A metric's figure with one set of labels, over time."""

    benchmark: str
    metric: str
    labels: dict[str, str]
    points: list[Point] = field(default_factory=list)
    machine: str = ""  # the machine class all its points ran on


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


def collect(
    results_root: Path, metric: str, benchmark: str | None, labels: dict[str, str], repo: Path | None = None
) -> Found:
    """Every series of `metric` (narrowed to `benchmark` and `labels`) under the results root, one per
    figure and machine class, in commit order (see the module docstring)."""
    from fleetbench.compare.noise import class_key, describe_class

    warnings: list[str] = []
    left_out: list[str] = []
    series: dict[tuple[str, tuple[tuple[str, str], ...], str], Series] = {}
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
                machine = class_key(record.machine) if record.machine else "unknown"
                key = (record.benchmark, tuple(sorted(figure.labels.items())), machine)
                once = (record.run_id, record.start.isoformat(), key[1], record.benchmark)
                value = _figure_value(figure)
                if once in seen or not _usable(value):
                    continue
                seen.add(once)
                words = describe_class(record.machine) if record.machine else "machine not recorded"
                entry = series.setdefault(key, Series(record.benchmark, metric, dict(figure.labels), machine=words))
                entry.points.append(Point(record.start, record.run_id, record.git_revision, value, source, words))
    if left_out:
        warnings.append(
            f"left out {len(left_out)} figure(s) that are no measurement (accepted: {ACCEPTED}), e.g. {left_out[0]}"
        )
    ordered = [s for s in series.values() if order_by_commits(s, repo, warnings).points]
    return Found(sorted(ordered, key=lambda s: (s.benchmark, sorted(s.labels.items()), s.machine)), warnings)


def plain_commit(commit: str) -> str:
    """A record's commit without the `+dirty` mark."""
    return commit.removesuffix("+dirty")


def topo_order(repo: Path, commits: set[str]) -> dict[str, int] | None:
    """Each of `commits` the repository holds -> its place in `git rev-list --topo-order` (oldest first);
    None when `repo` is no git repository."""
    wanted = sorted(c for c in commits if c)
    try:
        check = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-check"], input="".join(f"{c}\n" for c in wanted),
                               capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        if check.returncode != 0:
            return None
        full = {}
        for commit, line in zip(wanted, check.stdout.splitlines(), strict=False):
            parts = line.split()
            if len(parts) == 3 and parts[1] == "commit":
                full[commit] = parts[0]
        if not full:
            return {}
        listing = subprocess.run(["git", "-C", str(repo), "rev-list", "--topo-order", "--reverse", *sorted(set(full.values()))],
                                 capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if listing.returncode != 0:
        return None
    place = {commit: i for i, commit in enumerate(listing.stdout.split())}
    return {c: place[f] for c, f in full.items() if f in place}


def order_by_commits(series: Series, repo: Path | None, warnings: list[str]) -> Series:
    """The series' points in commit-graph order, each commit's points together by time (in place)."""
    commits = {plain_commit(p.commit) for p in series.points}
    place = topo_order(repo, commits) if repo is not None else None
    name = f"{series.benchmark} {series.metric} {series.labels or ''} on {series.machine}"
    if place is None:
        where = f"{repo} is no git repository" if repo is not None else "no repository given"
        warnings.append(f"{name}: {where}: points ordered by record time, not by commit")
        series.points.sort(key=lambda p: p.time)
        return series
    missing = [p for p in series.points if plain_commit(p.commit) not in place]
    if missing:
        warnings.append(
            f"{name}: left out {len(missing)} run(s) whose commit {repo} does not hold "
            f"(e.g. {missing[0].run_id} at {missing[0].commit[:12] or 'no commit'})"
        )
    kept = [p for p in series.points if plain_commit(p.commit) in place]
    series.points = sorted(kept, key=lambda p: (place[plain_commit(p.commit)], p.time))
    return series


def commit_groups(points: list[Point]) -> list[tuple[int, int]]:
    """(start, stop) indices of each commit's run of consecutive points."""
    groups: list[tuple[int, int]] = []
    for i, point in enumerate(points):
        if groups and plain_commit(points[groups[-1][0]].commit) == plain_commit(point.commit):
            groups[-1] = (groups[-1][0], i + 1)
        else:
            groups.append((i, i + 1))
    return groups


def noise_sigma(logs: list[float]) -> float:
    """The robust noise of a series of logs: 1.4826 x MAD of successive differences / sqrt 2."""
    import numpy as np

    diffs = np.diff(np.asarray(logs))
    if len(diffs) == 0:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2.0))


def steps(series: Series, penalty: float = PENALTY) -> list[Step]:
    """The change points of a series (see the module docstring), each moved to the nearest start of a
    commit's group (a step is a commit's doing, never inside one commit's processes); none in fewer
    than 2 x MIN_SIZE points."""
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
    starts = [start for start, _ in commit_groups(series.points)][1:]
    cuts = sorted({min(starts, key=lambda s: (abs(s - cut), s)) for cut in ends[:-1]} if starts else set())
    bounds = [0, *cuts, len(values)]
    found = []
    for start, cut, stop in zip(bounds, bounds[1:], bounds[2:], strict=False):
        point = series.points[cut]
        before, after = float(np.median(values[start:cut])), float(np.median(values[cut:stop]))
        found.append(Step(cut, point.run_id, point.commit, point.time, before, after))
    return found
