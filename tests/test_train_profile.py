"""`fleetbench train --profile-steps A:B`: a real 2-rank gloo job through the launcher traces steps A..B
on every rank (FSDP2's collectives included) and leaves those steps out of the run's throughput."""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from fleetbench.config.train import PRESETS
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import read_records
from fleetbench.train.history import read_history

TINY = PRESETS["tiny"]

# On gloo a collective is CPU ops: the c10d op FSDP2 calls and gloo's own.
COLLECTIVE_OPS = ("c10d::_allgather_base_", "c10d::_reduce_scatter_base_", "gloo:all_gather", "gloo:all_reduce")


def fleetbench_train(results: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "fleetbench", "train", "--results-dir", str(results), *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def trace_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        trace = json.load(stream)
    events: list[dict[str, Any]] = trace["traceEvents"]
    return events


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("profiled")
    done = fleetbench_train(
        results,
        "--run-id",
        "prof",
        "--nproc",
        "2",
        "--device",
        "cpu",
        "--preset",
        "tiny",
        "--steps",
        "6",
        "--profile-steps",
        "3:4",
        "--set",
        "train.threads=1",
        "--set",
        "train.peak_flops=1e11",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "profile: steps 3..4 of every rank in" in done.stderr
    return results / "prof"


@pytest.mark.parametrize("rank", [0, 1])
def test_every_rank_writes_a_trace_with_steps_and_collectives(profiled_run: Path, rank: int) -> None:
    folder = profiled_run / "profile"
    (trace,) = folder.glob(f"rank-{rank}.*.pt.trace.json.gz")
    assert trace.name == f"rank-{rank}.steps-3-4.pt.trace.json.gz"
    with gzip.open(trace, "rt", encoding="utf-8") as stream:
        document = json.load(stream)
    # Holistic Trace Analysis takes a trace's rank from here.
    assert document["distributedInfo"]["rank"] == rank and document["distributedInfo"]["backend"] == "gloo"
    names = [e.get("name", "") for e in document["traceEvents"] if e.get("ph") == "X"]
    assert sorted({n for n in names if n.startswith("ProfilerStep#")}) == ["ProfilerStep#3", "ProfilerStep#4"]
    for op in COLLECTIVE_OPS:
        assert op in names, op
    assert any(n.startswith("FSDP::all_gather") for n in names)
    table = (folder / f"rank-{rank}.key_averages.txt").read_text()
    assert table.startswith(f"rank {rank}, steps 3..4 (ProfilerStep#3..#4), sorted by self_cpu_time_total")
    assert "aten::mm" in table and "c10d::_allgather_base_" in table


def test_holistic_trace_analysis_reads_the_folder_as_one_trace_per_rank(profiled_run: Path) -> None:
    trace_analysis = pytest.importorskip("hta.trace_analysis")
    analysis = trace_analysis.TraceAnalysis(trace_dir=str(profiled_run / "profile"))
    assert sorted(analysis.t.traces) == [0, 1]
    for frame in analysis.t.traces.values():
        names = set(analysis.t.symbol_table.sym_table[i] for i in frame["name"].unique())
        # HTA keeps the events before the last ProfilerStep# starts: here step 3 of steps 3..4.
        assert {"ProfilerStep#3", "c10d::_allgather_base_", "gloo:all_gather"} <= names


def rank_record(run_dir: Path, rank: int) -> ResultRecord:
    return next(r for r in read_records(run_dir) if r.rank == rank)


@pytest.mark.parametrize("rank", [0, 1])
def test_profiled_steps_are_excluded_from_the_throughput(profiled_run: Path, rank: int) -> None:
    record = rank_record(profiled_run, rank)
    summary = record.summary
    assert summary["profiled_steps"] == [3, 4] and summary["excluded_steps"] == [2, 4]
    assert summary["excluded_from_throughput"] is True
    assert summary["steady_state_steps"] == 2  # steps 5 and 6: step 1 warms up, 2..4 run with the profiler
    files = [f"profile/rank-{rank}.steps-3-4.pt.trace.json.gz", f"profile/rank-{rank}.key_averages.txt"]
    assert summary["profile_files"] == files
    assert set(files) <= set(record.artifacts)
    # The headline step times are those of steps 5 and 6 (logged every step, so each row is one step).
    rows = {row.step: row.step_s for row in read_history(profiled_run)}
    samples = next(h for h in record.headline if h.metric == "fleetbench_step_seconds").samples
    if rank == 0:  # rank 0's own step times are the history's
        assert samples == pytest.approx([rows[5], rows[6]])
    assert len(samples) == 2
    tokens_per_step = 2 * TINY.batch_size * TINY.seq_len  # 2 ranks
    assert summary["tokens_per_s"] == pytest.approx(tokens_per_step * 2 / sum(samples), rel=1e-6)


def test_bad_profile_steps_stop_the_launcher_in_one_line(tmp_path: Path) -> None:
    done = fleetbench_train(tmp_path, "--device", "cpu", "--nproc", "2", "--steps", "4", "--profile-steps", "3:9")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "fleetbench: error: train.profile_steps=3:9 goes past the run's last step, train.steps=4; "
        "accepted: A:B with 1 <= A <= B <= 4 (e.g. 3:4)"
    ]
    assert not any(tmp_path.iterdir())  # no rank started, no run folder


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
def test_gpu_trace_has_kernels_and_a_memory_snapshot(tmp_path: Path) -> None:
    gpus = torch.cuda.device_count()
    nproc = min(gpus, 2)
    done = fleetbench_train(
        tmp_path,
        "--run-id",
        "gpu",
        "--device",
        "cuda",
        "--nproc",
        str(nproc),
        "--preset",
        "small",
        "--steps",
        "5",
        "--profile-steps",
        "3:4",
        "--set",
        "train.profile_memory_snapshot=true",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / "gpu" / "profile"
    events = trace_events(folder / "rank-0.steps-3-4.pt.trace.json.gz")
    kernels = [e["name"] for e in events if e.get("cat") == "kernel"]
    assert kernels, "the CUDA trace holds kernels"
    if nproc > 1:  # FSDP2's collectives as NCCL kernels
        assert any(name.startswith("ncclDevKernel") or "nccl" in name.lower() for name in kernels)
    table = (folder / "rank-0.key_averages.txt").read_text()
    assert "sorted by self_device_time_total" in table.splitlines()[0]
    snapshot = folder / "rank-0.memory_snapshot.pickle"
    with snapshot.open("rb") as stream:
        state = pickle.load(stream)
    assert state["segments"] and state["device_traces"]
    record = rank_record(tmp_path / "gpu", 0)
    assert "profile/rank-0.memory_snapshot.pickle" in record.summary["profile_files"]
