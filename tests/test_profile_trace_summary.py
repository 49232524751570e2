"""Trace summary on real PyTorch Chrome traces: temporal breakdown (HTA), top kernels/ops, launch gaps."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from fleetbench.errors import UserError
from fleetbench.profile.trace.breakdown import subtract
from fleetbench.profile.trace.summary import summarize_trace
from testdata import OWN_DATA_DIR, get_test_data_dir

FIXTURES = get_test_data_dir()
GEMM = FIXTURES / "torch-trace" / "a100_gemm_trace.json"
ALEXNET = FIXTURES / "torch-trace" / "a100_alexnet_trace.json.gz"


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def sweep_breakdown(path: Path) -> dict[str, float]:
    """An independent reference: walk every elementary time segment and give it to the first active
    category in HTA's priority (computation, then communication, then memory), else idle."""
    events = [
        e
        for e in load(path)["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]

    def kind(e: dict[str, Any]) -> str:
        if "nccl" in e["name"].lower():
            return "communication"
        return "memory" if e["cat"] != "kernel" else "compute"

    points = sorted({float(e["ts"]) for e in events} | {float(e["ts"]) + float(e["dur"]) for e in events})
    totals = dict.fromkeys(("compute", "communication", "memory", "idle"), 0.0)
    for start, end in itertools.pairwise(points):
        middle = (start + end) / 2
        active = {kind(e) for e in events if float(e["ts"]) <= middle < float(e["ts"]) + float(e["dur"])}
        winner = next((k for k in ("compute", "communication", "memory") if k in active), "idle")
        totals[winner] += (end - start) * 1e-6
    return totals


@pytest.mark.realdata
@pytest.mark.parametrize("trace", [GEMM, ALEXNET], ids=lambda p: p.name)
def test_breakdown_matches_an_independent_sweep(trace: Path) -> None:
    summary = summarize_trace(trace)
    assert summary.has_device_events and summary.note == ""
    assert len(summary.devices) == 1
    device = summary.devices[0]
    reference = sweep_breakdown(trace)
    for category, seconds in reference.items():
        measured = getattr(device, f"{category}_s")
        assert measured == pytest.approx(seconds, rel=1e-6, abs=1e-9), category
    assert sum(device.shares.values()) == pytest.approx(1.0)
    assert device.span_s == pytest.approx(sum(reference.values()))


@pytest.mark.realdata
def test_alexnet_trace_has_copies_syncs_left_out_and_launch_gaps() -> None:
    summary = summarize_trace(ALEXNET)
    device = summary.devices[0]
    assert device.memory_s > 0 and device.compute_s > 0 and device.idle_s > 0
    # 79 kernels + 16 memcpys + 3 memsets; the 41 cuda_sync events are waits, not device work
    assert device.events == 79 + 16 + 3
    assert summary.launch is not None and summary.launch.launches == 98
    assert 0 < summary.launch.delay_median_s <= summary.launch.delay_p90_s <= summary.launch.delay_max_s
    assert summary.launch.host_wait_s > 0
    assert summary.device_names[0] == "NVIDIA A100-PG509-200"
    assert summary.top_kernels[0].total_s >= summary.top_kernels[-1].total_s
    assert summary.top_ops and summary.top_ops[0].self_s is not None


@pytest.mark.realdata
def test_gemm_trace_top_kernel_and_ops() -> None:
    summary = summarize_trace(GEMM)
    top = summary.top_kernels[0]
    assert top.name == "ampere_fp16_s16816gemm_fp16_128x256_ldg8_f2f_stages_64x3_nn"
    assert top.count == 5
    expected = sum(e["dur"] for e in load(GEMM)["traceEvents"] if e.get("cat") == "kernel") * 1e-6
    assert top.total_s == pytest.approx(expected)
    ops = {o.name: o for o in summary.top_ops}
    assert ops["aten::mm"].count == 5
    # aten::matmul wraps aten::mm: its self time is its duration minus the nested mm calls
    assert ops["aten::matmul"].self_s == pytest.approx(ops["aten::matmul"].total_s - ops["aten::mm"].total_s, abs=1e-9)


@pytest.mark.realdata
def test_plain_and_gzip_traces_give_the_same_summary(tmp_path: Path) -> None:
    packed = tmp_path / "gemm.json.gz"
    with GEMM.open("rb") as source, gzip.open(packed, "wb") as target:
        shutil.copyfileobj(source, target)
    plain, gz = summarize_trace(GEMM).to_dict(), summarize_trace(packed).to_dict()
    plain.pop("path"), gz.pop("path")
    assert plain == gz


def test_a_cpu_only_trace_says_so_and_breaks_the_cpu_down(tmp_path: Path) -> None:
    a = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            torch.mm(a, a)
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    summary = summarize_trace(path)
    assert not summary.has_device_events
    assert "no GPU events" in summary.note
    (cpu,) = summary.devices
    assert cpu.device == "cpu" and cpu.compute_s > 0 and cpu.communication_total_s == 0
    assert cpu.comm_overlap_ratio is None
    assert sum(cpu.shares.values()) == pytest.approx(1.0)
    assert {o.name for o in summary.top_ops} >= {"aten::mm"}
    assert next(o for o in summary.top_ops if o.name == "aten::mm").count == 3


def test_communication_overlap_and_exposure(tmp_path: Path) -> None:
    """HTA's split on a constructed trace: NCCL partly under compute, a memcpy under both."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 100, "args": {"device": 0}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclDevKernel_AllReduce",
            "pid": 0,
            "tid": 9,
            "ts": 60,
            "dur": 80,
            "args": {"device": 0},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD",
            "pid": 0,
            "tid": 8,
            "ts": 130,
            "dur": 40,
            "args": {"device": 0},
        },
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 50, "args": {"device": 0}},
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 3}}))
    device = summarize_trace(trace).devices[0]
    assert device.rank == 3
    us = 1e-6
    assert device.compute_s == pytest.approx(150 * us)
    assert device.communication_total_s == pytest.approx(80 * us)
    assert device.comm_compute_overlap_s == pytest.approx(40 * us)
    assert device.communication_s == pytest.approx(40 * us)  # exposed: 100..140
    assert device.memory_s == pytest.approx(30 * us)  # 140..170, the part not under NCCL
    assert device.idle_s == pytest.approx(30 * us)  # 170..200
    assert device.span_s == pytest.approx(250 * us)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"traceEvents": [', "not a readable Chrome trace"),
        (b"[1, 2", "not a readable Chrome trace"),
        (b'{"foo": 1}', "no traceEvents"),
    ],
)
def test_damaged_traces_give_one_clear_line(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UserError, match=fragment) as info:
        summarize_trace(path)
    assert "\n" not in str(info.value)


@pytest.mark.realdata
def test_truncated_gzip_trace(tmp_path: Path) -> None:
    damaged = tmp_path / "cut.json.gz"
    damaged.write_bytes(ALEXNET.read_bytes()[:5000])
    with pytest.raises(UserError, match="not a readable Chrome trace"):
        summarize_trace(damaged)


TRACE_FILTER = FIXTURES / "hta" / "trace_filter"
FSDP2_CPU = OWN_DATA_DIR / "fsdp2-cpu"


@pytest.mark.realdata
def test_window_steps_leaves_out_the_last_step_and_says_so() -> None:
    rank0 = TRACE_FILTER / "sampled_rank-0.json.gz"
    steps, whole = summarize_trace(rank0), summarize_trace(rank0, window="trace")
    assert steps.window.kind == "steps" and steps.window.steps == ["ProfilerStep#551"]
    assert steps.window.left_out == ["ProfilerStep#552"]
    assert "ProfilerStep#552 left out" in steps.window.description
    assert whole.window.kind == "trace" and whole.window.left_out == []
    assert whole.window.steps == ["ProfilerStep#551", "ProfilerStep#552"]
    assert steps.devices[0].events < whole.devices[0].events
    assert steps.devices[0].span_s < whole.devices[0].span_s
    # per step: the one step of the window; its device work is what it launched
    (step,) = steps.steps
    assert step.name == "ProfilerStep#551" and step.duration_s == pytest.approx(0.607312)
    assert [s.name for s in whole.steps] == ["ProfilerStep#551", "ProfilerStep#552"]
    assert step.devices[0].events <= steps.devices[0].events


@pytest.mark.realdata
def test_window_steps_with_fewer_than_two_steps_is_the_whole_trace() -> None:
    summary = summarize_trace(GEMM)
    assert summary.window.kind == "steps" and summary.window.steps == [] and summary.steps == []
    assert "the whole trace" in summary.window.description
    assert summary.to_dict() | {"window": None} == summarize_trace(GEMM, window="trace").to_dict() | {"window": None}


@pytest.mark.realdata
def test_unknown_window_is_a_user_error() -> None:
    with pytest.raises(UserError, match="window 'last'"):
        summarize_trace(GEMM, window="last")


def test_cpu_fsdp2_ranks_count_gloo_collectives_as_communication() -> None:
    """Our 2-rank gloo capture: FSDP2's all-gathers and reduce-scatters run on gloo's thread."""
    for rank, trace in enumerate(sorted(FSDP2_CPU.glob("*.json.gz"))):
        summary = summarize_trace(trace)
        assert summary.rank == rank and summary.note.startswith("no GPU events")
        assert summary.window.steps == ["ProfilerStep#2", "ProfilerStep#3"]
        assert summary.window.left_out == ["ProfilerStep#4"]
        (cpu,) = summary.devices
        assert cpu.communication_total_s > 0.01 and cpu.compute_s > cpu.communication_s > 0
        assert 0 < (cpu.comm_overlap_ratio or 0) < 1
        assert cpu.memory_s == 0 and sum(cpu.shares.values()) == pytest.approx(1.0)
        assert [s.name for s in summary.steps] == ["ProfilerStep#2", "ProfilerStep#3"]
        for step in summary.steps:
            (in_step,) = step.devices
            assert in_step.communication_total_s > 0 and in_step.span_s <= step.duration_s * 1.01
        names = {o.name for o in summary.top_ops}
        assert "gloo:all_gather" in names


def op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def test_cpu_breakdown_time_inside_a_collective_is_communication_only(tmp_path: Path) -> None:
    """A copy nested in gloo's collective is part of it; a collective nested in an op is not compute."""
    events = [
        op("gloo:all_gather", 0, 100, tid=2, cat="user_annotation"),
        op("aten::copy_", 10, 20, tid=2),  # inside the collective, on gloo's thread
        op("autograd::engine::evaluate_function: AddmmBackward0", 50, 100, tid=1),
        op("c10d::_reduce_scatter_base_", 120, 20, tid=1),  # inside the backward node
        op("FSDP::pre_forward", 0, 200, tid=1, cat="user_annotation"),  # an annotation, not work
        op("ProfilerStep#7", 0, 200, tid=1, cat="user_annotation"),
    ]
    trace = tmp_path / "cpu.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    (cpu,) = summarize_trace(trace).devices
    us = 1e-6
    assert cpu.span_s == pytest.approx(150 * us)  # ops from 0 to 150
    assert cpu.compute_s == pytest.approx(80 * us)  # 50..120 and 140..150
    assert cpu.communication_total_s == pytest.approx(120 * us)  # 0..100 and 120..140
    assert cpu.comm_compute_overlap_s == pytest.approx(50 * us)  # 50..100
    assert cpu.idle_s == 0


@pytest.mark.realdata
def test_hta_cpu_only_trace_of_a_gloo_rank() -> None:
    """HTA's own CPU-only test trace: one step, gloo all-reduces on two threads."""
    summary = summarize_trace(FIXTURES / "hta" / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert summary.rank == 34 and summary.window.steps == ["ProfilerStep#551"]
    (cpu,) = summary.devices
    assert cpu.communication_total_s > 0.9 * cpu.busy_s
    assert summary.top_ops[0].name == "gloo:all_reduce"


def test_device_events_launched_before_the_trace_are_kept_by_their_start(tmp_path: Path) -> None:
    def kernel(ts: int, corr: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts, "dur": 10,
                "args": {"device": 0, "stream": 7, "correlation": corr}}  # fmt: skip

    def launch(ts: int, corr: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                "dur": 2, "args": {"correlation": corr}}  # fmt: skip

    events = [
        op("ProfilerStep#1", 100, 100, cat="user_annotation"),
        op("ProfilerStep#2", 200, 100, cat="user_annotation"),
        kernel(95, 1),  # launched before the trace: no runtime call for it
        kernel(150, 2),
        launch(120, 2),
        kernel(250, 3),  # launched in the last step: left out
        launch(210, 3),
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    summary = summarize_trace(trace)
    (device,) = summary.devices
    assert device.events == 2 and device.span_s == pytest.approx(65e-6)
    assert any("no launch in the trace" in d for d in summary.hta_differences)
    assert summary.launch is not None and summary.launch.launches == 1


def test_subtract_intervals() -> None:
    assert subtract([(0, 10), (20, 30)], [(2, 4), (8, 22), (25, 26)]) == [(0, 2), (4, 8), (22, 25), (26, 30)]
    assert subtract([(0, 10)], []) == [(0, 10)]
    assert subtract([(0, 10)], [(-5, 15)]) == []
