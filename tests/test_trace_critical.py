"""The critical path of one step (`fleetbench trace critical-path`): planted traces whose path is known,
and the same path as Holistic Trace Analysis' critical path analysis on real traces.

Where our graph and HTA's agree, the path's length and its time in each of HTA's classes are equal
(to the float on whole-µs traces; HTA's rounding of fractional µs switched off on the others). The
one difference we keep is named in docs/trace.md and shown here: HTA 0.5.0 under pandas 3 loses
every event sync (cudaStreamWaitEvent, cudaEventSynchronize).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetbench.errors import UserError
from fleetbench.profile.trace import critical
from fleetbench.profile.trace.comm import CommRules
from fleetbench.profile.trace.critical import CriticalPath, critical_path, trace_of_rank
from testdata import get_test_data_dir

DATA = get_test_data_dir()
SAMPLED_RANK0 = DATA / "hta" / "trace_filter" / "sampled_rank-0.json.gz"  # whole µs, correlation ids, 2 steps
NCCL = DATA / "hta" / "nccl_parser_config" / "nccl_data.json.gz"  # fractional µs, ac2g flows, 3 steps
GEMM = DATA / "torch-trace" / "a100_gemm_trace.json"  # fractional µs, no steps
ALEXNET = DATA / "torch-trace" / "a100_alexnet_trace.json.gz"  # whole µs, cuda_sync events, no steps
CPU_ONLY = DATA / "hta" / "cpu_only"
HTA_RULES = CommRules("hta")

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*inplace.*"),
    pytest.mark.filterwarnings("ignore:.*[Cc]opy.*"),
]


# ---- planted traces: the trace-event format torch.profiler writes, with an obvious answer ----


class Planted:
    """A trace built event by event: host thread 100, device 0, flows for every launch."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.correlation = 0

    def host(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": 100, "ts": ts, "dur": dur})

    def call(self, name: str, ts: float, dur: float) -> int:
        """A runtime call; its correlation id."""
        self.correlation += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": 100,
                "tid": 100,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": self.correlation},
            }
        )
        return self.correlation

    def kernel(self, name: str, launch: tuple[float, float], ts: float, dur: float, stream: int = 7) -> int:
        """A kernel launched by a cudaLaunchKernel at `launch` (start, duration), with its ac2g flow."""
        corr = self.call("cudaLaunchKernel", *launch)
        args = {"correlation": corr, "stream": stream, "device": 0}
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}
        )
        flow = {"cat": "ac2g", "name": "ac2g", "id": corr, "bp": "e"}
        self.events.append({**flow, "ph": "s", "pid": 100, "tid": 100, "ts": launch[0]})
        self.events.append({**flow, "ph": "f", "pid": 0, "tid": stream, "ts": ts})
        return corr

    def sync(self, kind: str, corr: int, ts: float, dur: float, stream: int, **extra: Any) -> None:
        """The cuda_sync event CUPTI records on the device for a host wait."""
        args = {"correlation": corr, "stream": stream, "device": 0, "cuda_sync_kind": kind, **extra}
        self.events.append(
            {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}
        )

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"traceEvents": self.events, "distributedInfo": {"rank": 0}}))
        return path


def long_kernel_waited_for(path: Path, step: bool = False) -> Path:
    """aten::mm (0-10 µs) launches a 1000 µs GEMM at 2 µs (it starts at 5); cudaDeviceSynchronize waits for it.

    The path: 2 µs of aten::mm up to the launch, 3 µs of launch delay, the 1000 µs kernel, the sync:
    1005 µs. The host's own time (mm and the 998 µs wait) is 1010 µs and must not be the answer.
    """
    t = Planted()
    if step:
        t.host("ProfilerStep#3", 0, 1012, cat="user_annotation")
    t.host("aten::mm", 0, 10)
    t.kernel("sm90_gemm_long", (2, 2), 5, 1000)
    corr = t.call("cudaDeviceSynchronize", 12, 998)
    t.sync("Context Sync", corr, 1005, 2, 4294967295)
    return t.write(path)


def test_a_long_kernel_waited_for_by_a_device_sync_is_the_path(tmp_path: Path) -> None:
    result = critical_path(long_kernel_waited_for(tmp_path / "planted.json"))
    assert result.length_s == pytest.approx(1005e-6)
    assert result.by_kind["kernel"] == pytest.approx(1000e-6)
    assert result.by_kind["launch_delay"] == pytest.approx(3e-6)
    assert result.by_kind["cpu_op"] == pytest.approx(2e-6)
    assert result.by_kind["runtime"] == 0  # the wait is no host time: the kernel is
    assert result.edges_by_kind["sync"] == 1
    assert result.top[0].name == "sm90_gemm_long"
    assert result.top[0].share == pytest.approx(1000 / 1005)


def queued(path: Path) -> Path:
    """Three launches before the first kernel starts: the stream's queue is never empty, so the path
    runs kernel to kernel (gaps 2 and 3 µs) and into the cudaStreamSynchronize that waits for them."""
    t = Planted()
    t.host("aten::foreach", 0, 4)
    for index, (ts, launch) in enumerate(((10, 1.0), (22, 2.0), (35, 3.0))):
        t.kernel(f"k{index}", (launch, 0.5), ts, 10)
    corr = t.call("cudaStreamSynchronize", 5, 41)
    t.sync("Stream Sync", corr, 44, 1, 7)
    return t.write(path)


def test_kernels_queued_back_to_back_are_joined_by_their_gaps(tmp_path: Path) -> None:
    result = critical_path(queued(tmp_path / "queued.json"))
    assert result.length_s == pytest.approx(35e-6)
    assert result.by_kind["kernel"] == pytest.approx(30e-6)
    assert result.by_kind["kernel_gap"] == pytest.approx(5e-6)
    assert result.edges_by_kind["sync"] == 1


def stream_wait(path: Path) -> Path:
    """A 100 µs kernel on stream 7 (3-103 µs); an event recorded after it; stream 20 waits on the event,
    then runs a 10 µs kernel from 103 µs, when the first ended; the host then waits for the device."""
    t = Planted()
    t.host("aten::mm", 0, 10)
    t.kernel("producer", (1, 1), 3, 100)
    record = t.call("cudaEventRecord", 3, 1)
    wait = t.call("cudaStreamWaitEvent", 5, 1)
    t.sync("Stream Wait Event", wait, 6, 1, 20, wait_on_stream=7, wait_on_cuda_event_record_corr_id=record)
    t.kernel("consumer", (7, 1), 103, 10, stream=20)
    corr = t.call("cudaDeviceSynchronize", 11, 104)
    t.sync("Context Sync", corr, 113, 1, 4294967295)
    return t.write(path)


def test_a_stream_waiting_on_an_event_follows_the_kernel_it_waited_for(tmp_path: Path) -> None:
    """The consumer's wait is the producer's run: 100 µs of kernel, not 96 µs of launch delay."""
    result = critical_path(stream_wait(tmp_path / "wait.json"))
    assert result.length_s == pytest.approx(113e-6)
    assert result.by_kind["kernel"] == pytest.approx(110e-6)
    assert result.by_kind["launch_delay"] == pytest.approx(2e-6)
    assert result.edges_by_kind["sync"] == 2  # producer -> consumer, consumer -> the host's wait
    assert [e.name for e in result.top if e.kind == "kernel"] == ["producer", "consumer"]


def test_a_step_is_taken_by_its_number_and_a_missing_one_is_named(tmp_path: Path) -> None:
    trace = long_kernel_waited_for(tmp_path / "step.json", step=True)
    assert critical_path(trace, 3).step == "ProfilerStep#3"
    assert critical_path(trace).length_s == pytest.approx(1005e-6)
    with pytest.raises(UserError, match=r"step 4 \(ProfilerStep#4\) is not in trace .*; its steps: 3$"):
        critical_path(trace, 4)


def test_a_trace_without_launch_links_is_refused(tmp_path: Path) -> None:
    t = Planted()
    t.host("aten::mm", 0, 10)
    t.events.append(
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 5, "args": {"stream": 7}}
    )
    with pytest.raises(UserError, match="links no kernel to its launch"):
        critical_path(t.write(tmp_path / "unlinked.json"))


@pytest.mark.realdata
def test_a_cpu_only_trace_has_no_critical_path_to_find() -> None:
    with pytest.raises(UserError, match="no ac2g flow events"):
        critical_path(trace_of_rank([CPU_ONLY], None))


@pytest.mark.realdata
def test_rank_of_a_folder(tmp_path: Path) -> None:
    folder = DATA / "hta" / "trace_filter"
    assert trace_of_rank([folder], 1).name == "sampled_rank-1.json.gz"
    with pytest.raises(UserError, match="rank 5 is not among the traces given; their ranks: 0, 1"):
        trace_of_rank([folder], 5)
    with pytest.raises(UserError, match="pick one with --rank N"):
        trace_of_rank([folder], None)
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("a_rank-0.json.gz", "b_rank-0.json.gz"):
        shutil.copy(SAMPLED_RANK0, twice / name)
    with pytest.raises(UserError, match=r"traces .*a_rank-0.json.gz and .*b_rank-0.json.gz are both rank 0"):
        trace_of_rank([twice], 0)


# ---- the CLI ----


def test_the_command_prints_tables_json_and_a_png(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = long_kernel_waited_for(tmp_path / "planted.json", step=True)
    png = tmp_path / "out" / "path.png"
    assert fleetbench("trace", "critical-path", trace, "--step", "3", "--png", png) == 0
    out = capsys.readouterr().out
    assert "ProfilerStep#3: critical path 1.005 ms" in out
    assert "sm90_gemm_long" in out
    assert png.read_bytes().startswith(b"\x89PNG")
    assert fleetbench("trace", "critical-path", trace, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["length_s"] == pytest.approx(1005e-6)
    assert data["hta_classes_s"]["gpu_compute_bound"] == pytest.approx(1000e-6)
    assert [e["kind"] for e in data["edges"]] == ["cpu_op", "launch_delay", "kernel", "sync"]


def test_bad_input_is_one_line_and_exit_2(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = long_kernel_waited_for(tmp_path / "planted.json", step=True)
    assert fleetbench("trace", "critical-path", trace, "--step", "9") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ProfilerStep#9" in err and "its steps: 3" in err
    t = Planted()
    t.host("aten::mm", 0, 10)
    assert fleetbench("trace", "critical-path", t.write(tmp_path / "cpu.json")) == 2
    assert "links no kernel to its launch" in capsys.readouterr().err
    assert fleetbench("trace", "critical-path", tmp_path / "missing.json") == 2


# ---- against HTA ----


@pytest.fixture
def hta_on_pandas(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """HTA 0.5.0's critical path calls DataFrame.drop(axis=1, columns=...), which pandas 3 refuses; the
    same call without the redundant axis does what it meant."""
    import pandas as pd

    original = pd.DataFrame.drop

    def drop(self: pd.DataFrame, labels: Any = None, *, axis: Any = 0, columns: Any = None, **kw: Any) -> Any:
        if columns is not None:
            return original(self, labels, columns=columns, **kw)
        return original(self, labels, axis=axis, **kw)

    monkeypatch.setattr(pd.DataFrame, "drop", drop)
    yield


def hta_path(trace: Path, tmp: Path, annotation: str = "", instance: int = 0, rank: int = 0) -> dict[str, float]:
    """HTA's critical path of one trace: its length and time per `bound_by` class, in µs."""
    hta_analysis = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed")
    folder = tmp / trace.name
    folder.mkdir(parents=True)
    shutil.copy(trace, folder / trace.name)
    analysis = hta_analysis.TraceAnalysis(trace_dir=str(folder))
    graph, ok = analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
    assert ok
    frame = graph.get_critical_path_breakdown()
    out = {str(k): float(v) for k, v in frame.groupby("bound_by").duration.sum().items() if k}
    out["length"] = float(frame.duration.sum())
    return out


def ours(result: CriticalPath) -> dict[str, float]:
    out = {k: v * 1e6 for k, v in result.hta_classes.items() if v}
    out["length"] = result.length_s * 1e6
    return out


def assert_same(mine: dict[str, float], theirs: dict[str, float], rel: float) -> None:
    assert mine.keys() == theirs.keys()
    for key, value in theirs.items():
        assert mine[key] == pytest.approx(value, rel=rel, abs=1e-6), key


@pytest.mark.realdata
@pytest.mark.usefixtures("hta_on_pandas")
def test_equal_to_hta_on_a_step_of_a_whole_microsecond_trace(tmp_path: Path) -> None:
    """trace_filter's two ranks, ProfilerStep#551 (HTA's first instance): 267.581 ms and 272.736 ms,
    every class to the µs."""
    for rank, length in ((0, 267581), (1, 272736)):
        trace = SAMPLED_RANK0.with_name(f"sampled_rank-{rank}.json.gz")
        mine = ours(critical_path(trace, 551, HTA_RULES))
        assert_same(mine, hta_path(trace, tmp_path, "ProfilerStep", 0, rank=rank), rel=1e-9)
        assert mine["length"] == pytest.approx(length)


@pytest.mark.realdata
@pytest.mark.usefixtures("hta_on_pandas")
def test_equal_to_hta_without_its_rounding_on_fractional_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTA_DISABLE_NS_ROUNDING=1: the NCCL trace's first step and the GEMM trace whole agree to 1e-9."""
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    assert_same(ours(critical_path(NCCL, 4, HTA_RULES)), hta_path(NCCL, tmp_path / "n", "ProfilerStep", 0), 1e-9)
    assert_same(ours(critical_path(GEMM, None, HTA_RULES)), hta_path(GEMM, tmp_path / "g"), 1e-9)


@pytest.mark.realdata
@pytest.mark.usefixtures("hta_on_pandas")
def test_difference_hta_rounds_fractional_timestamps_inward(tmp_path: Path) -> None:
    """With its rounding on, HTA loses up to 1 µs per top-level op on the path: 246 µs (0.24 %) here."""
    mine = critical_path(NCCL, 4, HTA_RULES).length_s * 1e6
    theirs = hta_path(NCCL, tmp_path, "ProfilerStep", 0)["length"]
    assert 0 < mine - theirs < 0.005 * mine


@pytest.mark.realdata
@pytest.mark.usefixtures("hta_on_pandas")
def test_difference_hta_under_pandas_3_loses_every_event_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AlexNet's 20 cudaStreamWaitEvent: without them our path is HTA's to the µs in every class; with
    them 1 µs shorter (a kernel that waited on an event is reached from that event's kernel, not its
    launch). The planted stream-wait trace shows which is right."""
    theirs = hta_path(ALEXNET, tmp_path / "a")
    with_waits = ours(critical_path(ALEXNET, None, HTA_RULES))
    with monkeypatch.context() as patch:
        patch.setattr(critical, "_event_syncs", lambda *_: ({}, {}))
        assert_same(ours(critical_path(ALEXNET, None, HTA_RULES)), theirs, rel=1e-12)
    assert with_waits["length"] == pytest.approx(theirs["length"] - 1)
    planted = stream_wait(tmp_path / "w" / "wait.json")
    hta_planted = hta_path(planted, tmp_path / "wh")
    assert hta_planted["length"] == pytest.approx(113)  # the same length, through the consumer's launch
    assert hta_planted["gpu_kernel_launch_overhead"] == pytest.approx(96)  # the wait taken for a launch delay
    assert ours(critical_path(planted))["gpu_kernel_launch_overhead"] == pytest.approx(2)


@pytest.mark.usefixtures("hta_on_pandas")
def test_planted_traces_equal_to_hta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted traces without event syncs: HTA finds the same length and classes."""
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")  # the queued launches start at fractional µs
    for name, make in (("long", long_kernel_waited_for), ("queued", queued)):
        trace = make(tmp_path / name / f"{name}.json")
        assert_same(ours(critical_path(trace)), hta_path(trace, tmp_path / f"{name}-hta"), rel=1e-9)
