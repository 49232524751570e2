"""Which runs, which records, which figures are like with like.

A run is named by its id (under the results root), its folder, or a baseline. Of each run the
latest successful record per benchmark is compared (rank 0's: the job's headline). Two records are
like with like when their context matches: device, backend, world size and preset. Where it does not,
the benchmark is shown as a mismatch with the differing keys, and compared only when asked
(`--allow-mismatch`), marked as such. Figures pair on metric and labels (kernel, size, dtype ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.compare.baselines import list_baselines, read_baseline
from fleetbench.compare.statistics import Change, TestSettings, compare_samples
from fleetbench.errors import UserError
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import RECORDS_FILE, list_runs, read_records
from fleetbench.runinfo import RUN_ID_PATTERN

# The config section each benchmark records (ncu and roofline record the profile section).
CONFIG_SECTION = {"ncu": "profile", "roofline": "profile"}


@dataclass(frozen=True)
class RunRef:
    """A run as named on the command line, with its records."""

    label: str
    run_id: str
    records: list[ResultRecord]


def load_run(ref: str, results_root: Path) -> RunRef:
    """A run folder, a run id under `results_root`, or a baseline name, in that order."""
    path = Path(ref)
    if path.is_dir():
        if not (path / RECORDS_FILE).is_file():
            raise UserError(f"{ref}: no result records ({RECORDS_FILE} missing); pass a run folder or run id")
        return RunRef(ref, path.name, read_records(path))
    if RUN_ID_PATTERN.fullmatch(ref) and (results_root / ref / RECORDS_FILE).is_file():
        return RunRef(ref, ref, read_records(results_root / ref))
    if ref in list_baselines(results_root):
        return load_baseline(ref, results_root)
    recent = ", ".join(p.name for p in list_runs(results_root)[:5]) or "none yet"
    baselines = ", ".join(list_baselines(results_root)) or "none"
    raise UserError(
        f"run {ref!r} not found: not a run folder, not a run under {results_root} (recent: {recent}), "
        f"not a baseline (baselines: {baselines})"
    )


def load_baseline(name: str, results_root: Path) -> RunRef:
    """The records kept by baseline `name`."""
    baseline = read_baseline(results_root, name)
    return RunRef(f"baseline {name} ({baseline.run_id})", baseline.run_id, baseline.records)


def headline_records(run: RunRef) -> dict[str, ResultRecord]:
    """The latest successful rank-0 record of each benchmark in the run."""
    chosen: dict[str, ResultRecord] = {}
    for record in run.records:
        if record.status == "ok" and record.rank == 0:
            chosen[record.benchmark] = record  # records are appended in time order: the last wins
    return chosen


def context(record: ResultRecord) -> dict[str, Any]:
    """What must be equal for two records' figures to be comparable."""
    summary = record.summary
    return {
        "device": record.device,
        "backend": record.backend,
        "world_size": summary.get("world_size", 1),
        "preset": summary.get("preset") or record.config.get("preset"),
    }


def _flatten(data: Any, prefix: str) -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def config_differences(benchmark: str, base: ResultRecord, new: ResultRecord) -> list[str]:
    """`section.key: old -> new` for every config key the two runs set differently."""
    section = CONFIG_SECTION.get(benchmark, benchmark)
    old, now = _flatten(base.config, section), _flatten(new.config, section)
    return [
        f"{key}: {old.get(key, '(unset)')} -> {now.get(key, '(unset)')}"
        for key in sorted(old.keys() | now.keys())
        if old.get(key) != now.get(key)
    ]


@dataclass
class Row:
    """One headline figure of a benchmark in both runs (or in one of them)."""

    metric: str
    labels: dict[str, str]
    base: HeadlineFigure | None
    new: HeadlineFigure | None
    change: Change | None = None

    @property
    def note(self) -> str:
        """What kind of comparison the row is: tested on samples, single value, or one-sided."""
        if self.base is None:
            return "only in new"
        if self.new is None:
            return "only in base"
        assert self.change is not None
        return self.change.method


@dataclass
class BenchmarkComparison:
    """One benchmark of the two runs: context, mismatches, config differences and the rows."""

    benchmark: str
    base_context: dict[str, Any]
    new_context: dict[str, Any]
    mismatch: dict[str, tuple[Any, Any]]
    compared: bool
    config_diff: list[str]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    """Everything `compare` found between a base run and one new run."""

    base: RunRef
    new: RunRef
    benchmarks: list[BenchmarkComparison]
    only_base: list[str]
    only_new: list[str]


def pair_figures(base: ResultRecord, new: ResultRecord, settings: TestSettings) -> list[Row]:
    """Pair the two records' headline figures on metric and labels, and test each pair."""
    old = {f.key(): f for f in base.headline}
    now = {f.key(): f for f in new.headline}
    rows = []
    for key in list(old) + [k for k in now if k not in old]:
        b, n = old.get(key), now.get(key)
        figure = b or n
        assert figure is not None
        row = Row(figure.metric, figure.labels, b, n)
        if b is not None and n is not None:
            row.change = compare_samples(b.value, n.value, b.samples, n.samples, figure.better, settings)
        rows.append(row)
    return rows


def compare_runs(base: RunRef, new: RunRef, settings: TestSettings, allow_mismatch: bool = False) -> Comparison:
    """Match the runs' benchmarks and figures and test every pair; refuses runs with nothing in common."""
    old, now = headline_records(base), headline_records(new)
    common = [b for b in old if b in now]
    if not common:
        raise UserError(
            f"{base.label} ({', '.join(sorted(old)) or 'no successful records'}) and {new.label} "
            f"({', '.join(sorted(now)) or 'no successful records'}) share no benchmark: nothing to compare"
        )
    benchmarks = []
    for name in common:
        a, b = context(old[name]), context(now[name])
        mismatch = {key: (a[key], b[key]) for key in a if a[key] != b[key]}
        compared = not mismatch or allow_mismatch
        item = BenchmarkComparison(name, a, b, mismatch, compared, config_differences(name, old[name], now[name]))
        if compared:
            item.rows = pair_figures(old[name], now[name], settings)
            item.notes = [
                f"{side} has no headline figures (a record written before records carried one)"
                for side, record in (("base", old[name]), ("new", now[name]))
                if not record.headline
            ]
        benchmarks.append(item)
    return Comparison(
        base,
        new,
        benchmarks,
        only_base=sorted(set(old) - set(now)),
        only_new=sorted(set(now) - set(old)),
    )
