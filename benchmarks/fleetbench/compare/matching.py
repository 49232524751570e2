"""Which runs, which records, which figures are like with like; what failed; which test fits.

A run is named by its id (under the results root), its folder, or a baseline. Of each run the
latest successful record per benchmark is compared (rank 0's: the job's headline). A side made of
several processes (`compare --rounds N`, a baseline of `fleetbench noise`) is one record per
benchmark whose figures' samples are the per-process summaries (each process's best sample, or
its median: compare.process_summary): when both sides have several
processes the test runs between processes; otherwise within the run (its steps), and each row says
which. Two records are like with like when their context matches: device, backend, world size and
preset. Where it does not, the benchmark is shown as a mismatch with the differing keys, and compared
only when asked (`--allow-mismatch`), marked as such. Figures pair on metric and labels (kernel,
size, dtype ...). A benchmark that is ok in base and failed, crashed or missing in new is an
introduced failure (asv counts it as a regression); so is a figure base has and new lost, when the
two configurations are the same. The figures of one comparison are tested as a family (Holm by
default), and each benchmark gets pyperf's geometric-mean summary.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.catalogue import CATALOGUE, Better
from fleetbench.compare import noise as noise_mod
from fleetbench.compare import stability
from fleetbench.compare.baselines import list_baselines, read_baseline
from fleetbench.compare.statistics import (
    SINGLE,
    UNSTABLE,
    Change,
    Scope,
    Summary,
    TestSettings,
    adjust,
    compare_samples,
    geometric_mean_speed,
    single,
    summarise,
    without_verdict,
)
from fleetbench.compare.validity import check_records, figure_name
from fleetbench.errors import UserError
from fleetbench.results.fingerprint import differences
from fleetbench.results.load import Load
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import RECORDS_FILE, list_runs, read_records
from fleetbench.runinfo import RUN_ID_PATTERN

# The config section each benchmark records (ncu and roofline record the profile section).
CONFIG_SECTION = {"ncu": "profile", "roofline": "profile"}
MFU = "fleetbench_train_mfu_ratio"


@dataclass(frozen=True)
class RunRef:
    """A run (or the processes of one side of `compare --rounds`) as named on the command line."""

    label: str
    run_id: str
    records: list[ResultRecord]
    processes: int = 1  # > 1: the records of that many processes of the same configuration
    noise: noise_mod.Calibration | None = None  # kept by a baseline
    crashed: tuple[str, ...] = ()  # processes that ended without a record: "run id: why"
    rounds: str = ""  # the `compare --rounds` invocation that ran these processes (its prefix); "" otherwise
    load: tuple[Load, ...] = ()  # the machine's load seen during each process (compare --rounds)

    @property
    def loads(self) -> tuple[Load, ...]:
        """The load during each process: as `compare --rounds` saw it, else as each process's first rank-0
        record kept it (a stored baseline's processes; records older than that field have none)."""
        if self.load:
            return self.load
        kept: dict[str, Load] = {}
        for record in self.records:
            if record.rank == 0 and record.load is not None:
                kept.setdefault(record.run_id, record.load)
        return tuple(kept.values())

    @property
    def machine(self) -> dict[str, str]:
        """The machine fingerprint of the side's first rank-0 record (empty in older records)."""
        return next((r.machine for r in self.records if r.rank == 0), {})


def load_run(ref: str, results_root: Path) -> RunRef:
    """A run folder, a run id under `results_root`, or a baseline name, in that order; figures checked.
    `A,B,C`: stored runs of one configuration pooled as one side of that many processes (pool_runs)."""
    path = Path(ref)
    if "," in ref and not path.is_dir():
        return pool_runs(ref, results_root)
    if path.is_dir():
        if not (path / RECORDS_FILE).is_file():
            raise UserError(f"{ref}: no result records ({RECORDS_FILE} missing); pass a run folder or run id")
        run = RunRef(ref, path.name, read_records(path))
    elif RUN_ID_PATTERN.fullmatch(ref) and (results_root / ref / RECORDS_FILE).is_file():
        run = RunRef(ref, ref, read_records(results_root / ref))
    elif ref in list_baselines(results_root):
        return load_baseline(ref, results_root)
    else:
        recent = ", ".join(p.name for p in list_runs(results_root)[:5]) or "none yet"
        baselines = ", ".join(list_baselines(results_root)) or "none"
        raise UserError(
            f"run {ref!r} not found: not a run folder, not a run under {results_root} (recent: {recent}), "
            f"not a baseline (baselines: {baselines})"
        )
    check_records(run.label, run.records)
    return run


def pool_runs(ref: str, results_root: Path) -> RunRef:
    """Stored runs named `A,B,C` as one side of len(parts) processes: each run one independent sample (its
    records' loads kept for the stability check), as the processes of `compare --rounds` are. Each part is
    a run of one process (a run id or folder, not a baseline), named once; at least two."""
    parts = ref.split(",")
    if len(parts) < 2 or any(not part for part in parts) or len(set(parts)) != len(parts):
        raise UserError(
            f"{ref!r} is not accepted; accepted: two or more different runs joined by commas (RUN1,RUN2,RUN3), "
            "one side of as many processes"
        )
    records: list[ResultRecord] = []
    for part in parts:
        run = load_run(part, results_root)
        if run.processes != 1 or run.label.startswith("baseline "):
            raise UserError(f"{ref!r}: {part} is a baseline; accepted: runs (a baseline of processes stands alone)")
        if len({r.run_id for r in run.records}) != 1:
            raise UserError(f"{ref!r}: {part} holds the records of several runs; accepted: runs of one process each")
        records += run.records
    pooled_ref = RunRef(ref, ",".join(parts), records, processes=len(parts))
    check_records(pooled_ref.label, records)
    return pooled_ref


def load_baseline(name: str, results_root: Path) -> RunRef:
    """The records kept by baseline `name` (and the noise calibration it carries)."""
    baseline = read_baseline(results_root, name)
    run = RunRef(
        f"baseline {name} ({baseline.run_id})", baseline.run_id, baseline.records, baseline.processes, baseline.noise
    )
    check_records(run.label, run.records)
    return run


def by_process(records: list[ResultRecord]) -> list[list[ResultRecord]]:
    """The records grouped by run id (one process of `--rounds` each), in the order first seen."""
    groups: dict[str, list[ResultRecord]] = {}
    for record in records:
        groups.setdefault(record.run_id, []).append(record)
    return list(groups.values())


def latest_ok(records: list[ResultRecord]) -> dict[str, ResultRecord]:
    """The latest successful rank-0 record of each benchmark."""
    chosen: dict[str, ResultRecord] = {}
    for record in records:
        if record.status == "ok" and record.rank == 0:
            chosen[record.benchmark] = record  # records are appended in time order: the last wins
    return chosen


def pooled(records: list[ResultRecord], how: Summary = "best") -> ResultRecord:
    """One record of a benchmark's processes: each figure's samples are the per-process summaries (the
    median of each process's samples, or its best with `how="best"`), its value their median."""
    summaries: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[HeadlineFigure, list[float]]] = {}
    for record in records:
        for figure in record.headline:
            entry = summaries.setdefault(figure.key(), (figure, []))
            entry[1].append(summarise(figure.samples or [figure.value], figure.better, how))
    headline = [
        HeadlineFigure(metric=f.metric, labels=f.labels, value=summarise(values, None, "median"), samples=values)
        for f, values in summaries.values()
    ]
    return records[0].model_copy(update={"headline": headline})


def headline_records(run: RunRef, pool: bool = False, how: Summary = "best") -> dict[str, ResultRecord]:
    """Per benchmark, the record compared: the latest successful rank-0 one, or with `pool` the processes'."""
    if not pool:
        return latest_ok(run.records)
    per_benchmark: dict[str, list[ResultRecord]] = {}
    for process in by_process(run.records):
        for benchmark, record in latest_ok(process).items():
            per_benchmark.setdefault(benchmark, []).append(record)
    return {benchmark: pooled(records, how) for benchmark, records in per_benchmark.items()}


def failures(run: RunRef) -> dict[str, str]:
    """Benchmarks whose latest rank-0 record failed in some process of the run, with the first reason."""
    failed: dict[str, str] = {}
    for process in by_process(run.records):
        latest: dict[str, ResultRecord] = {}
        for record in process:
            if record.rank == 0:
                latest[record.benchmark] = record
        for benchmark, record in latest.items():
            if record.status == "failed":
                failed.setdefault(benchmark, f"failed in {record.run_id}: {record.error or 'no reason recorded'}")
    return failed


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
    better: Better | None = None
    excluded: str | None = None  # why this figure is shown but not judged (MFU against another peak)

    @property
    def note(self) -> str:
        """What kind of comparison the row is: tested on samples, single value, or one-sided."""
        if self.base is None:
            return "only in new"
        if self.new is None:
            return "only in base"
        assert self.change is not None
        return self.change.method

    @property
    def verdict(self) -> str:
        """The verdict shown and gated on."""
        if self.excluded:
            return "not judged"
        return self.change.verdict if self.change else self.note


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
    geomean: tuple[float, int] | None = None  # pyperf's summary: mean speed-up (>1 better), over n figures

    @property
    def lost_figures(self) -> list[Row]:
        """Figures base has and new lost, under the same configuration (an introduced failure)."""
        if self.config_diff or not self.compared:
            return []
        return [row for row in self.rows if row.new is None]


@dataclass(frozen=True)
class Failure:
    """A benchmark ok in base and failed, crashed or missing in new."""

    benchmark: str
    reason: str


@dataclass
class Comparison:
    """Everything `compare` found between a base run and one new run."""

    base: RunRef
    new: RunRef
    benchmarks: list[BenchmarkComparison]
    only_base: list[str]
    only_new: list[str]
    failures: list[Failure] = field(default_factory=list)
    scope: str = "within run"
    machine_diff: dict[str, tuple[str, str]] = field(default_factory=dict)
    noise_note: str = ""


@dataclass(frozen=True)
class Plan:
    """How the figures of one comparison are tested: settings, scope, processes per side, the noise."""

    settings: TestSettings
    noise_factor: float
    processes: int
    noise: dict[noise_mod.FigureKey, noise_mod.NoiseFigure]
    load: tuple[Load, ...] = ()  # both sides' processes
    stability: stability.Limits = field(default_factory=stability.Limits)


def figure_settings(plan: Plan, benchmark: str, figure: HeadlineFigure) -> TestSettings:
    """The settings of one figure: its minimum change follows from its noise on this machine class."""
    entry = plan.noise.get((benchmark, figure.metric, tuple(sorted(figure.labels.items()))))
    bar = noise_mod.bar_pct(entry, plan.settings, plan.noise_factor, plan.processes)
    return dataclasses.replace(plan.settings, min_change_pct=bar)


WITHIN_RUN = (
    "one process a side: its steps are not independent samples and cannot see the run-to-run noise; "
    "use compare --rounds N, or calibrate this machine class with fleetbench noise"
)


def _within_run(change: Change, plan: Plan, key: noise_mod.FigureKey, figure: HeadlineFigure) -> Change:
    """A single pair of runs is judged only against a noise floor calibrated for the machine class."""
    if key not in plan.noise:
        return without_verdict(change, WITHIN_RUN)
    if change.method == SINGLE or change.why:  # one value a side: the calibrated floor alone decides
        change = single(change.base, change.new, figure.better, change.min_change_pct)
    # The floor was calibrated on a machine doing nothing else: a run beside other work is not judged by it.
    if busy := stability.load_reason(plan.load, plan.stability):
        return without_verdict(change, f"unstable: {busy}: {stability.ADVICE}", UNSTABLE)
    return change


def unknown_metrics(*records: ResultRecord) -> list[str]:
    """The headline metrics of `records` this fleetbench's catalogue does not declare (a newer or older one wrote them)."""
    return sorted({f.metric for record in records for f in record.headline if f.metric not in CATALOGUE})


def pair_figures(benchmark: str, base: ResultRecord, new: ResultRecord, plan: Plan) -> list[Row]:
    """Pair the two records' headline figures on metric and labels, and test each pair (figures of
    metrics the catalogue does not know are left out: `unknown_metrics` names them)."""
    old = {f.key(): f for f in base.headline if f.metric in CATALOGUE}
    now = {f.key(): f for f in new.headline if f.metric in CATALOGUE}
    rows = []
    for key in list(old) + [k for k in now if k not in old]:
        b, n = old.get(key), now.get(key)
        figure = b or n
        assert figure is not None
        row = Row(figure.metric, figure.labels, b, n, better=figure.better)
        if b is not None and n is not None:
            settings = figure_settings(plan, benchmark, figure)
            try:
                row.change = compare_samples(b.value, n.value, b.samples, n.samples, figure.better, settings)
            except ValueError as exc:
                raise UserError(
                    f"{figure_name(benchmark, figure)}: {exc}; accepted: figures within float range"
                ) from None
            if plan.settings.scope == "within run":
                row.change = _within_run(row.change, plan, (benchmark, figure.metric, key[1]), figure)
            else:
                why = stability.unstable(b.samples, n.samples, plan.load, plan.stability)
                if why and row.change.method != SINGLE and not row.change.why:
                    row.change = without_verdict(row.change, why, UNSTABLE)
        rows.append(row)
    return rows


def mfu_peaks(base: ResultRecord, new: ResultRecord) -> str | None:
    """Why MFU cannot be compared, when the two runs divided by different peaks; None when they agree."""
    a, b = base.summary.get("peak_flop_per_second"), new.summary.get("peak_flop_per_second")
    if a is None or b is None or a == b:
        return None
    return (
        f"MFU peaks differ ({a:.4g} FLOP/s, {base.summary.get('peak_source')} -> {b:.4g} FLOP/s, "
        f"{new.summary.get('peak_source')}): MFU is not judged, tokens/s is"
    )


def _benchmark(
    name: str, old: ResultRecord, now: ResultRecord, plan: Plan, allow_mismatch: bool
) -> BenchmarkComparison:
    a, b = context(old), context(now)
    mismatch = {key: (a[key], b[key]) for key in a if a[key] != b[key]}
    compared = not mismatch or allow_mismatch
    item = BenchmarkComparison(name, a, b, mismatch, compared, config_differences(name, old, now))
    if not compared:
        return item
    item.rows = pair_figures(name, old, now, plan)
    item.notes = [
        f"{side} has no headline figures (a record written before records carried one)"
        for side, record in (("base", old), ("new", now))
        if not record.headline
    ]
    if unknown := unknown_metrics(old, now):
        item.notes.append(
            f"left out figures of metrics this fleetbench does not know (another version wrote them): {', '.join(unknown)}"
        )
    peaks = mfu_peaks(old, now) if name == "train" else None
    if peaks:
        item.notes.append(peaks)
        for row in item.rows:
            if row.metric == MFU:
                row.excluded = peaks
    return item


def _introduced(base: RunRef, new: RunRef, old: dict[str, ResultRecord], now: dict[str, ResultRecord]) -> list[Failure]:
    """Benchmarks ok in base and failed, crashed or missing in new."""
    failed = failures(new)
    crashed = "; ".join(new.crashed)
    out = []
    for benchmark in old:
        if benchmark in failed:
            out.append(Failure(benchmark, failed[benchmark]))
        elif crashed:
            out.append(Failure(benchmark, f"a process of new crashed ({crashed})"))
        elif benchmark not in now:
            out.append(Failure(benchmark, f"ok in base, missing in {new.label}"))
    return out


def _noise_note(plan: Plan, calibration: noise_mod.Calibration | None) -> str:
    if calibration is None:
        within = (
            "" if plan.settings.scope == "between processes" else ("; a single pair of runs is not judged without one")
        )
        return (
            f"no noise calibration for this machine class: minimum change {plan.settings.min_change_pct:g}% "
            f"(fleetbench noise measures the run-to-run noise and raises it where needed){within}"
        )
    summary = f", per-process {plan.settings.process_summary}" if plan.settings.scope == "between processes" else ""
    return (
        f"minimum change per figure (as a factor): max({plan.settings.min_change_pct:g}%, {plan.noise_factor:g} x "
        f"noise x sqrt(2/{plan.processes})), noise of {noise_mod.describe_class(calibration.machine)} from the "
        f"calibration of {calibration.set_at[:19]} ({calibration.processes} processes){summary}"
    )


def compare_runs(  # noqa: PLR0913 (the comparison and how it is judged)
    base: RunRef,
    new: RunRef,
    settings: TestSettings,
    allow_mismatch: bool = False,
    calibration: noise_mod.Calibration | None = None,
    noise_factor: float = 2.0,
    limits: stability.Limits | None = None,
) -> Comparison:
    """Match the runs' benchmarks and figures and test every pair as one family; refuses runs with nothing
    in common (and no failure of base's benchmarks in new)."""
    pool = base.processes > 1 and new.processes > 1
    paired = pool and settings.paired and paired_by_round(base, new)
    settings = dataclasses.replace(settings, paired=paired)
    scope: Scope = "between processes" if pool else "within run"
    how = settings.process_summary
    old, now = headline_records(base, pool, how), headline_records(new, pool, how)
    introduced = _introduced(base, new, old, now)
    common = [b for b in old if b in now]
    if not common and not any(f.benchmark in failures(new) or new.crashed for f in introduced):
        raise UserError(
            f"{base.label} ({', '.join(sorted(old)) or 'no successful records'}) and {new.label} "
            f"({', '.join(sorted(now)) or 'no successful records'}) share no benchmark: nothing to compare"
        )
    processes = min(base.processes, new.processes) if pool else 1
    plan = Plan(dataclasses.replace(settings, scope=scope), noise_factor, processes,
                calibration.lookup() if calibration else {}, base.loads + new.loads,
                limits or stability.Limits())  # fmt: skip
    benchmarks = [_benchmark(name, old[name], now[name], plan, allow_mismatch) for name in common]
    judge_family(benchmarks, plan.settings)
    if pool:
        note = power_note(base.processes, new.processes, benchmarks, settings.alpha, paired)
        for bench in benchmarks[:1] if note else []:
            bench.notes.append(note)
    comparison = Comparison(base, new, benchmarks, sorted(set(old) - set(now)), sorted(set(now) - set(old)))
    comparison.failures = introduced
    comparison.scope = scope if pool else _within_note(base, new)
    comparison.machine_diff = differences(base.machine, new.machine) if base.machine and new.machine else {}
    comparison.noise_note = _noise_note(plan, calibration)
    return comparison


def paired_by_round(base: RunRef, new: RunRef) -> bool:
    """Whether the two sides' processes ran in the same rounds of one `compare --rounds`, one pair per round
    (a side of a baseline, or of another invocation, is no pair for any process of this one)."""
    return bool(base.rounds) and base.rounds == new.rounds and base.processes == new.processes


def smallest_p(n_base: int, n_new: int, paired: bool = False) -> float:
    """The smallest two-sided p-value the test can give for samples of these sizes (no ties), by the normal
    approximation the test uses: Mann-Whitney U's, or with `paired` the signed-rank test's over the pairs."""
    from scipy import stats

    if paired:
        n = min(n_base, n_new)
        z = n * (n + 1) / 4.0 / math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    else:
        z = n_base * n_new / 2.0 / math.sqrt(n_base * n_new * (n_base + n_new + 1) / 12.0)
    return min(1.0, float(2.0 * stats.norm.sf(z)))


def power_note(
    n_base: int, n_new: int, benchmarks: list[BenchmarkComparison], alpha: float, paired: bool = False
) -> str:
    """A warning when the rounds are too few for any figure to reach significance after the correction."""
    family = sum(1 for bench in benchmarks for row in bench.rows if row.change is not None and row.change.p_value)
    floor = smallest_p(n_base, n_new, paired) * max(1, family)
    if floor < alpha:
        return ""
    enough = next(n for n in range(2, 1000) if smallest_p(n, n, paired) * max(1, family) < alpha)
    return (
        f"{n_base}+{n_new} processes cannot show a significant change in {family} figure(s) at alpha {alpha:g} "
        f"(the smallest corrected p is {floor:.3g}): use --rounds {enough} or more"
    )


def _within_note(base: RunRef, new: RunRef) -> str:
    if base.processes > 1 or new.processes > 1:
        return "within run (one side has a single process: its steps, and the other side's latest process)"
    return "within run"


def judge_family(benchmarks: list[BenchmarkComparison], settings: TestSettings) -> None:
    """Correct every tested figure of the comparison together, then the per-benchmark geometric means."""
    judged = [row for bench in benchmarks for row in bench.rows if row.change is not None and not row.excluded]
    changes = adjust([(row.change, row.better) for row in judged if row.change is not None], settings)
    for row, change in zip(judged, changes, strict=True):
        row.change = change
    for bench in benchmarks:
        bench.geomean = geometric_mean_speed(  # only figures with a verdict: no summary size of a noisy run
            [(row.change, row.better) for row in bench.rows
             if row.change is not None and not row.excluded and not row.change.why]
        )  # fmt: skip


def find_calibration(base: RunRef, new: RunRef, results_root: Path) -> noise_mod.Calibration | None:
    """The noise of the new side's machine class: kept in the base baseline when it was made on it, else filed
    under the results root by `fleetbench noise`; None when neither exists."""
    machine = new.machine
    if base.noise is not None and machine and base.noise.key == noise_mod.class_key(machine):
        return base.noise
    return noise_mod.for_machine(results_root, machine)
