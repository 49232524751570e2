"""`fleetbench profile`, `ncu summarize` and `roofline` end to end on the CPU, through the real CLI entry point."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

from conftest import in_process_cli
from fleetbench.profile.classify import CLASSES
from fleetbench.profile.flops import FLOP_SOURCES
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import read_records
from testdata import get_test_data_dir

FIXTURES = get_test_data_dir()
FAST_PEAKS = [
    "--set",
    "profile.peak_matmul_size=256",
    "--set",
    "profile.peak_copy_mib=8",
    "--set",
    "profile.peak_min_run_time_s=0.05",
]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    """One `fleetbench profile` of the default workload (the trainer's tiny preset on the CPU)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        fleetbench = in_process_cli(monkeypatch)
        root = tmp_path_factory.mktemp("profile")
        buffer = StringIO()  # what the user sees on the console
        monkeypatch.setattr("fleetbench.cli.main.Console", lambda **_: Console(file=buffer, width=140))
        code = fleetbench(
            "profile",
            "--results-dir",
            str(root / "results"),
            "--run-id",
            "p1",
            "--set",
            f"profile.peaks_cache_dir={root / 'peaks'}",
            "--set",
            "profile.active=2",
            *FAST_PEAKS,
        )
        yield root / "results" / "p1", code, buffer.getvalue()


def profile_record(run_dir: Path) -> ResultRecord:
    (record,) = [r for r in read_records(run_dir) if r.benchmark == "profile"]
    return record


def test_default_profile_writes_everything_step_a_and_c_promise(default_run: tuple[Path, int, str]) -> None:
    run_dir, code, output = default_run
    assert code == 0, output
    record = profile_record(run_dir)
    assert record.status == "ok" and record.backend == "cpu"
    expected = "train" if importlib.util.find_spec("fleetbench.train") else "linear"
    assert record.summary["workload"]["kind"] == expected
    energy = record.summary["energy"]  # the profiled steps' energy, or why there is none (no RAPL in a VM)
    assert (energy["joules"] is None) == bool(energy["reason"]) and energy["seconds"] > 0
    files = run_dir / "profile"
    assert (files / "key_averages.txt").read_text().startswith("sorted by self_cpu_time_total")
    trace = json.loads((files / "trace.json").read_text())
    assert any(e.get("cat") == "cpu_op" for e in trace["traceEvents"])
    assert "<html" in (files / "memory_timeline.html").read_text()[:2000].lower()
    assert (files / "roofline.png").read_bytes()[:4] == b"\x89PNG"
    ops = json.loads((files / "ops.json").read_text())
    assert any(op["name"] == "aten::mm" and op["flops"] > 0 for op in ops)
    summary = json.loads((files / "trace_summary.json").read_text())
    assert "no GPU events" in summary["note"]
    for name in ("profile/trace.json", "profile/ops.json", "profile/roofline.png", "profile/memory_timeline.html"):
        assert name in record.artifacts


def test_default_profile_metrics_and_the_closing_table(default_run: tuple[Path, int, str]) -> None:
    run_dir, _, output = default_run
    record = profile_record(run_dir)
    rows = record.summary["top_ops"]
    assert rows and all({"label", "name", "class", "fix", "reason"} <= set(row) for row in rows)
    classes = {s.labels["class"] for s in record.metrics if s.name == "fleetbench_profile_op_class_info"}
    assert classes and classes <= set(CLASSES)
    mm = next(row for row in rows if row["name"] == "aten::mm")
    assert mm["class"] != "unknown" and mm["flop_per_second"] > 0
    assert record.metric("fleetbench_profile_op_achieved_flop_per_second", op="aten::mm") == pytest.approx(
        mm["flop_per_second"]
    )
    assert record.metric("fleetbench_profile_peak_flop_per_second", dtype="float32", source="measured") > 0
    assert "class and main fix" in output and "aten::mm" in output
    prom = next(run_dir.glob("*profile*.prom")).read_bytes()
    promtool = shutil.which("promtool")
    if promtool:
        result = subprocess.run([promtool, "check", "metrics"], input=prom, capture_output=True, timeout=30)
        assert result.returncode == 0, result.stdout + result.stderr


def test_default_profile_classes_most_top_ops_and_names_cache_resident_ones(
    default_run: tuple[Path, int, str],
) -> None:
    """The tiny preset on the CPU: data movement is classed by bytes, elementwise ops get FLOPs, and
    no op shows more than 100 % of the DRAM roof without the cache-resident label."""
    run_dir, _, output = default_run
    record = profile_record(run_dir)
    rows = record.summary["top_ops"]
    unknown = [row["name"] for row in rows if row["class"] == "unknown"]
    assert len(unknown) < 0.2 * len(rows), unknown
    for row in rows:
        assert row["flop_source"] in FLOP_SOURCES
        if row["memory_ratio"] is not None and row["memory_ratio"] > 1:
            assert row["class"] == "cache_resident", row
    sources = {row["name"]: row["flop_source"] for row in rows}
    assert sources.get("aten::mm") == "torch.profiler"
    assert sources.get("aten::silu", "op table") == "op table"
    assert sources.get("aten::_fused_adamw_", "op table") == "op table"
    assert any(note.startswith("FLOP counts of the") for note in record.summary["roofline"]["notes"])
    assert "FLOPs from torch.profiler" in output


def test_linear_probe_flops_are_the_real_count(tmp_path: Path, fleetbench: Callable[..., int]) -> None:
    code = fleetbench(
        "profile",
        "--workload",
        "linear",
        "--results-dir",
        str(tmp_path),
        "--run-id",
        "lin",
        "--set",
        "profile.linear_size=256",
        "--set",
        "profile.linear_batch=64",
        "--set",
        "profile.active=2",
        "--set",
        "profile.with_stack=false",
        "--set",
        f"profile.peaks_cache_dir={tmp_path / 'peaks'}",
        *FAST_PEAKS,
    )
    assert code == 0
    record = profile_record(tmp_path / "lin")
    assert record.summary["workload"]["description"].startswith("Linear 256x256 forward+backward, batch 64, float32")
    ops = {op["name"]: op for op in json.loads((tmp_path / "lin" / "profile" / "ops.json").read_text())}
    per_gemm = 2 * 64 * 256 * 256
    assert ops["aten::addmm"]["count"] == 2 and ops["aten::addmm"]["flops"] == 2 * per_gemm  # forward, 2 steps
    assert ops["aten::mm"]["count"] == 4 and ops["aten::mm"]["flops"] == 4 * per_gemm  # dX and dW per step
    assert ops["aten::addmm"]["dtype"] == "float32"
    # inputs read once (bias, x, W) and the output written once: the minimum traffic of one addmm
    assert ops["aten::addmm"]["bytes"] == 2 * 4 * (256 + 64 * 256 + 256 * 256 + 64 * 256)
    assert "memory timeline needs" in " ".join(record.summary["notes"])  # with_stack=false: said, not hidden


def test_a_script_is_profiled_with_its_arguments(tmp_path: Path, fleetbench: Callable[..., int]) -> None:
    script = tmp_path / "work.py"
    script.write_text(
        "import sys, torch\n"
        "open(sys.argv[0] + '.argv', 'w').write(' '.join(sys.argv[1:]))\n"
        "a = torch.randn(128, 128)\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    torch.mm(a, a)\n"
    )
    code = fleetbench(
        "profile",
        "--script",
        str(script),
        "--results-dir",
        str(tmp_path / "r"),
        "--run-id",
        "s",
        "--set",
        f"profile.peaks_cache_dir={tmp_path / 'peaks'}",
        *FAST_PEAKS,
        "--",
        "5",
        "--flag",
    )
    assert code == 0
    assert Path(str(script) + ".argv").read_text() == "5 --flag"
    record = profile_record(tmp_path / "r" / "s")
    assert record.summary["workload"]["kind"] == "script"
    mm = next(row for row in record.summary["top_ops"] if row["name"] == "aten::mm")
    assert mm["calls"] == 5 and mm["flops"] == 5 * 2 * 128**3


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--script", "{tmp}/missing.py"], "profile.script {tmp}/missing.py not found"),
        (["--module", "no_such_module_xyz"], "profile.module 'no_such_module_xyz' not found"),
        (["--workload", "script"], "workload 'script' needs profile.script=PATH"),
        (["--workload", "gpu"], "Input should be 'auto', 'train', 'linear', 'script' or 'module'"),
        (["--workload", "linear", "--set", "profile.dtype=float16"], "profile.dtype=float16 is not accepted on CPU"),
        (["--set", "profile.active=0"], "profile.active: Input should be greater than or equal to 1"),
        (["--set", "profile.thresholds.latency_bound_below=75"], "less than or equal to 1"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    tmp_path: Path, fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    results = tmp_path / "results"
    code = fleetbench("profile", "--results-dir", str(results), *[a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("fleetbench: error: "), err
    assert fragment.replace("{tmp}", str(tmp_path)) in lines[0]
    assert not results.exists()


def test_roofline_from_the_profile_run_and_from_the_peaks(
    tmp_path: Path, fleetbench: Callable[..., int], default_run: tuple[Path, int, str]
) -> None:
    run_dir, _, _ = default_run
    peaks = ["--set", f"profile.peaks_cache_dir={tmp_path / 'peaks'}", *FAST_PEAKS]
    assert fleetbench("roofline", "--ops", str(run_dir), "--results-dir", str(tmp_path), "--run-id", "a", *peaks) == 0
    (record,) = read_records(tmp_path / "a")
    assert record.benchmark == "roofline" and record.summary["source"] == "analytical"
    assert any(p["label"] == "aten::mm" for p in record.summary["points"])
    assert (tmp_path / "a" / "roofline" / "roofline.png").is_file()

    assert fleetbench("roofline", "--results-dir", str(tmp_path), "--run-id", "b", *peaks) == 0
    (peaks_only,) = read_records(tmp_path / "b")
    assert peaks_only.summary["source"] == "peaks" and peaks_only.summary["peaks"][0]["source"] == "measured"


@pytest.mark.realdata
def test_roofline_from_an_ncu_report(tmp_path: Path, fleetbench: Callable[..., int]) -> None:
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    report = FIXTURES / "ncu-rep" / "t4_matrix_addition2d.ncu-rep"
    assert fleetbench("roofline", "--ncu", str(report), "--results-dir", str(tmp_path), "--run-id", "c") == 0
    (from_ncu,) = read_records(tmp_path / "c")
    (point,) = from_ncu.summary["points"]
    assert point["short"] == "matrix_addition2D" and point["side"] == "memory"
    assert from_ncu.device == "Tesla T4"


@pytest.mark.realdata
def test_ncu_summarize_json_reports_absent_counters_as_null(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    assert fleetbench("ncu", "summarize", str(FIXTURES / "ncu-rep" / "gh200_elementwise.ncu-rep"), "--json") == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    kernel = data["kernels"][0]
    assert kernel["compute_sol"] is None and kernel["memory_sol"] is None and kernel["cls"] == "unknown"
    assert kernel["duration_s"] == pytest.approx(141920e-9)
    assert data["overview"]["devices"] == ["NVIDIA GH200 480GB"]


@pytest.mark.realdata
def test_ncu_summarize_table_and_record(
    tmp_path: Path, fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    csv = FIXTURES / "ncu-csv" / "rtx5070_details_gemm_tiled.csv"
    assert fleetbench("ncu", "summarize", str(csv)) == 0
    out = capsys.readouterr().out
    assert "gemm_tiled_kernel" in out and "88.9%" in out and "absent" in out
    assert fleetbench("ncu", "summarize", str(csv), "--record", "--results-dir", str(tmp_path), "--run-id", "n") == 0
    (record,) = read_records(tmp_path / "n")
    label = record.summary["ncu"]["top_kernels"][0]["label"]
    assert record.metric("fleetbench_kernel_compute_sol_ratio", kernel=label) == pytest.approx(0.889)
    assert record.metric("fleetbench_kernel_memory_sol_ratio", kernel=label) is None  # absent: no series at all
    assert record.metric("fleetbench_kernel_class_info", kernel=label, **{"class": "unknown"}) == 1


@pytest.mark.realdata
def test_ncu_summarize_of_the_failed_capture(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    code = fleetbench("ncu", "summarize", str(FIXTURES / "ncu-csv" / "b200_raw_failed_capture.csv"))
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "holds no kernel data" in lines[0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
def test_profile_on_the_gpu_sees_kernels(tmp_path: Path, fleetbench: Callable[..., int]) -> None:
    code = fleetbench(
        "profile",
        "--workload",
        "linear",
        "--device",
        "cuda",
        "--results-dir",
        str(tmp_path),
        "--run-id",
        "g",
        "--set",
        "profile.linear_size=2048",
        "--set",
        "profile.linear_batch=512",
        "--set",
        f"profile.peaks_cache_dir={tmp_path / 'peaks'}",
        "--set",
        "profile.peak_matmul_size=2048",
        "--set",
        "profile.peak_copy_mib=256",
    )
    assert code == 0
    record = profile_record(tmp_path / "g")
    assert record.backend == "cuda" and record.summary["workload"]["dtype"] == "float16"
    assert (tmp_path / "g" / "profile" / "key_averages.txt").read_text().startswith("sorted by self_device_time_total")
    (device,) = record.summary["trace"]["device_breakdown"]
    assert device["compute_s"] > 0 and sum(device["shares"].values()) == pytest.approx(1.0)
    assert record.summary["trace"]["top_kernels"], "the CUDA trace holds kernels"
    kernel = record.summary["trace"]["top_kernels"][0]["label"]
    assert record.metric("fleetbench_kernel_duration_seconds", kernel=kernel) > 0
    assert record.metric("fleetbench_profile_time_share_ratio", gpu=device["device"], category="compute") > 0
    mm = next(row for row in record.summary["top_ops"] if row["name"] in ("aten::mm", "aten::addmm"))
    assert mm["dtype"] == "float16" and mm["flop_per_second"] > 1e12
