"""Our trace summary against Holistic Trace Analysis itself, on real traces.

Where the definitions agree (window `steps`, HTA's default), our temporal breakdown and
communication-computation overlap equal HTA's within 1 %. Each difference we keep on purpose has a
test that shows it on a trace crafted from a real one, and that it is the whole difference:
HTA rounds fractional-µs timestamps inward, counts cuda_sync events as device work, and drops
device events whose launch is not in the trace.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetbench.profile.trace.breakdown import length, merge
from fleetbench.profile.trace.summary import TraceSummary, summarize_trace
from testdata import OWN_DATA_DIR, get_test_data_dir

hta_trace_analysis = pytest.importorskip(
    "hta.trace_analysis", reason="HolisticTraceAnalysis is not installed (pip install -e '.[dev]')"
)

# HTA's own deprecation and 0/0 warnings (overlap without communication) are not ours to act on
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:.*inplace.*"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

DATA = get_test_data_dir()
TRACE_FILTER = DATA / "hta" / "trace_filter"  # 2 ranks of an NCCL job, whole-µs times
NCCL = DATA / "hta" / "nccl_parser_config" / "nccl_data.json.gz"  # fractional-µs times
GEMM = DATA / "torch-trace" / "a100_gemm_trace.json"  # fractional-µs times, no steps
ALEXNET = DATA / "torch-trace" / "a100_alexnet_trace.json.gz"  # cuda_sync events, no steps
FSDP2_CPU = OWN_DATA_DIR / "fsdp2-cpu"
REL = 0.01


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def write(data: dict[str, Any], path: Path) -> Path:
    """A crafted trace, as plain JSON (quicker to write than gzip)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def folder_of(tmp: Path, *traces: Path) -> Path:
    """HTA reads a folder: one with copies of these traces."""
    tmp.mkdir(parents=True, exist_ok=True)
    for trace in traces:
        shutil.copy(trace, tmp / trace.name)
    return tmp


def hta_figures(trace_dir: Path) -> dict[int, dict[str, float]]:
    """HTA's temporal breakdown (µs) and overlap (0-1) per rank, window: HTA's default."""
    analysis = hta_trace_analysis.TraceAnalysis(trace_dir=str(trace_dir))
    breakdown = analysis.get_temporal_breakdown(visualize=False)
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    out = {}
    for _, row in breakdown.iterrows():
        rank = int(row["rank"])
        share = overlap.loc[overlap["rank"] == rank, "comp_comm_overlap_pctg"].iloc[0]
        out[rank] = {
            "idle": float(row["idle_time(us)"]),
            "compute": float(row["compute_time(us)"]),
            "non_compute": float(row["non_compute_time(us)"]),
            "span": float(row["kernel_time(us)"]),
            "overlap": float(share) / 100,
        }
    return out


def our_figures(summary: TraceSummary) -> dict[str, float]:
    (device,) = summary.devices
    overlap = device.comm_overlap_ratio
    return {
        "idle": device.idle_s * 1e6,
        "compute": device.compute_s * 1e6,
        "non_compute": (device.communication_s + device.memory_s) * 1e6,
        "span": device.span_s * 1e6,
        "overlap": math.nan if overlap is None else overlap,
    }


def assert_agree(ours: dict[str, float], theirs: dict[str, float], rel: float = REL) -> None:
    for key in ("idle", "compute", "non_compute", "span"):
        assert ours[key] == pytest.approx(theirs[key], rel=rel, abs=1.0), key  # 1 µs: HTA's own unit
    if math.isnan(theirs["overlap"]):  # HTA divides 0 by 0 without communication
        assert math.isnan(ours["overlap"])
    else:  # HTA gives the overlap as a percentage rounded to 2 decimals
        assert ours["overlap"] == pytest.approx(theirs["overlap"], rel=rel, abs=1e-4)


@pytest.fixture(scope="module")
def hta_trace_filter(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, float]]:
    return hta_figures(TRACE_FILTER)


@pytest.mark.realdata
def test_two_nccl_ranks_agree_with_hta(hta_trace_filter: dict[int, dict[str, float]]) -> None:
    summaries = {s.rank: s for s in (summarize_trace(p) for p in sorted(TRACE_FILTER.glob("*.json.gz")))}
    assert set(summaries) == set(hta_trace_filter) == {0, 1}
    for rank, theirs in hta_trace_filter.items():
        summary = summaries[rank]
        assert summary.window.kind == "steps"
        assert summary.window.steps == ["ProfilerStep#551"] and summary.window.left_out == ["ProfilerStep#552"]
        assert summary.hta_differences == []
        ours = our_figures(summary)
        assert_agree(ours, theirs)
        assert ours["overlap"] > 0.1  # NCCL under compute: the figure is not trivially 0


@pytest.mark.realdata
def test_without_hta_rounding_fractional_traces_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTA_DISABLE_NS_ROUNDING=1 switches HTA's rounding off: then the figures agree on these traces too."""
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    for trace in (NCCL, GEMM):
        theirs = hta_figures(folder_of(tmp_path / trace.name, trace))[0]
        assert_agree(our_figures(summarize_trace(trace)), theirs)


@pytest.mark.realdata
def test_difference_hta_rounds_fractional_timestamps_inward(tmp_path: Path) -> None:
    """HTA takes ceil(start) and floor(end) of every event: short device events lose up to 2 µs each.

    Ours on a copy with exactly that rounding applied equals HTA on the original; on the original
    HTA reports less busy time (more idle) than the trace holds.
    """
    data = load(NCCL)
    for event in data["traceEvents"]:
        if event.get("ph") == "X" and isinstance(event.get("ts"), float):
            start, end = math.ceil(event["ts"]), math.floor(event["ts"] + event.get("dur", 0))
            event["ts"], event["dur"] = start, end - start
    rounded = write(data, tmp_path / "rounded" / "nccl_data.json")
    theirs = hta_figures(folder_of(tmp_path / "original", NCCL))[0]
    exact = our_figures(summarize_trace(NCCL))
    assert_agree(our_figures(summarize_trace(rounded)), theirs, rel=1e-6)
    assert exact["compute"] > theirs["compute"] * 1.01  # 2.3 % of compute lost to rounding
    assert exact["idle"] < theirs["idle"]
    assert any("fractional" in d for d in summarize_trace(NCCL).hta_differences)


@pytest.mark.realdata
def test_difference_hta_counts_cuda_sync_as_device_work(tmp_path: Path) -> None:
    """cuda_sync events are the host waiting; HTA puts every one on the device's busy time.

    Without them the AlexNet trace agrees with HTA; with them HTA's busy time and span are the
    union of the device events and the syncs.
    """
    data = load(ALEXNET)
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    syncs = [e for e in events if e.get("cat") == "cuda_sync"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(syncs) == 41
    stripped = write(
        {**data, "traceEvents": [e for e in data["traceEvents"] if e.get("cat") != "cuda_sync"]},
        tmp_path / "stripped" / "alexnet.json",
    )
    ours = our_figures(summarize_trace(ALEXNET))
    assert ours == our_figures(summarize_trace(stripped))  # we leave them out already
    assert_agree(ours, hta_figures(stripped.parent)[0], rel=1e-6)

    theirs = hta_figures(folder_of(tmp_path / "original", ALEXNET))[0]
    with_syncs = merge((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in device + syncs)
    assert theirs["span"] == pytest.approx(with_syncs[-1][1] - with_syncs[0][0])
    assert theirs["span"] - theirs["idle"] == pytest.approx(length(with_syncs))
    assert theirs["span"] > ours["span"] * 1.005
    assert any("cuda_sync" in d for d in summarize_trace(ALEXNET).hta_differences)


def drop_launches(data: dict[str, Any], chosen: Callable[[dict[str, Any]], bool]) -> set[int]:
    """Remove the runtime calls that launched the `chosen` device events; their correlation ids."""
    correlations = {
        e["args"]["correlation"]
        for e in data["traceEvents"]
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and chosen(e)
    }
    data["traceEvents"] = [
        e
        for e in data["traceEvents"]
        if not (e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in correlations)
    ]
    return correlations


@pytest.mark.realdata
def test_difference_hta_drops_kernels_launched_before_the_trace(tmp_path: Path) -> None:
    """A trace that starts while kernels launched earlier still run: HTA's step window drops them.

    Crafted from rank 0 of the NCCL pair: the launches of the device events that start in the
    first 50 ms of device activity are removed, as if they had happened before the profiler
    started. Ours keeps those events (they ran inside the window); HTA's figures equal ours on a
    copy without the events at all.
    """
    original = TRACE_FILTER / "sampled_rank-0.json.gz"
    data = load(original)
    first = min(e["ts"] for e in data["traceEvents"] if e.get("cat") == "kernel")
    early = drop_launches(data, lambda e: e["ts"] < first + 50_000)
    assert len(early) > 20
    crafted = write(data, tmp_path / "crafted" / "rank-0.json")
    without = write(
        {
            **data,
            "traceEvents": [e for e in data["traceEvents"] if e.get("args", {}).get("correlation") not in early],
        },
        tmp_path / "without" / "rank-0.json",
    )
    ours = summarize_trace(crafted)
    assert our_figures(ours) == pytest.approx(our_figures(summarize_trace(original)))
    assert any("no launch in the trace" in d for d in ours.hta_differences)
    theirs = hta_figures(crafted.parent)[0]
    assert_agree(our_figures(summarize_trace(without)), theirs, rel=1e-6)
    assert theirs["span"] - theirs["idle"] < (our_figures(ours)["span"] - our_figures(ours)["idle"]) * 0.99


def test_hta_reads_a_cpu_fsdp2_capture_but_has_no_breakdown_for_it() -> None:
    """HTA's breakdown needs GPU kernels: on our 2-rank gloo capture it fails and its overlap is NaN.

    Ours breaks the CPU ranks down with the gloo collectives as communication.
    """
    analysis = hta_trace_analysis.TraceAnalysis(trace_dir=str(FSDP2_CPU))
    assert sorted(analysis.t.get_ranks()) == [0, 1]
    with pytest.raises(IndexError):
        analysis.get_temporal_breakdown(visualize=False)
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    assert overlap["comp_comm_overlap_pctg"].isna().all()
    for trace in sorted(FSDP2_CPU.glob("*.json.gz")):
        (cpu,) = summarize_trace(trace).devices
        assert cpu.device == "cpu" and cpu.communication_total_s > 0 and cpu.compute_s > 0


@pytest.mark.realdata
def test_difference_hta_counts_host_events_with_a_stream_id_as_device_work(tmp_path: Path) -> None:
    """Triton/Inductor launch records are host events that carry a stream id; HTA takes every event with a
    stream for GPU work. Crafted from rank 0 of the NCCL pair: the longest cpu_op of the window that lies
    in no kernel gets a stream id. HTA's busy time grows by its length; ours stays, and says why."""
    original = TRACE_FILTER / "sampled_rank-0.json.gz"
    data = load(original)
    events = data["traceEvents"]
    step = next(e for e in events if e.get("name") == "ProfilerStep#551")
    device = merge(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )

    def outside_kernels(e: dict[str, Any]) -> bool:
        start, end = e["ts"], e["ts"] + e["dur"]
        return all(end <= lo or start >= hi for lo, hi in device)

    ops = [
        e
        for e in events
        if e.get("cat") == "cpu_op"
        and step["ts"] <= e["ts"] < step["ts"] + step["dur"]
        and device[0][0] < e["ts"] < device[-1][1]
        and outside_kernels(e)
    ]
    op = max(ops, key=lambda e: e["dur"])
    op.setdefault("args", {})["stream"] = 7
    crafted = write(data, tmp_path / "crafted" / "rank-0.json")
    ours = summarize_trace(crafted)
    assert our_figures(ours) == our_figures(summarize_trace(original))
    assert any("1 host events carry a stream id" in d for d in ours.hta_differences)
    theirs = hta_figures(crafted.parent)[0]
    before = hta_figures(folder_of(tmp_path / "original", original))[0]
    busy = theirs["span"] - theirs["idle"]
    assert busy == pytest.approx(before["span"] - before["idle"] + op["dur"], abs=1.0)
