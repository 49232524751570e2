"""`fleetbench ncu run`: the command it builds and how it explains ncu's usual failures.

Nsight Compute cannot run here (no GPU), so these tests put test doubles of the `ncu` binary on PATH:
small executables that print the very texts NVIDIA's ncu prints (ERR_NVGPUCTRPERM, "No kernels were
profiled") or that write a real report from tests/data where ncu would, and record the
arguments they were given. The failure detection and the argument passing are what is under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from conftest import run_cli
from fleetbench.results.store import read_records
from testdata import get_test_data_dir

FIXTURES = get_test_data_dir()
REPORT = FIXTURES / "ncu-rep" / "gtx1660s_naive_gemm.ncu-rep"
PERMISSION_TEXT = (
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
    "on the target device 0. For instructions on enabling permissions and to get more information see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def fake_ncu(folder: Path, body: str) -> Path:
    """An executable named `ncu` in `folder` (a test double), running `body` as Python with argv."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ncu"
    path.write_text(f"#!{sys.executable}\nimport json, shutil, sys, time\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(0o755)
    return path


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("fleetbench: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_missing_ncu_is_explained_and_nothing_is_written(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code = fleetbench("ncu", "run", "--results-dir", str(tmp_path / "results"), "--", "python", "x.py")
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "'ncu' was not found on PATH" in line and "profile.ncu.executable" in line
    assert not (tmp_path / "results").exists()


def test_counter_permission_error_names_both_fixes(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    fake_ncu(
        bin_dir,
        f"print('==PROF== Connected to process 4242 (/usr/bin/python3)')\n"
        f"print({PERMISSION_TEXT!r})\nprint('==PROF== Disconnected from process 4242')\nsys.exit(1)",
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    results = tmp_path / "results"
    code = fleetbench("ncu", "run", "--results-dir", str(results), "--run-id", "perm", "--", "python", "x.py")
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "ERR_NVGPUCTRPERM" in line and "--cap-add SYS_ADMIN" in line
    assert "NVreg_RestrictProfilingToAdminUsers=0" in line
    (record,) = read_records(results / "perm")  # the run started, so it is recorded as failed
    assert record.status == "failed" and "ERR_NVGPUCTRPERM" in (record.error or "")


def test_no_kernels_profiled(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    fake_ncu(bin_dir, "print('==PROF== Disconnected from process 7')\nprint('==WARNING== No kernels were profiled.')")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code = fleetbench("ncu", "run", "--results-dir", str(tmp_path / "r"), "--kernel-name", "nope", "--", "python")
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "ncu profiled no kernels" in line and "--kernel-name" in line


def test_other_failures_quote_ncus_error(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    fake_ncu(bin_dir, "print('==ERROR== Unknown Error on device 0.')\nsys.exit(1)")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code = fleetbench("ncu", "run", "--results-dir", str(tmp_path / "r"), "--", "python", "x.py")
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "wrote no report" in line and "==ERROR== Unknown Error on device 0." in line


WRITE_REPORT = f"""
with open(sys.argv[0] + '.args.json', 'w') as handle:
    json.dump(args, handle)
report = args[args.index('-o') + 1]
shutil.copy({str(REPORT)!r}, report)
print('==PROF== Report: ' + report)
"""


@pytest.mark.realdata
def test_a_capture_is_summarised_and_recorded(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ncu_report", reason="the summary reads the .ncu-rep with NVIDIA's ncu-report package")
    bin_dir = tmp_path / "bin"
    ncu = fake_ncu(bin_dir, WRITE_REPORT)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    results = tmp_path / "results"
    code = fleetbench(
        "ncu",
        "run",
        "--results-dir",
        str(results),
        "--run-id",
        "cap",
        "--kernel-name",
        "regex:gemm",
        "--launch-skip",
        "2",
        "--launch-count",
        "3",
        "--clock-control",
        "none",
        "--",
        "python",
        "train.py",
        "--steps",
        "2",
    )
    assert code == 0
    args = json.loads(Path(str(ncu) + ".args.json").read_text())
    report = results / "cap" / "ncu" / "report.ncu-rep"
    assert args == [
        "--set",
        "full",
        "--target-processes",
        "all",
        "--clock-control",
        "none",
        "-f",
        "-o",
        str(report),
        "--kernel-name",
        "regex:gemm",
        "--launch-skip",
        "2",
        "--launch-count",
        "3",
        "python",
        "train.py",
        "--steps",
        "2",
    ]
    (record,) = read_records(results / "cap")
    assert record.benchmark == "ncu" and record.status == "ok"
    assert record.summary["ncu"]["launches"] == 2
    top = record.summary["ncu"]["top_kernels"][0]
    assert top["short"] == "naive_gemm" and top["name"].startswith("naive_gemm(const float *")
    label = top["label"]
    assert record.metric("fleetbench_kernel_compute_sol_ratio", kernel=label) == pytest.approx(top["compute_sol"])
    # compute and memory SOL both 83 %: NVIDIA's "High Throughput", compute first on a tie (as its rule says)
    assert record.metric("fleetbench_kernel_class_info", kernel=label, **{"class": "compute_bound"}) == 1
    assert record.metric("fleetbench_kernel_launches_total", kernel=label) == 2
    for name in ("ncu/report.ncu-rep", "ncu/ncu_summary.json", "ncu/roofline.png", "ncu/roofline.json"):
        assert name in record.artifacts and (results / "cap" / name).is_file()


@pytest.mark.realdata
def test_without_a_program_ncu_profiles_the_configured_workload(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ncu_report", reason="the summary reads the .ncu-rep with NVIDIA's ncu-report package")
    bin_dir = tmp_path / "bin"
    ncu = fake_ncu(bin_dir, WRITE_REPORT)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code = fleetbench("ncu", "run", "--results-dir", str(tmp_path / "r"), "--set", "profile.workload=linear")
    assert code == 0
    args = json.loads(Path(str(ncu) + ".args.json").read_text())
    nvtx = args.index("--nvtx")
    assert args[nvtx + 1 : nvtx + 5] == ["--nvtx-include", "fleetbench_profiled/", "--nvtx-push-pop-scope", "process"]
    program = args[nvtx + 5 :]
    assert program[:4] == [sys.executable, "-m", "fleetbench.profile.ncu.target", "--config"]
    # The target reads this run's own resolved config, so it profiles exactly the configured workload.
    target_config = Path(program[4])
    assert target_config.parent.name == "ncu" and target_config.parent.parent.parent == tmp_path / "r"
    assert yaml.safe_load(target_config.read_text())["profile"]["workload"] == "linear"


def test_a_hanging_capture_is_stopped(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    fake_ncu(bin_dir, "time.sleep(60)")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code = fleetbench(
        "ncu", "run", "--results-dir", str(tmp_path / "r"), "--set", "profile.ncu.timeout_s=1", "--", "python"
    )
    assert code == 2 and "ran longer than profile.ncu.timeout_s=1 s" in one_error_line(capsys.readouterr().err)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_the_ncu_target_refuses_to_run_without_a_gpu() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fleetbench.profile.ncu.target"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FLEETBENCH_PUSHGATEWAY": ""},
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "fleetbench: error: the ncu target needs a CUDA GPU (Nsight Compute profiles "
        "CUDA kernels); use fleetbench profile on the CPU"
    )


@pytest.mark.realdata
def test_without_ncu_report_the_capture_is_kept_and_the_record_says_how_to_summarise(
    tmp_path: Path, fleetbench: Callable[..., int], monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    fake_ncu(bin_dir, WRITE_REPORT)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # as if the [ncu] extra were not installed
    code = fleetbench("ncu", "run", "--results-dir", str(tmp_path / "r"), "--run-id", "k", "--", "python", "x.py")
    assert code == 0
    (record,) = read_records(tmp_path / "r" / "k")
    assert record.status == "ok" and (tmp_path / "r" / "k" / "ncu" / "report.ncu-rep").is_file()
    assert "pip install 'fleetbench[ncu]'" in record.summary["notes"][0]


@pytest.mark.realdata
def test_python_m_fleetbench_summarises_the_capture_in_a_worker_process(tmp_path: Path) -> None:
    """`python -m fleetbench ncu run` as a user runs it, the summary read in a spawned worker, the CLI run once."""
    pytest.importorskip("ncu_report", reason="the summary reads the .ncu-rep with NVIDIA's ncu-report package")
    bin_dir = tmp_path / "bin"
    fake_ncu(bin_dir, WRITE_REPORT)
    done = run_cli(
        "ncu", "run", "--results-dir", str(tmp_path / "r"), "--run-id", "m", "--", "python", "x.py",
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record,) = read_records(tmp_path / "r" / "m")
    assert record.status == "ok" and record.summary["ncu"]["launches"] == 2
    assert done.stderr.count("result record:") + done.stdout.count("result record:") == 1, "the CLI ran once"


def test_a_damaged_report_read_apart_is_one_clear_error(tmp_path: Path) -> None:
    from fleetbench.errors import UserError
    from fleetbench.profile.classify import Thresholds
    from fleetbench.profile.jobs.ncu import summarize_apart

    damaged = tmp_path / "report.ncu-rep"
    damaged.write_bytes(b"NVR\x00" + b"\x07" * 64)
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    with pytest.raises(UserError, match="damaged"):
        summarize_apart(damaged, Thresholds(), None, None)
