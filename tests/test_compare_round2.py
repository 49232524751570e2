"""The gate, round 2: factors everywhere, one interval that agrees with its test, no verdict without
independent samples, machine classes, "unstable" on a busy machine, history by commit, bisect, and
worktrees that SIGTERM does not leave behind.

The rates (A/A false positives, power, false steps) are measured here by simulation with the package's
own functions and fixed seeds; docs/compare.md quotes these same figures.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, run_cli
from fleetbench.compare import noise as noise_mod
from fleetbench.compare.gate import regressions
from fleetbench.compare.history import Point, Series, collect, steps
from fleetbench.compare.matching import RunRef, compare_runs
from fleetbench.compare.stability import Limits
from fleetbench.compare.statistics import NOT_ENOUGH, UNSTABLE, TestSettings, compare_samples, factor_pct
from fleetbench.results.load import Load
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import RECORDS_FILE

FLOPS = "fleetbench_probe_achieved_flop_per_second"
BETWEEN = TestSettings(scope="between processes")
MACHINE = {"host": "runner-1", "cpu_model": "Test CPU 9000", "cpu_count": "2", "commit": "c"}


def catalogue_time_metric() -> str:
    from fleetbench.catalogue import CATALOGUE

    return next(name for name, spec in CATALOGUE.items() if spec.better == "lower" and spec.unit == "seconds")


def record(run_id: str, figures: dict[str, list[float]], machine: dict[str, str] | None = None,
           commit: str = "c", start: datetime | None = None) -> ResultRecord:  # fmt: skip
    now = start or datetime(2026, 1, 1, tzinfo=UTC)
    headline = [
        HeadlineFigure(metric=metric, labels={"size": "256"}, value=float(np.median(samples)), samples=samples)
        for metric, samples in figures.items()
    ]
    return ResultRecord(
        run_id=run_id, benchmark="probe", host="h", device="cpu", backend="cpu", status="ok", config={},
        start=now, end=now, duration_s=1, git_revision=commit, packages={}, headline=headline,
        machine=machine if machine is not None else MACHINE,
    )  # fmt: skip


def side(label: str, per_process: list[dict[str, list[float]]], load: tuple[Load, ...] = ()) -> RunRef:
    records = [record(f"{label}-{i:02d}", figures) for i, figures in enumerate(per_process)]
    return RunRef(label, label, records, processes=len(records), load=load)


def processes(
    rng: np.random.Generator, n: int, metrics: dict[str, float], noise: float
) -> list[dict[str, list[float]]]:
    """n processes, each figure centre x a lognormal run-to-run factor (sigma `noise`), three samples each."""
    return [
        {
            m: [c * math.exp(noise * rng.standard_normal()) * (1 + 0.002 * k) for k in range(3)]
            for m, c in metrics.items()
        }
        for _ in range(n)
    ]


# --- 1. factors -----------------------------------------------------------------------------------
@pytest.mark.usefixtures("quick_holm")
def test_a_rate_halving_and_a_time_doubling_are_the_same_regression_for_every_bar() -> None:
    time_metric = catalogue_time_metric()
    rng = np.random.default_rng(0)
    base = processes(rng, 10, {FLOPS: 100.0, time_metric: 1.0}, 0.01)
    new = processes(rng, 10, {FLOPS: 50.0, time_metric: 2.0}, 0.01)  # the rate halves, the time doubles
    for bar in (5.0, 50.0, 80.0, 150.0, 400.0):
        comparison = compare_runs(side("base", base), side("new", new), TestSettings(min_change_pct=bar))
        rows = {row.metric: row.change for row in comparison.benchmarks[0].rows}
        assert rows[FLOPS] is not None and rows[time_metric] is not None
        assert rows[FLOPS].factor_pct == pytest.approx(rows[time_metric].factor_pct, rel=0.05)
        assert rows[FLOPS].verdict == rows[time_metric].verdict == ("worse" if bar < 90 else "no significant change")
        for fail_pct in (10.0, 80.0, 150.0):  # --fail-on-regression: the same factor for both
            failed = {r.metric for r in regressions([comparison], fail_pct, {})}
            expected = {FLOPS, time_metric} if bar < 90 and fail_pct < 90 else set()
            assert failed == expected, (bar, fail_pct)
    assert factor_pct(0.5) == pytest.approx(100.0) and factor_pct(2.0) == pytest.approx(100.0)
    assert factor_pct(0.1) == pytest.approx(900.0)  # a 10x slower rate is a 900 % change, not -90 %


def test_the_geometric_mean_is_taken_on_logs() -> None:
    from fleetbench.compare.statistics import geometric_mean_speed

    half = compare_samples(1, 0.5, [1.0] * 3, [0.5] * 3, "higher")
    double = compare_samples(1, 2.0, [1.0] * 3, [2.0] * 3, "higher")
    mean, count = geometric_mean_speed([(half, "higher"), (double, "higher")]) or (0.0, 0)
    assert count == 2 and mean == pytest.approx(1.0)


# --- 2. one interval that agrees with the test ------------------------------------------------------
def test_the_hodges_lehmann_interval_excludes_one_exactly_when_the_test_rejects() -> None:
    rng = np.random.default_rng(7)
    disagreements = rejected = 0
    for _ in range(600):
        m, n = (int(x) for x in rng.integers(3, 25, 2))
        base = np.exp(0.05 * rng.standard_normal(m))
        new = np.exp(0.05 * rng.standard_normal(n) + rng.choice([0.0, 0.02, 0.05]))
        change = compare_samples(1, 1, list(base), list(new), "higher", TestSettings(min_change_pct=0))
        assert change.p_value is not None
        rejected += change.p_value < 0.05
        disagreements += (change.p_value < 0.05) != change.excludes_one
    assert disagreements == 0 and 150 < rejected < 500


def test_a_clear_thirty_percent_drop_is_worse_with_an_interval_that_says_so() -> None:
    # the case: new = 0.7 x old on 10 + 10 processes, which the old bootstrap veto let through
    rng = np.random.default_rng(3)
    base = list(100 * np.exp(0.15 * rng.standard_normal(10)))
    new = list(70 * np.exp(0.15 * rng.standard_normal(10)))
    change = compare_samples(100, 70, base, new, "higher", BETWEEN)
    assert change.verdict == "worse" and change.p_value is not None and change.p_value < 0.05
    assert change.ci_high is not None and change.ci_high < 1.0 and change.excludes_one


# --- 3. independent samples ---------------------------------------------------------------------------
@pytest.mark.usefixtures("quick_holm")
def test_a_single_pair_of_runs_never_gates_on_its_steps() -> None:
    # 200 A/A pairs of single runs whose whole process drifts by 2 % (what steps within one process cannot see)
    rng = np.random.default_rng(11)
    failed = 0
    for _ in range(200):
        drift = [math.exp(0.02 * rng.standard_normal()) for _ in range(2)]
        base = [100 * drift[0] * math.exp(0.002 * rng.standard_normal()) for _ in range(20)]
        new = [100 * drift[1] * math.exp(0.002 * rng.standard_normal()) for _ in range(20)]
        comparison = compare_runs(RunRef("a", "a", [record("a", {FLOPS: base})]),
                                  RunRef("b", "b", [record("b", {FLOPS: new})]), TestSettings())  # fmt: skip
        (row,) = comparison.benchmarks[0].rows
        assert row.change is not None and row.change.verdict == NOT_ENOUGH and "compare --rounds" in row.change.why
        failed += bool(regressions([comparison], None, {}))
    assert failed == 0


def test_fewer_than_three_processes_a_side_give_no_verdict_and_say_why() -> None:
    rng = np.random.default_rng(2)
    comparison = compare_runs(side("base", processes(rng, 2, {FLOPS: 100.0}, 0.01)),
                              side("new", processes(rng, 2, {FLOPS: 50.0}, 0.01)), TestSettings())  # fmt: skip
    (row,) = comparison.benchmarks[0].rows
    assert row.change is not None and row.change.verdict == NOT_ENOUGH
    assert "2+2 processes" in row.change.why and "--rounds 3" in row.change.why
    assert regressions([comparison], None, {}) == []


@pytest.fixture
def quick_holm(monkeypatch: pytest.MonkeyPatch) -> None:
    """statsmodels' Holm calls gc.collect() on every call (0.3 s in a test process holding many objects):
    skipped for the simulations, whose p-values and corrections are unchanged by it."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda *args: 0)


def simulated_rates(noise: float, slowdown: float, rounds: int, trials: int, seed: int) -> float:
    """The share of `trials` comparisons of `rounds` + `rounds` simulated processes (two figures, lognormal
    run-to-run noise) that the default gate fails, new's rate x (1 - slowdown)."""
    rng = np.random.default_rng(seed)
    time_metric = catalogue_time_metric()
    failed = 0
    for _ in range(trials):
        base = processes(rng, rounds, {FLOPS: 100.0, time_metric: 1.0}, noise)
        new = processes(rng, rounds, {FLOPS: 100.0 * (1 - slowdown), time_metric: 1.0 / (1 - slowdown)}, noise)
        comparison = compare_runs(side("base", base), side("new", new), TestSettings())
        failed += bool(regressions([comparison], None, {}))
    return failed / trials


@pytest.mark.usefixtures("quick_holm")
def test_rounds_twenty_keep_false_positives_at_alpha_and_catch_a_ten_percent_slowdown() -> None:
    # 3 % run-to-run noise per process (a quiet machine), the default settings (alpha 0.05, Holm, 1 % floor)
    false_positive = simulated_rates(0.03, 0.0, 20, 300, seed=0)
    power = simulated_rates(0.03, 0.10, 20, 100, seed=1)
    print(f"simulated --rounds 20, 3 % noise: A/A false positives {false_positive:.3f}, power at 10 % {power:.2f}")
    assert false_positive <= 0.05
    assert power >= 0.95


# --- 5. too noisy to judge ----------------------------------------------------------------------------
@pytest.mark.usefixtures("quick_holm")
def test_simulated_noisy_samples_are_unstable_never_a_wrong_verdict() -> None:
    rng = np.random.default_rng(5)
    wrong = unstable = 0
    for _ in range(50):  # a real 10 % slow-down under 25 % noise from a neighbour
        base = processes(rng, 20, {FLOPS: 100.0}, 0.25)
        new = processes(rng, 20, {FLOPS: 90.0}, 0.25)
        (row,) = compare_runs(side("base", base), side("new", new), TestSettings()).benchmarks[0].rows
        assert row.change is not None
        unstable += row.change.verdict == UNSTABLE
        wrong += row.change.verdict in ("better", "no significant change")
        assert row.change.verdict != UNSTABLE or "quiet machine" in row.change.why
    assert unstable == 50 and wrong == 0
    comparison = compare_runs(side("base", base), side("new", new), TestSettings())
    assert comparison.benchmarks[0].geomean is None  # no summary size of a noisy run either


def test_a_busy_machine_makes_a_comparison_unstable_with_what_to_do() -> None:
    rng = np.random.default_rng(6)
    base, new = processes(rng, 10, {FLOPS: 100.0}, 0.01), processes(rng, 10, {FLOPS: 50.0}, 0.01)
    busy = tuple(Load(load1=5.0, steal_pct=0.0, cores=2) for _ in range(10))
    quiet = tuple(Load(load1=0.9, steal_pct=0.0, cores=2) for _ in range(10))
    stolen = tuple(Load(load1=0.9, steal_pct=12.0, cores=2) for _ in range(10))
    verdicts = {}
    for name, load in (("busy", busy), ("quiet", quiet), ("stolen", stolen)):
        (row,) = compare_runs(side("base", base, load), side("new", new, load), TestSettings()).benchmarks[0].rows
        assert row.change is not None
        verdicts[name] = (row.change.verdict, row.change.why)
    assert verdicts["quiet"] == ("worse", "")
    assert verdicts["busy"][0] == UNSTABLE and "load average 5.0 on 2 cores" in verdicts["busy"][1]
    assert verdicts["stolen"][0] == UNSTABLE and "12.0 % of the CPU time stolen" in verdicts["stolen"][1]
    lenient = compare_runs(side("base", base, busy), side("new", new, busy), TestSettings(),
                           limits=Limits(load_per_core=10.0)).benchmarks[0].rows[0]  # fmt: skip
    assert lenient.change is not None and lenient.change.verdict == "worse"


def with_load(ref: RunRef, load: Load) -> RunRef:
    """The side's records as stored processes that kept `load` in their records (no --rounds measurement)."""
    records = [r.model_copy(update={"load": load}) for r in ref.records]
    return RunRef(ref.label, ref.run_id, records, processes=ref.processes)


def test_stored_processes_are_judged_by_the_load_their_records_kept() -> None:
    # A baseline of stored processes carries no --rounds measurement: only its records say the machine was busy.
    rng = np.random.default_rng(7)
    base, new = (
        side("base", processes(rng, 10, {FLOPS: 100.0}, 0.01)),
        side("new", processes(rng, 10, {FLOPS: 50.0}, 0.01)),
    )
    verdicts = {}
    for name, load in (
        ("quiet", Load(load1=0.5, steal_pct=0.0, cores=2)),
        ("busy", Load(load1=6.0, steal_pct=None, cores=2)),
    ):
        (row,) = compare_runs(with_load(base, load), with_load(new, load), TestSettings()).benchmarks[0].rows
        assert row.change is not None
        verdicts[name] = (row.change.verdict, row.change.why)
    assert verdicts["quiet"] == ("worse", "")
    assert verdicts["busy"][0] == UNSTABLE and "load average 6.0 on 2 cores" in verdicts["busy"][1]
    assert with_load(base, Load(load1=6.0, cores=2)).loads == (Load(load1=6.0, cores=2),) * 10  # one per process


def test_a_calibrated_single_pair_is_not_judged_by_the_floor_on_a_busy_machine() -> None:
    figure = noise_mod.NoiseFigure("probe", FLOPS, {"size": "256"}, 1.0, 40, 1.0, 1.0)
    calibration = noise_mod.Calibration(MACHINE, "2026-01-01T00:00:00", ["probe"], 40, [figure])
    verdicts = {}
    for name, load in (("quiet", Load(load1=0.2, cores=2)), ("busy", Load(load1=5.0, cores=2))):
        base = RunRef("a", "a", [record("a", {FLOPS: [100.0]}).model_copy(update={"load": load})])
        new = RunRef("b", "b", [record("b", {FLOPS: [60.0]}).model_copy(update={"load": load})])
        (row,) = compare_runs(base, new, TestSettings(), calibration=calibration).benchmarks[0].rows
        assert row.change is not None
        verdicts[name] = (row.change.verdict, row.change.why)
    assert verdicts["quiet"][0] == "worse"  # a 40 % drop, far beyond a 1 % calibrated floor
    assert verdicts["busy"][0] == UNSTABLE and "quiet machine" in verdicts["busy"][1]


@pytest.mark.parametrize("load", [{"load1": -1, "cores": 2}, {"load1": float("inf"), "cores": 2},
                                  {"load1": 1, "cores": 0}, {"load1": 1, "cores": 2, "steal_pct": 101},
                                  {"load1": 1, "cores": "2"}, {"load1": 1}])  # fmt: skip
def test_a_record_with_an_impossible_load_is_refused(load: dict[str, object]) -> None:
    import pydantic

    data = record("a", {FLOPS: [1.0]}).model_dump(mode="json")
    with pytest.raises(pydantic.ValidationError):
        ResultRecord.model_validate({**data, "load": load})


# --- 4. machine classes and the bar `noise` prints ------------------------------------------------------
def test_noise_belongs_to_a_machine_class_and_noise_prints_the_bar_compare_applies() -> None:
    from rich.console import Console

    from fleetbench.cli.noise_cmd import noise_table
    from fleetbench.config.compare import CompareConfig

    other_host = {**MACHINE, "host": "runner-2", "kernel": "6.1"}
    assert noise_mod.class_key(MACHINE) == noise_mod.class_key(other_host)  # CI runners of one kind
    assert noise_mod.class_key(MACHINE) != noise_mod.class_key({**MACHINE, "cpu_model": "Other CPU"})
    assert noise_mod.class_key(MACHINE) != noise_mod.class_key({**MACHINE, "gpu_driver": "550.1"})
    figure = noise_mod.NoiseFigure("probe", FLOPS, {"size": "256"}, 9.0, 40, 100.0, 2.0)
    calibration = noise_mod.Calibration(MACHINE, "2026-01-01T00:00:00", ["probe"], 40, [figure])
    console = Console(record=True, width=200)
    console.print(noise_table(calibration, 20, CompareConfig()))
    printed = console.export_text()
    rng = np.random.default_rng(0)
    comparison = compare_runs(side("base", processes(rng, 20, {FLOPS: 100.0}, 0.01)),
                              side("new", processes(rng, 20, {FLOPS: 99.0}, 0.01)), TestSettings(),
                              calibration=calibration)  # fmt: skip
    (row,) = comparison.benchmarks[0].rows
    assert row.change is not None
    applied = row.change.min_change_pct  # --rounds 20, the best sample's noise (compare.process_summary=best)
    assert applied == pytest.approx(100 * math.expm1(2 * 0.02 * math.sqrt(2 / 20)))
    assert f"{applied:.1f}%" in printed and "Test CPU 9000 x2" in printed


# --- 8. bounds and bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("compare", "--rounds", "2", "--", "probe"), "'2' is not accepted; accepted: 3 to 1000"),
        (("compare", "--rounds", "0", "--", "probe"), "'0' is not accepted; accepted: 3 to 1000"),
        (("compare", "--rounds", "1001", "--", "probe"), "'1001' is not accepted; accepted: 3 to 1000"),
        (("noise", "--rounds", "1", "--", "probe"), "'1' is not accepted; accepted: 3 to 1000"),
        (("compare", "--rounds", "3", "--base-rev", "no-such-rev", "--", "probe"), "--base-rev 'no-such-rev' is not a commit"),
        (("bisect", "--good", "no-such-rev", "--bad", "HEAD", "--metric", FLOPS, "--", "probe"), "--good 'no-such-rev' is not a commit"),
        (("bisect", "--good", "HEAD", "--bad", "HEAD", "--metric", "nope", "--", "probe"), "metric 'nope' is not a headline"),
    ],
)  # fmt: skip
def test_bad_rounds_and_revisions_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    cut = args.index("--")
    result = run_cli(*args[:cut], "--results-dir", str(tmp_path), *args[cut:], cwd=REPO)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []


# --- 6. history by commit and machine class ---------------------------------------------------------------
def flat(values: list[float]) -> Series:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    points = [Point(start + timedelta(hours=i), f"r{i:02d}", f"c{i:02d}", v, "run") for i, v in enumerate(values)]
    return Series("probe", FLOPS, {"size": "256"}, points)


def false_step_rate(runs: int, series_count: int, noise: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return (
        sum(bool(steps(flat(list(100 * np.exp(noise * rng.standard_normal(runs)))))) for _ in range(series_count))
        / series_count
    )


def test_false_steps_on_flat_series_are_as_rare_as_the_docs_say() -> None:
    # docs/compare.md: about 2 % of flat 12-run series and under 1 % of 30-run ones (3 % noise, 1000 series)
    at_12, at_30 = false_step_rate(12, 300, 0.03, seed=0), false_step_rate(30, 150, 0.03, seed=1)
    print(f"false-step rate, 3 % noise: 12 runs {at_12:.3f}, 30 runs {at_30:.3f}")
    assert at_12 <= 0.04 and at_30 <= 0.02


def test_a_ten_percent_step_at_twenty_runs_is_found_at_the_right_run() -> None:
    rng = np.random.default_rng(4)
    exact = 0
    for _ in range(60):
        values = 100 * np.exp(0.03 * rng.standard_normal(20))
        values[10:] *= 0.9
        found = steps(flat(list(values)))
        exact += [(s.run_id, round(s.change_pct)) in [("r10", -10), ("r10", -9), ("r10", -11), ("r10", -8),
                                                      ("r10", -12)] for s in found] == [True]  # fmt: skip
    assert exact / 60 >= 0.75


def git(repo: Path, *args: str) -> str:
    who = ("-c", "user.name=test", "-c", "user.email=test@localhost")
    done = subprocess.run(["git", "-C", str(repo), *who, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def scratch_repo(path: Path, commits: int) -> list[str]:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    ids = []
    for i in range(commits):
        (path / "file.txt").write_text(f"{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", f"commit {i}")
        ids.append(git(path, "rev-parse", "HEAD"))
    return ids


def write_run(root: Path, run_id: str, value: float, commit: str, start: datetime, machine: dict[str, str]) -> None:
    folder = root / run_id
    folder.mkdir(parents=True)
    rec = record(run_id, {FLOPS: [value] * 3}, machine, commit, start)
    (folder / RECORDS_FILE).write_text(rec.model_dump_json() + "\n")


def test_history_orders_runs_by_the_commit_graph_and_keeps_machine_classes_apart(tmp_path: Path) -> None:
    commits = scratch_repo(tmp_path / "repo", 6)
    root = tmp_path / "results"
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rng = np.random.default_rng(12)
    # recorded newest commit first (a backfill): the commit graph, not the time, orders them
    for i, commit in enumerate(reversed(commits)):
        for process in range(2):  # two processes of each commit, as compare --rounds leaves them
            value = (100.0 if commits.index(commit) < 3 else 80.0) * math.exp(0.01 * rng.standard_normal())
            write_run(root, f"run-{i}-{process}", value, commit, now + timedelta(hours=i), MACHINE)
    other = {**MACHINE, "cpu_model": "Another CPU"}
    for i in range(3):
        write_run(root, f"other-{i}", 163.7, commits[i], now + timedelta(hours=20 + i), other)
    write_run(root, "unknown", 100.0, "f" * 40, now, MACHINE)
    found = collect(root, FLOPS, None, {}, tmp_path / "repo")
    assert [s.machine for s in found.series] == ["Another CPU x2", "Test CPU 9000 x2"]
    ours = found.series[1]
    assert [p.commit for p in ours.points] == [c for c in commits for _ in range(2)]
    (step,) = steps(ours)
    assert step.commit == commits[3] and step.change_pct == pytest.approx(-20, abs=2)
    assert steps(found.series[0]) == []  # the other machine is its own series, never a step
    assert any("left out 1 run(s) whose commit" in w for w in found.warnings)


# --- 7 and 8. worktrees: SIGTERM, bisect -------------------------------------------------------------------
def copy_of_checkout(repo: Path) -> list[str]:
    """A scratch repository of this checkout's benchmarks/ with one commit; its id."""
    shutil.copytree(REPO / "benchmarks", repo / "benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "A")
    return [git(repo, "rev-parse", "HEAD")]


def test_sigterm_during_compare_rounds_leaves_no_worktree_behind(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (commit,) = copy_of_checkout(repo)
    (repo / "benchmarks" / "dirty.txt").write_text("x")
    git(repo, "add", "benchmarks/dirty.txt")  # an uncommitted change: said, not measured
    argv = [sys.executable, "-m", "fleetbench", "compare", "--rounds", "3", "--repo", str(repo), "--base-rev", commit,
            "--new-rev", commit, "--results-dir", str(tmp_path / "results"), "--", "probe",
            "--set", "probe.matmul_sizes=[64]", "--set", "probe.copy_mib=[]", "--set", "probe.min_run_time_s=0.02"]  # fmt: skip
    env = {**os.environ, "FLEETBENCH_PUSHGATEWAY": ""}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while "fleetbench-rounds-" not in git(repo, "worktree", "list") and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.1)
    assert "fleetbench-rounds-" in git(repo, "worktree", "list")
    trees = [line.split()[0] for line in git(repo, "worktree", "list").splitlines() if "fleetbench-rounds-" in line]
    time.sleep(0.5)  # mid-run: a process of round 1 is running
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err  # docs/exit-status.md: interrupted, SIGTERM included
    assert "fleetbench-rounds-" not in git(repo, "worktree", "list")
    assert not any(Path(tree).exists() for tree in trees) and not Path(trees[0]).parent.exists()
    assert "uncommitted changes" in err and "not what is measured" in err


@pytest.mark.usefixtures("quick_holm")
def test_bisect_finds_the_planted_bad_commit_among_eight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search, the ancestry path, the worktrees and the judging are real; each commit's processes are
    simulated from what the commit holds (its `speed` file), so the test takes seconds, not the minutes
    of 8 x N probe processes (the probe end to end: test_bisect_on_real_probe_processes, slow)."""
    from fleetbench.compare import bisect as bisect_mod

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commits = []
    for i in range(8):
        (repo / "speed").write_text("100\n" if i < 5 else "80\n")  # commit 5 plants the slow-down
        (repo / "counter").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"commit {i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    visited: list[str] = []
    rng = np.random.default_rng(8)

    def measure(plan: bisect_mod.BisectPlan, commit: str, report: object) -> RunRef:
        visited.append(commit)
        with bisect_mod.rounds.worktrees(plan.repo, {"tree": commit}) as trees:  # the real checkout of the commit
            speed = float((trees["tree"] / "speed").read_text())
        # 0.3 % run-to-run noise: an A/A pair stays under the 1 % minimum change, the planted 20 % does not
        return side(commit[:12], processes(rng, plan.rounds, {FLOPS: speed}, 0.003))

    monkeypatch.setattr(bisect_mod, "measure", measure)
    plan = bisect_mod.BisectPlan(("probe",), 5, tmp_path / "results", repo, FLOPS, {}, TestSettings())
    found = bisect_mod.bisect(plan, commits[0], commits[-1], lambda line: None)
    assert found.first_bad == commits[5], found.steps
    assert len(set(visited)) <= 5 and "fleetbench-rounds-" not in git(repo, "worktree", "list")
    flat_plan = bisect_mod.BisectPlan(("probe",), 5, tmp_path / "results", repo, FLOPS, {}, TestSettings())
    nothing = bisect_mod.bisect(flat_plan, commits[0], commits[4], lambda line: None)
    assert nothing.first_bad is None and "nothing to bisect" in nothing.stopped


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_bisect_on_real_probe_processes(tmp_path: Path) -> None:
    """End to end through the CLI: 8 commits of this checkout, commit 5 plants 8x the matmul work
    (5 commits x 4 probe processes: a few minutes on a quiet 2-core machine, 20 on a loaded one)."""
    repo = tmp_path / "repo"
    copy_of_checkout(repo)
    compute = repo / "benchmarks" / "fleetbench" / "probe" / "compute.py"
    anchor = "    flops = count_flops(op)\n    timed = time_op(op, device, min_run_time_s, threads)\n"
    slow = anchor.replace("timed = time_op(op,", "timed = time_op(lambda: [op() for _ in range(8)][-1],")
    for i in range(1, 8):
        text = compute.read_text()
        if i == 5:
            assert text.count(anchor) == 1
            compute.write_text(text.replace(anchor, slow))
        (repo / "benchmarks" / f"note-{i}.txt").write_text(str(i))
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"commit {i}")
    commits = git(repo, "rev-list", "--reverse", "HEAD").split()
    result = run_cli(
        "bisect", "--good", commits[0], "--bad", commits[-1], "--metric", FLOPS, "--rounds", "4", "--repo", str(repo),
        "--results-dir", str(tmp_path / "results"), "--set", "compare.max_load_per_core=1000",
        "--set", "compare.unstable_spread_pct=1000", "--", "probe", "--set", "probe.matmul_sizes=[64]",
        "--set", "probe.copy_mib=[]", "--set", "probe.min_run_time_s=0.02", "--set", "probe.threads=1", timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"first bad commit: {commits[5]}" in result.stdout
    assert "fleetbench-rounds-" not in git(repo, "worktree", "list")


# --- stored runs pooled into one side ---------------------------------------------------------------------
def stored(root: Path, run_id: str, samples: list[float], load1: float = 0.2) -> None:
    folder = root / run_id
    folder.mkdir(parents=True)
    rec = record(run_id, {FLOPS: samples}).model_copy(update={"load": Load(load1=load1, steal_pct=0.0, cores=2)})
    (folder / RECORDS_FILE).write_text(rec.model_dump_json() + "\n")


def test_stored_runs_pooled_with_commas_are_independent_processes(tmp_path: Path) -> None:
    root = tmp_path / "results"
    rng = np.random.default_rng(21)
    for i in range(4):  # four separate runs a side; new 30 % slower, 1 % run-to-run noise
        stored(root, f"a{i}", [100 * math.exp(0.01 * rng.standard_normal()) for _ in range(3)])
        stored(root, f"b{i}", [70 * math.exp(0.01 * rng.standard_normal()) for _ in range(3)])
        stored(root, f"busy{i}", [70 * math.exp(0.01 * rng.standard_normal()) for _ in range(3)], load1=6.0)
    pooled = run_cli("compare", "--results-dir", str(root), "a0,a1,a2,a3", "b0,b1,b2,b3", "--format", "json")
    report = json.loads(pooled.stdout)
    (row,) = report["rows"]
    assert pooled.returncode == 1 and row["verdict"] == "worse" and row["change_pct"] < -25, pooled.stderr
    assert report["comparisons"][0]["processes"] == [4, 4] and row["base_samples"] == 4
    # the loads the runs' records kept: new ran on a busy machine, so no verdict
    busy = run_cli("compare", "--results-dir", str(root), "a0,a1,a2,a3", "busy0,busy1,busy2,busy3", "--format", "json")
    assert busy.returncode == 0 and json.loads(busy.stdout)["rows"][0]["verdict"] == UNSTABLE
    # one run a side is still a single pair: never gated on its steps
    single = run_cli("compare", "--results-dir", str(root), "a0", "b0", "--format", "json")
    assert single.returncode == 0 and json.loads(single.stdout)["rows"][0]["verdict"] == NOT_ENOUGH


@pytest.mark.parametrize(
    ("side", "message"),
    [("a0,,a1", "'a0,,a1' is not accepted; accepted: two or more different runs joined by commas"),
     ("a0,a0", "'a0,a0' is not accepted; accepted: two or more different runs joined by commas"),
     ("a0,nope", "run 'nope' not found"),
     ("a0,main", "'a0,main': main is a baseline; accepted: runs")],
)  # fmt: skip
def test_a_bad_pool_is_one_line(tmp_path: Path, side: str, message: str) -> None:
    root = tmp_path / "results"
    for name in ("a0", "a1", "b0"):
        stored(root, name, [1.0, 1.0, 1.0])
    assert run_cli("baseline", "--results-dir", str(root), "set", "main", "b0").returncode == 0
    result = run_cli("compare", "--results-dir", str(root), side, "b0")
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
