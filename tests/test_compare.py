"""`fleetbench compare` and baselines: statistics on samples, like with like, the CI gate, outputs."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from fleetbench.compare.noise import Calibration, NoiseFigure, store
from fleetbench.compare.statistics import NOT_ENOUGH, compare_samples, single
from fleetbench.results.store import read_records

FLOPS = "fleetbench_probe_achieved_flop_per_second"


# --- statistics ------------------------------------------------------------------------------------
def samples(center: float, n: int = 30, spread: float = 0.03, seed: int = 0) -> list[float]:
    return list(np.random.default_rng(seed).normal(center, center * spread, n))


def test_identical_samples_are_no_significant_change() -> None:
    a = samples(1.0)
    change = compare_samples(1.0, 1.0, a, list(a), "lower")
    assert change.verdict == "no significant change" and change.ratio == 1.0


def test_a_doubled_latency_is_worse_with_an_interval_that_excludes_one() -> None:
    change = compare_samples(1e-3, 2e-3, samples(1e-3), samples(2e-3, seed=1), "lower")
    assert change.verdict == "worse" and change.p_value is not None and change.p_value < 1e-6
    assert change.ci_low is not None and change.ci_low > 1.5 and change.ci_high is not None and change.ci_high < 2.5


def test_direction_comes_from_the_metric() -> None:
    faster = compare_samples(100.0, 200.0, samples(100.0), samples(200.0, seed=1), "higher")
    assert faster.verdict == "better"
    assert compare_samples(1.0, 2.0, samples(1.0), samples(2.0, seed=1), "lower").verdict == "worse"
    assert compare_samples(1.0, 2.0, samples(1.0), samples(2.0, seed=1), None).verdict == "no direction"


def test_noise_that_covers_the_difference_is_no_significant_change() -> None:
    change = compare_samples(1.0, 1.01, samples(1.0, spread=0.2), samples(1.01, spread=0.2, seed=1), "lower")
    assert change.verdict == "no significant change"


def test_single_values_have_no_verdict_unless_a_calibrated_floor_judges_them_as_factors() -> None:
    small = compare_samples(1.0, 1.02, [], [], "lower")
    few = compare_samples(1.0, 1.5, [1.0, 1.1], [1.5, 1.6], "lower")
    assert (small.method, small.verdict, small.ci_pct) == ("single value", NOT_ENOUGH, None)
    assert few.verdict == NOT_ENOUGH and "2+2 samples" in few.why and "--rounds 3" in few.why
    # against a calibrated floor of 40 %: a time x1.5 and a rate x(1/1.5) are the same 50 % factor
    assert single(1.0, 1.5, "lower", 40.0).verdict == "worse"
    assert single(1.5, 1.0, "higher", 40.0).verdict == "worse"
    assert single(1.0, 1.3, "lower", 40.0).verdict == "no significant change"


# --- real runs -------------------------------------------------------------------------------------
PROBE = ("--set", "probe.threads=1", "--set", "probe.matmul_sizes=[1024]", "--set", "probe.copy_mib=[]")


def probe_run(root: Path, run_id: str, *, sse_only: bool) -> None:
    """A one-thread probe, its matmul in MKL on every instruction set of the CPU or on SSE4.2 only.

    `MKL_ENABLE_INSTRUCTIONS=SSE4_2` runs the same config as a CPU without AVX would: the matmul takes
    3-6 times as long, whatever else the machine runs meanwhile. (A core shared with a busy loop did
    not: beside the other test worker's load, that pair came out "no significant change", once even
    "better".)
    """
    result = run_cli(
        "probe", "--results-dir", str(root), "--run-id", run_id, *PROBE, "--set", "probe.min_run_time_s=1.0",
        env={"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"} if sse_only else None,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def probe_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two probe runs of the same config whose machine really differs: all of the CPU's vector units
    (AVX2 at least), then SSE4.2 only."""
    import torch

    if not (torch.backends.mkl.is_available() and torch.backends.cpu.get_cpu_capability() in {"AVX2", "AVX512"}):
        pytest.skip("the two machines are made with MKL's instruction-set switch: needs torch with MKL on an AVX2 CPU")
    root = tmp_path_factory.mktemp("compare")
    probe_run(root, "avx", sse_only=False)
    probe_run(root, "sse", sse_only=True)
    return root


def sse_run_is_slower() -> None:
    """Skip a test that needs the SSE4.2 run slower: MKL_ENABLE_INSTRUCTIONS steers MKL's dispatch on
    Intel processors only (on an AMD EPYC VM the SSE4.2 run came out the faster one)."""
    if "GenuineIntel" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("MKL's instruction-set switch acts on Intel CPUs only; this CPU is not GenuineIntel")


def compare(root: Path, *args: str) -> tuple[int, str, str]:
    # The shared test machines run at load 3-6 on 2 cores: the calibrated floor's tests judge the two
    # machines here, not the load rule (tests/test_compare_round2.py has its own tests).
    quiet = ("--set", "compare.max_load_per_core=1000", "--set", "compare.max_steal_pct=100")
    result = run_cli("compare", "--results-dir", str(root), *args, *quiet)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture(scope="module")
def calibrated_runs(probe_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same two runs under a results root that holds a noise calibration of this machine class (1 %
    noise of the matmul figure: a floor of 2 x 1 % x sqrt(2) for a single pair)."""
    root = tmp_path_factory.mktemp("calibrated") / "results"
    shutil.copytree(probe_runs, root)
    record = read_records(root / "avx")[-1]
    figure = next(f for f in record.headline if f.metric == FLOPS)
    calibration = Calibration(record.machine, "2026-01-01T00:00:00", ["probe"], 40,
                              [NoiseFigure("probe", FLOPS, figure.labels, 1.0, 40, figure.value, 1.0)])  # fmt: skip
    store(root, calibration)
    return root


def test_a_single_pair_of_runs_is_not_judged_without_a_calibration_of_the_machine_class(probe_runs: Path) -> None:
    code, out, err = compare(probe_runs, "avx", "sse", "--format", "json", "--fail-on-regression", "5")
    report = json.loads(out)
    row = next(r for r in report["rows"] if r["metric"] == FLOPS)
    assert code == 0 and err == "" and row["verdict"] == NOT_ENOUGH and "compare --rounds" in row["why"]
    assert row["change_pct"] is not None  # the figures are still shown


def test_a_machine_without_avx_is_flagged_worse_and_the_gate_names_the_metric(calibrated_runs: Path) -> None:
    sse_run_is_slower()
    code, out, err = compare(calibrated_runs, "avx", "sse", "--format", "json", "--fail-on-regression", "5")
    report = json.loads(out)
    row = next(r for r in report["rows"] if r["metric"] == FLOPS)
    assert row["verdict"] == "worse" and row["change_pct"] < -5 and row["ci_high_pct"] < 0
    assert row["method"] == "within run: mann-whitney on logs + hodges-lehmann" and row["base_samples"] >= 3
    assert row["min_change_pct"] == pytest.approx((math.exp(2 * 0.01 * math.sqrt(2)) - 1) * 100)
    assert report["comparisons"][0]["benchmarks"][0]["config_diff"] == []
    assert code == 1 and FLOPS in err and len(err.strip().splitlines()) == 1


def test_a_run_against_itself_is_no_change_and_passes_the_gate(probe_runs: Path) -> None:
    code, out, _ = compare(probe_runs, "avx", "avx", "--fail-on-regression", "5")
    assert code == 0 and "no verdict: one process a side" in out and "worse" not in out


def test_markdown_and_csv_outputs_parse(calibrated_runs: Path, tmp_path: Path) -> None:
    sse_run_is_slower()
    out_file = tmp_path / "cmp.md"
    code, out, _ = compare(calibrated_runs, "avx", "sse", "--format", "md", "--out", str(out_file))
    assert code == 1 and out == ""  # written, and the gate still fails on the worse figure
    lines = out_file.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| metric"))
    assert lines[header + 1].count("---") == 9
    assert all(line.count("|") == 10 for line in lines[header:] if line.startswith("|"))
    assert any("probe_achieved_flop_per_second" in line and "worse" in line for line in lines)
    assert lines[0].startswith("test: within run;")  # which test it used, above the tables
    code, out, _ = compare(calibrated_runs, "avx", "sse", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 1 and {r["metric"] for r in rows} == {FLOPS}


def test_a_baseline_is_a_plain_file_of_records_and_compares_like_its_run(calibrated_runs: Path) -> None:
    sse_run_is_slower()
    assert run_cli("baseline", "--results-dir", str(calibrated_runs), "set", "main", "avx").returncode == 0
    stored = json.loads((calibrated_runs / "baselines" / "main.json").read_text())
    assert stored["run_id"] == "avx" and stored["records"][0]["benchmark"] == "probe"
    assert not (calibrated_runs / "baselines" / "main").exists()  # the records, not a copy of the run folder
    listed = run_cli("baseline", "--results-dir", str(calibrated_runs), "list")
    assert "main" in listed.stdout and "avx" in listed.stdout
    code, out, _ = compare(calibrated_runs, "--baseline", "main", "sse", "--format", "json")
    assert code == 1 and json.loads(out)["comparisons"][0]["base"] == "avx"
    assert run_cli("baseline", "--results-dir", str(calibrated_runs), "rm", "main").returncode == 0
    assert not (calibrated_runs / "baselines" / "main.json").exists()


@pytest.mark.vulkan
def test_a_train_run_against_an_edge_run_is_a_clear_mismatch(tmp_path: Path) -> None:
    train = run_cli(
        "train", "--results-dir", str(tmp_path), "--run-id", "t", "--nproc", "1", "--device", "cpu",
        "--preset", "tiny", "--steps", "4", "--set", "train.log_every=1",
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    edge = run_cli("edge", "run", "--quick", "--kernels", "silu", "--results-dir", str(tmp_path), "--run-id", "e")
    assert edge.returncode == 0, edge.stderr
    code, out, err = compare(tmp_path, "t", "e")
    assert code == 2 and out == ""
    assert "share no benchmark" in err and "train" in err and "edge" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("avx", "nope"), "run 'nope' not found"),
        (("--baseline", "nope", "sse"), "baseline 'nope' not found"),
        (("avx", "sse", "--fail-on-regression", "five"), "invalid float value: 'five'"),
        (("avx", "sse", "--format", "xml"), "--format 'xml' is not accepted"),
        (("avx",), "needs BASE and at least one NEW"),
        (("avx", "sse", "--set", "compare.alpha=2"), "compare.alpha"),
        (
            ("avx", "sse", "--set", "compare.fail_thresholds_pct={fleetbench_nope: 2}"),
            "fleetbench_nope is not a headline metric",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    probe_runs: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out_file = tmp_path / "out.md"
    code, out, err = compare(probe_runs, *args, "--out", str(out_file))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out_file.exists() and out == ""


def test_a_folder_without_records_and_a_corrupt_records_file_are_refused(probe_runs: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = compare(probe_runs, "avx", str(empty))
    assert code == 2 and "no result records" in err
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    good = (probe_runs / "sse" / "records.jsonl").read_text()
    (damaged / "records.jsonl").write_text(good + '{"run_id": "x", "bench\n')
    code, _, err = compare(probe_runs, "avx", str(damaged))
    assert code == 2 and "records.jsonl:2: not a valid result record" in err and len(err.strip().splitlines()) == 1


def test_config_differences_are_listed_key_by_key() -> None:
    from datetime import UTC, datetime

    from fleetbench.compare.matching import config_differences
    from fleetbench.results.record import ResultRecord

    def record(config: dict[str, object]) -> ResultRecord:
        now = datetime.now(UTC)
        return ResultRecord(
            run_id="r", benchmark="probe", host="h", device="d", backend="cpu", status="ok", config=config,
            start=now, end=now, duration_s=0, git_revision="g", packages={},
        )  # fmt: skip

    base = record({"threads": 2, "matmul_sizes": [512], "device": "auto"})
    new = record({"threads": 1, "matmul_sizes": [512, 1024], "dtype": "float16", "device": "auto"})
    assert config_differences("probe", base, new) == [
        "probe.dtype: (unset) -> float16",
        "probe.matmul_sizes: [512] -> [512, 1024]",
        "probe.threads: 2 -> 1",
    ]


def test_a_record_from_before_headlines_is_named_not_silently_empty(probe_runs: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    lines = (probe_runs / "avx" / "records.jsonl").read_text().splitlines()
    stripped = [json.dumps({k: v for k, v in json.loads(line).items() if k != "headline"}) for line in lines]
    (old / "records.jsonl").write_text("\n".join(stripped) + "\n")
    code, out, _ = compare(probe_runs, str(old), "sse", "--format", "json")
    bench = json.loads(out)["comparisons"][0]["benchmarks"][0]
    assert code == 0 and bench["notes"] == [
        "base has no headline figures (a record written before records carried one)"
    ]


def test_figures_of_metrics_another_version_wrote_are_left_out_with_a_note(probe_runs: Path, tmp_path: Path) -> None:
    newer = tmp_path / "newer"
    newer.mkdir()
    records = [json.loads(line) for line in (probe_runs / "avx" / "records.jsonl").read_text().splitlines()]
    for record in records:
        record["metrics"].append({"name": "fleetbench_from_the_future", "labels": {}, "value": 1.0})
        record["headline"].append({"metric": "fleetbench_from_the_future", "labels": {}, "value": 1.0, "samples": []})
    (newer / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, err = compare(probe_runs, "avx", str(newer), "--format", "json")
    assert code == 0 and "Traceback" not in err, err
    data = json.loads(out)
    assert data["comparisons"][0]["benchmarks"][0]["notes"][-1] == (
        "left out figures of metrics this fleetbench does not know (another version wrote them): fleetbench_from_the_future"
    )
    assert data["rows"] and all(row["metric"] != "fleetbench_from_the_future" for row in data["rows"])


def test_a_per_metric_threshold_overrides_the_gate_as_a_factor(calibrated_runs: Path) -> None:
    sse_run_is_slower()
    # the rate fell to 1/3-1/6: a factor of 200-500 %, which a plain-percentage bar of 99 % never caught
    strict = f"compare.fail_thresholds_pct={{{FLOPS}: 99}}"
    code, _, err = compare(calibrated_runs, "avx", "sse", "--fail-on-regression", "5", "--set", strict)
    assert code == 1 and "worse by a factor beyond 99%" in err
    loose = f"compare.fail_thresholds_pct={{{FLOPS}: 1000}}"
    code, _, err = compare(calibrated_runs, "avx", "sse", "--fail-on-regression", "5", "--set", loose)
    assert code == 0 and err == ""


def test_without_scipy_compare_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from fleetbench.cli.main import main

    monkeypatch.setitem(sys.modules, "scipy", None)  # an install without the compare extra
    assert main(["compare", "a", "b", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'fleetbench[compare]'" in err and len(err.strip().splitlines()) == 1
