"""Verdicts you can trust: introduced failures, independent processes (--rounds, two commits through git
worktree), noise calibration, the correction across figures, machine fingerprints and history, on real
runs of the probe (tiny sizes: a few seconds a process) and of commits planted in a scratch repository.

The rates (false positives of A/A comparisons, power against a planted 10 % slow-down) need twenty
comparisons and more: scripts/perf_compare.py measures them (`make perf`); these tests check each
behaviour once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, run_cli
from fleetbench.compare.history import Point, Series, steps
from fleetbench.compare.noise import min_change_pct
from fleetbench.compare.statistics import Change, TestSettings, adjust, compare_samples, geometric_mean_speed
from fleetbench.devices import cpu_model_name
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import read_records

FLOPS = "fleetbench_probe_achieved_flop_per_second"
BYTES = "fleetbench_probe_achieved_bytes_per_second"
TINY = ("--set", "probe.matmul_sizes=[64]", "--set", "probe.copy_mib=[1]", "--set", "probe.min_run_time_s=0.02",
        "--set", "probe.threads=1")  # fmt: skip
MATMUL_ONLY = ("--set", "probe.matmul_sizes=[128]", "--set", "probe.copy_mib=[]", "--set", "probe.min_run_time_s=0.05",
               "--set", "probe.threads=1")  # fmt: skip
SMALL = ("--set", "probe.matmul_sizes=[128]", "--set", "probe.copy_mib=[1]", "--set", "probe.min_run_time_s=0.05",
         "--set", "probe.threads=1")  # fmt: skip
ANCHOR = "    flops = count_flops(op)\n    timed = time_op(op, device, min_run_time_s, threads)\n"
# The test machines are shared (load 3-6 on 2 cores): a test of something other than the stability
# checks turns them off, or every comparison there would rightly be "unstable".
STABILITY_OFF = ("--set", "compare.max_load_per_core=1000", "--set", "compare.unstable_spread_pct=1000")


# --- the statistics, alone -------------------------------------------------------------------------
def judged_change(p: float, ratio: float = 0.8) -> Change:
    return Change(1.0, ratio, ratio, ratio - 0.05, ratio + 0.05, p, "between processes: x", True, "worse", 1.0)


def test_holm_corrects_across_the_figures_of_a_comparison_and_bh_is_there_too() -> None:
    changes = [(judged_change(0.01), "higher"), (judged_change(0.04), "higher"), (judged_change(0.03), "higher")]
    holm = adjust(changes, TestSettings(correction="holm"))
    assert [c.p_adjusted for c in holm] == pytest.approx([0.03, 0.06, 0.06])  # statsmodels' multipletests
    assert [c.verdict for c in holm] == ["worse", "no significant change", "no significant change"]
    bh = adjust(changes, TestSettings(correction="fdr_bh"))
    assert [c.p_adjusted for c in bh] == pytest.approx([0.03, 0.04, 0.04])
    assert [c.verdict for c in bh] == ["worse"] * 3
    assert [c.verdict for c in adjust(changes, TestSettings(correction="none"))] == ["worse"] * 3


def test_the_geometric_mean_turns_every_figure_so_that_above_one_is_better() -> None:
    faster = judged_change(0.01, ratio=1.1)  # a throughput 10 % up
    quicker = judged_change(0.01, ratio=0.9)  # a latency 10 % down
    mean, count = geometric_mean_speed([(faster, "higher"), (quicker, "lower"), (judged_change(0.5, 2.0), None)]) or (
        0,
        0,
    )
    assert count == 2 and mean == pytest.approx(math.sqrt(1.1 / 0.9))


def test_figures_near_the_float_limit_give_a_verdict_and_no_runtime_warning() -> None:
    rng = np.random.default_rng(0)
    base = list(1.7e308 * (1 + 0.01 * rng.standard_normal(9)))
    new = list(0.9 * 1.7e308 * (1 + 0.01 * rng.standard_normal(9)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (overflow) fails the test
        change = compare_samples(1.7e308, 0.9 * 1.7e308, base, new, "higher")
    assert change.verdict == "worse" and change.change_pct == pytest.approx(-10, abs=1.5)


def test_pairs_of_one_round_cancel_what_slowed_the_machine_in_that_round() -> None:
    # Ten rounds; the machine's speed swings by +-20 % from round to round, and new is 5 % slower than base
    # in every round (within 0.5 %): unpaired, the swing hides the change; paired by round, it drops out.
    rng = np.random.default_rng(1)
    machine = 1 + 0.2 * rng.uniform(-1, 1, 10)
    base = list(100 * machine * (1 + 0.005 * rng.standard_normal(10)))
    new = list(95 * machine * (1 + 0.005 * rng.standard_normal(10)))
    paired = compare_samples(100, 95, base, new, "higher", TestSettings(scope="between processes", paired=True))
    unpaired = compare_samples(100, 95, base, new, "higher", TestSettings(scope="between processes"))
    assert paired.method == "between processes, paired by round: wilcoxon signed-rank on log ratios + hodges-lehmann"
    assert paired.verdict == "worse" and paired.p_value is not None and paired.p_value < 0.01  # every pair one sign
    assert paired.change_pct == pytest.approx(-5, abs=0.6) and paired.ci_pct is not None and paired.ci_pct[1] < 0
    assert unpaired.method == "between processes: mann-whitney on logs + hodges-lehmann"
    assert unpaired.verdict == "no significant change"
    same = compare_samples(100, 100, base, base, "higher", TestSettings(scope="between processes", paired=True))
    assert same.p_value == 1.0 and same.verdict == "no significant change"


def probe_records(scale: float, processes: int = 10) -> list[ResultRecord]:
    """One probe record per process, its matmul figure `scale` x a per-process speed with three samples."""
    now = datetime.now(UTC)
    rng = np.random.default_rng(int(scale * 100))
    records = []
    for process in range(processes):
        speed = scale * 1e9 * (1 + 0.01 * process)
        samples = [speed * (1 + 0.001 * x) for x in rng.standard_normal(3)]
        figure = HeadlineFigure(metric=FLOPS, labels={"size": "256"}, value=float(np.median(samples)), samples=samples)
        record = ResultRecord(
            run_id=f"p{process:02d}", benchmark="probe", host="h", device="cpu", backend="cpu", status="ok",
            config={}, start=now, end=now, duration_s=1, git_revision="g", packages={}, headline=[figure],
        )  # fmt: skip
        records.append(record)
    return records


def test_only_processes_of_the_same_rounds_are_paired() -> None:
    from fleetbench.compare.matching import RunRef, compare_runs

    def side(label: str, rounds: str, scale: float) -> RunRef:
        records = [record.model_copy(update={"run_id": f"{label}-{record.run_id}"}) for record in probe_records(scale)]
        return RunRef(label, label, records, processes=len(records), rounds=rounds)

    settings = TestSettings(paired=True)
    together = compare_runs(side("base", "r1", 1.0), side("new", "r1", 0.9), settings)
    apart = compare_runs(side("base", "r1", 1.0), side("new", "r2", 0.9), settings)
    assert together.benchmarks[0].rows[0].note.startswith("between processes, paired by round")
    assert apart.benchmarks[0].rows[0].note == "between processes: mann-whitney on logs + hodges-lehmann"


def test_the_minimum_change_follows_the_noise_by_the_documented_rule() -> None:
    assert min_change_pct(1.0, 2.0, None, 10) == 1.0  # no calibration: the floor
    assert min_change_pct(1.0, 2.0, 0.2, 10) == 1.0  # a quiet machine: the floor still
    # factors: exp(k x noise x sqrt(2/n)) - 1 on the log scale
    assert min_change_pct(1.0, 2.0, 5.0, 1) == pytest.approx(100 * math.expm1(2 * 0.05 * math.sqrt(2)))  # one pair
    assert min_change_pct(1.0, 2.0, 5.0, 10) == pytest.approx(100 * math.expm1(2 * 0.05 * math.sqrt(0.2)))


def test_rounds_without_a_count_run_as_many_processes_as_compare_rounds_sets() -> None:
    from fleetbench.cli import noise_cmd
    from fleetbench.cli.main import build_parser
    from fleetbench.config.compare import CompareConfig

    default = CompareConfig().rounds
    assert default == 20  # pyperf's worker processes; README's gate measurements at 20 a side
    compare = build_parser(["compare"]).parse_args(["compare", "--rounds", "--", "probe"])
    assert compare.rounds == 0  # resolved to config.compare.rounds when the rounds are planned
    noise = build_parser(["noise"]).parse_args(["noise", "--", "probe"])
    noise_cmd._check(noise)
    assert noise.rounds == default


def series(values: list[float]) -> Series:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    points = [Point(start + timedelta(hours=i), f"r{i:02d}", f"c{i:02d}", v, "run") for i, v in enumerate(values)]
    return Series("probe", FLOPS, {"size": "256"}, points)


def test_history_names_the_step_of_a_synthetic_series() -> None:
    rng = np.random.default_rng(3)
    noise = 1 + 0.03 * rng.standard_normal(24)
    found = steps(series(list(100 * noise[:12]) + list(88 * noise[12:])))
    assert [(s.run_id, s.commit) for s in found] == [("r12", "c12")]
    assert found[0].change_pct == pytest.approx(-12, abs=3)
    assert steps(series(list(100 * noise))) == []  # noise alone is no step
    assert steps(series([100.0] * 3)) == []  # too short to hold one


# --- real runs -------------------------------------------------------------------------------------
def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = run_cli(*args, timeout=600)
    if ok:
        assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tiny probe runs of the same config."""
    results = tmp_path_factory.mktemp("trust")
    for run_id in ("a", "b"):
        cli("probe", "--results-dir", str(results), "--run-id", run_id, *TINY)
    return results


def git(repo: Path, *args: str) -> str:
    who = ("-c", "user.name=test", "-c", "user.email=test@localhost")
    return subprocess.run(
        ["git", "-C", str(repo), *who, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def plant(repo: Path, replacement: str, message: str) -> str:
    """Commit `replacement` in place of the matmul probe's timing (ANCHOR); the new commit's id."""
    compute = repo / "benchmarks" / "fleetbench" / "probe" / "compute.py"
    text = compute.read_text()
    assert text.count(ANCHOR) == 1, "the matmul probe changed: update ANCHOR"
    compute.write_text(text.replace(ANCHOR, replacement))
    git(repo, "commit", "-qam", message)
    commit = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "HEAD~1", "--", ".")  # the next plant starts from A again
    git(repo, "commit", "-qam", "back to A")
    return commit


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A scratch repository of this checkout's benchmarks/: A as is; B 32 times the multiply-adds per
    counted matmul (the slow-down scripts/perf_compare.py plants at 10 %: here it must stand out of the
    swings a shared 2-core machine gives single processes, 4x apart within one commit at load 8, where
    8x the work left no step to find); C's matmul probe raises."""
    repo = tmp_path_factory.mktemp("planted") / "repo"
    shutil.copytree(
        REPO / "benchmarks", repo / "benchmarks", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "A")
    a = git(repo, "rev-parse", "HEAD")
    slow = (
        "    flops = count_flops(op)\n"
        "    extra = torch.empty(n, n, device=device.torch_device, dtype=dtype)\n\n"
        "    def slow_op() -> object:\n"
        "        for _ in range(31):  # planted: the multiply-adds 31 times more, uncounted\n"
        "            torch.matmul(a, b, out=extra)\n"
        "        return op()\n\n"
        "    timed = time_op(slow_op, device, min_run_time_s, threads)\n"
    )
    b = plant(repo, slow, "B: 32 times the work per counted matmul")
    broken = "    raise RuntimeError('planted failure: the matmul probe breaks')\n"
    c = plant(repo, broken, "C: the matmul probe raises")
    return {"repo": repo, "A": a, "B": b, "C": c}


def checkout(planted: dict[str, object], commit: str, where: Path) -> Path:
    """A worktree of the scratch repository at `commit`; its benchmarks/ folder."""
    git(planted["repo"], "worktree", "add", "--detach", str(where), commit)  # type: ignore[arg-type]
    return where / "benchmarks"


def probe_at(source: Path, root: Path, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`fleetbench probe` with another commit's code first on the import path."""
    env = {**os.environ, "FLEETBENCH_PUSHGATEWAY": "", "PYTHONPATH": str(source)}
    argv = [sys.executable, "-m", "fleetbench", "probe", "--results-dir", str(root), "--run-id", run_id, *extra]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def test_a_benchmark_that_failed_in_new_is_a_regression_named_in_one_line(
    root: Path, planted: dict[str, object], tmp_path: Path
) -> None:
    source = checkout(planted, str(planted["C"]), tmp_path / "c")
    failed = probe_at(source, root, "broken", *TINY)
    assert failed.returncode != 0 and read_records(root / "broken")[-1].status == "failed"
    result = cli("compare", "--results-dir", str(root), "a", "broken", "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert report["comparisons"][0]["failures"][0]["benchmark"] == "probe"
    assert "planted failure" in report["regressions"][0]
    assert result.stderr.count("\n") == 1 and "probe: failed in broken: planted failure" in result.stderr


def test_an_introduced_failure_stops_the_rounds_and_fails_the_gate(planted: dict[str, object], tmp_path: Path) -> None:
    result = cli(
        "compare", "--results-dir", str(tmp_path), "--rounds", "3", "--repo", str(planted["repo"]),
        "--base-rev", str(planted["A"]), "--new-rev", str(planted["C"]), "--run-prefix", "fail", "--", "probe", *TINY,
        ok=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert "new failed in round 1: the remaining rounds are not run" in result.stderr
    assert "probe: failed in fail-new-01: planted failure" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fail-base-01", "fail-new-01"]
    assert "fleetbench-rounds-" not in git(planted["repo"], "worktree", "list")  # the checkouts are gone  # type: ignore[arg-type]


def test_rounds_alternate_processes_pair_them_when_asked_and_say_when_they_are_too_few(tmp_path: Path) -> None:
    result = cli("compare", "--results-dir", str(tmp_path), "--rounds", "3", "--run-prefix", "aa", "--format", "json",
                 "--set", "compare.pair_rounds=true", "--", "probe", *MATMUL_ONLY)  # fmt: skip
    report = json.loads(result.stdout)
    comparison = report["comparisons"][0]
    assert comparison["scope"] == "between processes" and comparison["processes"] == [3, 3]
    row = report["rows"][0]
    assert row["method"] == "between processes, paired by round: wilcoxon signed-rank on log ratios + hodges-lehmann"
    # 3 pairs: p is at least 0.11; on a busy machine the figure is unstable instead (no verdict either way)
    assert row["base_samples"] == 3 and row["verdict"] in ("no significant change", "unstable")
    assert any("cannot show a significant change in 1 figure(s)" in n and "--rounds 5" in n
               for n in comparison["benchmarks"][0]["notes"])  # fmt: skip
    order = [line.split(":")[0] for line in result.stderr.splitlines() if line.startswith("round ")]
    assert order == ["round 1/3 base", "round 1/3 new", "round 2/3 new", "round 2/3 base", "round 3/3 base",
                     "round 3/3 new"]  # fmt: skip
    assert {r.run_id for p in tmp_path.glob("aa-*") for r in read_records(p)} == {
        f"aa-{side}-0{i}" for side in ("base", "new") for i in (1, 2, 3)
    }


@pytest.mark.slow
def test_two_commits_in_interleaved_processes_flag_the_planted_slowdown(
    planted: dict[str, object], tmp_path: Path
) -> None:
    result = cli(
        "compare", "--results-dir", str(tmp_path), "--rounds", "4", "--repo", str(planted["repo"]),
        "--base-rev", str(planted["A"]), "--new-rev", str(planted["B"]), "--run-prefix", "pl", "--format", "json",
        *STABILITY_OFF, "--", "probe", *MATMUL_ONLY, ok=False,
    )  # fmt: skip
    report = json.loads(result.stdout)
    row = next(r for r in report["rows"] if r["metric"] == FLOPS)
    assert result.returncode == 1 and row["verdict"] == "worse" and row["change_pct"] < -50, result.stderr
    assert row["method"] == "between processes: mann-whitney on logs + hodges-lehmann"
    assert (row["base_samples"], row["new_samples"]) == (4, 4)
    assert FLOPS in report["regressions"][0]
    commits = {p.name.split("-")[1]: read_records(p)[0].git_revision for p in tmp_path.glob("pl-*")}
    assert commits == {"base": planted["A"], "new": planted["B"]}  # each side ran its own commit


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    results = tmp_path_factory.mktemp("noise")
    done = cli("noise", "--results-dir", str(results), "--rounds", "3", "--baseline", "aa", "--run-prefix", "cal",
               "--set", "compare.noise_factor=3", "--", "probe", *SMALL)  # fmt: skip
    return results, done


def test_noise_files_each_figures_spread_for_this_machine_and_the_baseline_keeps_it(
    calibrated: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    results, done = calibrated
    (path,) = (results / "calibration").glob("noise-*.json")
    stored = json.loads(path.read_text())
    assert stored["machine"]["cpu_model"] == cpu_model_name() and stored["processes"] == 6
    assert {f["metric"] for f in stored["figures"]} == {FLOPS, BYTES}
    assert all(f["processes"] == 6 and 0 <= f["noise_pct"] < 1000 for f in stored["figures"])
    baseline = json.loads((results / "baselines" / "aa.json").read_text())
    assert baseline["processes"] == 6 and baseline["noise"]["figures"] == stored["figures"]
    assert len({r["run_id"] for r in baseline["records"]}) == 6
    assert f"run-to-run noise of {cpu_model_name()}" in done.stdout and "(6 processes)" in done.stdout
    assert "A again" in done.stdout
    for figure in stored["figures"]:  # the one-pair bar printed for --set compare.noise_factor=3, not the default 2
        bar = 100 * math.expm1(max(math.log1p(0.01), 3.0 * figure["noise_pct"] / 100 * math.sqrt(2)))
        assert f"{bar:.1f}%" in done.stdout
    listed = cli("baseline", "--results-dir", str(results), "list")
    assert "aa" in listed.stdout and "2 figures" in listed.stdout


def test_the_gate_takes_its_minimum_change_from_the_calibration(
    calibrated: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    results, _ = calibrated
    noise = {
        f["metric"]: f["noise_pct"]
        for f in json.loads(next((results / "calibration").glob("*.json")).read_text())["figures"]
    }
    result = cli("compare", "--results-dir", str(results), "cal-base-01", "cal-new-01", "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert "from the calibration" in report["comparisons"][0]["noise"]
    rows = [row for row in report["rows"] if row["method"] != "single value"]
    assert rows
    for row in rows:  # one pair of runs: n = 1, within run: the noise of the per-process medians, as a factor
        bar = 100 * math.expm1(max(math.log1p(0.01), 2.0 * noise[row["metric"]] / 100 * math.sqrt(2)))
        assert row["min_change_pct"] == pytest.approx(bar)
        assert row["verdict"] != "not enough independent samples to judge"  # calibrated: judged


def test_a_damaged_baseline_is_named_and_never_breaks_the_others(
    calibrated: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    results, _ = calibrated
    (results / "baselines" / "zz-damaged.json").write_text('{"name": "zz-damaged", "records": [{"value": nu')
    listed = cli("baseline", "--results-dir", str(results), "list", ok=False)
    assert listed.returncode == 3, "a listing with a damaged baseline is a partial result (docs/exit-status.md)"
    assert "aa" in listed.stdout and "zz-damaged" in listed.stdout
    assert listed.stderr.count("zz-damaged.json: not a baseline file") == 1
    used = cli("compare", "--results-dir", str(results), "--baseline", "aa", "cal-new-02", "--format", "json", ok=False)
    assert used.returncode in (0, 1) and json.loads(used.stdout)["comparisons"][0]["base"]
    history = cli("history", FLOPS, "--results-dir", str(results), "--format", "json", "--repo", str(REPO))
    assert "zz-damaged.json: not a baseline file" in history.stderr and json.loads(history.stdout)["series"]


def test_records_carry_the_machine_and_compare_warns_when_it_differs(root: Path, tmp_path: Path) -> None:
    record = read_records(root / "b")[0]
    assert record.machine["cpu_model"] == cpu_model_name() and record.machine["commit"] == record.git_revision
    assert record.machine["torch"] and record.machine["cpu_count"].isdigit()
    # and what the machine was doing meanwhile, which a comparison of stored processes is judged by
    assert record.load is not None and record.load.cores >= 1 and record.load.load1 >= 0
    other = tmp_path / "other"
    other.mkdir()
    lines = [json.loads(line) for line in (root / "b" / "records.jsonl").read_text().splitlines()]
    for line in lines:
        line["machine"]["cpu_model"] = "Another CPU"
    (other / "records.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = cli("compare", "--results-dir", str(root), "a", str(other), ok=False)
    assert f"warning: the machines differ (cpu_model: {cpu_model_name()} -> Another CPU)" in result.stdout
    old = tmp_path / "old"
    old.mkdir()
    (old / "records.jsonl").write_text("".join(json.dumps({k: v for k, v in line.items() if k != "machine"}) + "\n"
                                               for line in lines))  # fmt: skip
    result = cli("compare", "--results-dir", str(root), "a", str(old), "--format", "json", ok=False)
    comparison = json.loads(result.stdout)["comparisons"][0]
    assert comparison["new_machine"] == {} and comparison["machine_differences"] == {}


def test_history_names_the_step_in_real_stored_runs(planted: dict[str, object], tmp_path: Path) -> None:
    results = tmp_path / "results"
    sources = {name: checkout(planted, str(planted[name]), tmp_path / name) for name in ("A", "B")}
    # Interleaved, and long enough to hold several blocks: a busy spell of the shared machine lands on
    # both commits' runs, and a 0.05 s run that met one read 4.5x apart from its twin.
    steady = (*MATMUL_ONLY, "--set", "probe.min_run_time_s=0.3")
    for index, name in enumerate("ABABABAB"):
        done = probe_at(sources[name], results, f"h{index}-{name}", *steady)
        assert done.returncode == 0, done.stderr[-2000:]
    (results / "damaged").mkdir()
    (results / "damaged" / "records.jsonl").write_text("{not json\n")
    png = tmp_path / "history.png"
    result = cli("history", "probe_achieved_flop_per_second", "--results-dir", str(results), "--png", str(png),
                 "--format", "json", "--repo", str(planted["repo"]))  # fmt: skip
    (found,) = json.loads(result.stdout)["series"]
    values = [round(p["value"] / 1e9, 1) for p in found["points"]]
    # In commit order: A's four runs, then B's, the first of them h1-B.
    assert [(s["run_id"], s["commit"]) for s in found["steps"]] == [("h1-B", planted["B"])], values
    assert found["steps"][0]["change_pct"] < -50 and len(found["points"]) == 8
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "left out:" in result.stderr and "damaged" in result.stderr
    table = cli("history", "probe_achieved_flop_per_second", "--results-dir", str(results), "--png", str(png),
                "--repo", str(planted["repo"]))  # fmt: skip
    assert "h1-B" in table.stdout and str(planted["B"])[:12] in table.stdout


def test_verdicts_that_cannot_be_pushed_are_spooled_and_never_fail_the_comparison(root: Path) -> None:
    result = cli("compare", "--results-dir", str(root), "a", "a", "--pushgateway", "http://127.0.0.1:9", ok=False)
    assert result.returncode == 0 and "warning: the push of compare a to http://127.0.0.1:9 failed" in result.stderr
    (entry,) = (root / ".spool").glob("*.json")
    spooled = json.loads(entry.read_text())
    assert (
        spooled["grouping_key"]["benchmark"] == "compare" and "fleetbench_compare_change_ratio" in spooled["exposition"]
    )
    assert 'verdict="not enough independent samples to judge"' in spooled["exposition"]  # one run a side


@pytest.mark.services
def test_grafana_and_the_html_report_show_compares_own_verdicts(root: Path, stack: object, prometheus: object) -> None:
    from fleetbench.compare import publish
    from fleetbench.dashboards.compare import COMPARE
    from fleetbench.services.prometheus_api import PrometheusClient
    from fleetbench.services.stack import LocalStack
    from test_report_compare import comparison_tables, parse

    assert isinstance(stack, LocalStack) and isinstance(prometheus, PrometheusClient)
    result = cli("compare", "--results-dir", str(root), "a", "b", "--format", "json", "--pushgateway",
                 stack.pushgateway_url, ok=False)  # fmt: skip
    said = {(r["metric"], r["labels"]): r["verdict"] for r in json.loads(result.stdout)["rows"]}
    panels = {p.title: p for row in COMPARE.rows for p in row.panels}
    expr = panels["Verdicts of fleetbench compare"].queries[0].expr.replace("$base", "a").replace("$new", "b")
    shown = {(s.labels["metric"], s.labels["figure"]): s.labels["verdict"] for s in prometheus.wait_for(expr, 30)}
    assert shown == said and len(said) == 2
    cli("report", "b", "--results-dir", str(root), "--offline", "--compare", "a")
    (table,) = comparison_tables(parse(root / "b" / "report" / "index.html"))
    in_report = {(f"fleetbench_{row[0]}", row[1]): row[-1] for row in table[1:]}
    assert in_report == said
    rng = np.random.default_rng(3)
    synthetic = series(
        list(100 * (1 + 0.03 * rng.standard_normal(12))) + list(80 * (1 + 0.03 * rng.standard_normal(12)))
    )
    assert (
        publish.push(publish.steps_found(FLOPS, [(synthetic, steps(synthetic))]), stack.pushgateway_url, root) is None
    )
    found = prometheus.wait_for(panels["Steps in the runs' history (fleetbench history)"].queries[0].expr, 30)
    assert [(s.labels["at_run"], s.labels["commit"]) for s in found] == [("r12", "c12")]


def test_an_operation_that_fills_the_time_in_one_block_is_still_timed_in_enough_blocks() -> None:
    from fleetbench.devices import resolve_device
    from fleetbench.probe.compute import MIN_BLOCKS, time_op

    calls = []
    # 1 µs of asked-for time: one block holds it, as a loaded machine's would hold a probe's 0.05 s.
    timed = time_op(lambda: calls.append(1), resolve_device("cpu"), 1e-6, 1)
    assert len(timed.samples_s) >= MIN_BLOCKS >= 3 and timed.operations <= len(calls)
    assert timed.median_s > 0 and min(timed.samples_s) <= timed.median_s <= max(timed.samples_s)
