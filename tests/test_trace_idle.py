"""Idle time explained per stream (HTA's idle-time breakdown) and the device's wait for the host, bounded.

HTA's NCCL trace is the one where the old figure, summed over streams, read 737 ms against a 436 ms
window; the per-stream breakdown equals HTA's own `get_idle_time_breakdown` where HTA does not
round times (the whole-µs NCCL pair, and the fractional trace with HTA's rounding off).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleetbench.profile.trace.idle import idle_breakdown
from fleetbench.profile.trace.load import DeviceEvent
from fleetbench.profile.trace.queue import queue_lengths
from fleetbench.profile.trace.summary import summarize_trace
from testdata import get_test_data_dir

DATA = get_test_data_dir()
NCCL = DATA / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
TRACE_FILTER = DATA / "hta" / "trace_filter"
US = 1e-6


def event(start: float, end: float, launch: float | None, stream: str = "7", device: str = "0") -> DeviceEvent:
    return DeviceEvent(start, end, device, stream, "kernel", "k", launch, 1.0)


def test_host_wait_kernel_wait_and_other_on_one_stream() -> None:
    events = [
        event(0, 10, launch=-5),
        event(12, 20, launch=1),  # 2 µs after the previous end, launched early: kernel wait
        event(30, 40, launch=25),  # launched after the previous end (20): host wait of 10
        event(80, 90, launch=21),  # queued in time but started 40 later (another stream's event): other
        event(100, 110, launch=None),  # launched before the trace: never host wait; 10 µs: kernel wait
    ]
    (stream,) = idle_breakdown(events).streams
    assert stream.kernel_wait_s == pytest.approx(12 * US)
    assert stream.host_wait_s == pytest.approx(10 * US)
    assert stream.other_s == pytest.approx(40 * US)
    assert stream.idle_s == pytest.approx(62 * US)
    assert stream.span_s == pytest.approx(110 * US)
    (strict,) = idle_breakdown(events, kernel_wait_us=5).streams  # the threshold decides kernel wait vs other
    assert strict.kernel_wait_s == pytest.approx(2 * US) and strict.other_s == pytest.approx(50 * US)


def test_device_host_wait_is_not_summed_over_streams() -> None:
    """Two streams waiting for the host at the same time: the device waited once, not twice."""
    events = [
        event(0, 10, launch=0, stream="7"),
        event(0, 10, launch=0, stream="9"),
        event(50, 60, launch=40, stream="7"),
        event(50, 60, launch=45, stream="9"),
    ]
    idle = idle_breakdown(events)
    assert [s.host_wait_s for s in idle.streams] == [pytest.approx(40 * US)] * 2
    assert idle.host_wait_s == {"0": pytest.approx(40 * US)}


def test_a_stream_waiting_while_another_runs_is_no_device_idle() -> None:
    events = [
        event(0, 10, launch=0, stream="7"),
        event(50, 60, launch=40, stream="7"),  # stream 7 waits 10..50 for the host
        event(5, 45, launch=0, stream="9"),  # but stream 9 runs until 45
    ]
    idle = idle_breakdown(events)
    assert idle.streams[0].host_wait_s == pytest.approx(40 * US)
    assert idle.host_wait_s["0"] == pytest.approx(5 * US)  # 45..50 only


@pytest.mark.realdata
def test_the_737_ms_trace_now_waits_within_its_window() -> None:
    summary = summarize_trace(NCCL)
    (device,) = summary.devices
    assert device.span_s == pytest.approx(0.4356, rel=1e-3)
    assert summary.launch is not None
    assert summary.launch.host_wait_s <= device.idle_s <= device.span_s
    assert summary.launch.host_wait_s == pytest.approx(0.3364, rel=1e-3)
    streams = {s.stream: s for s in summary.idle_streams}
    assert set(streams) == {"7", "40"}
    assert sum(s.host_wait_s for s in streams.values()) == pytest.approx(0.737, rel=1e-3)  # the old figure
    for stream in streams.values():
        assert stream.idle_s <= stream.span_s <= device.span_s
        assert stream.host_wait_s + stream.kernel_wait_s + stream.other_s == pytest.approx(stream.idle_s)


def hta_idle(trace_dir: Path) -> dict[tuple[int, str, str], float]:
    """HTA's idle-time breakdown of every rank: (rank, stream, category) -> µs."""
    hta_trace_analysis = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed")
    analysis = hta_trace_analysis.TraceAnalysis(trace_dir=str(trace_dir))
    out: dict[tuple[int, str, str], float] = {}
    for rank in analysis.t.get_ranks():
        frame, _ = analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)
        for _, row in frame.iterrows():
            out[(int(row["rank"]), str(int(row["stream"])), str(row["idle_category"]))] = float(row["idle_time"])
    return out


def ours_idle(traces: list[Path]) -> dict[tuple[int, str, str], float]:
    out: dict[tuple[int, str, str], float] = {}
    for trace in traces:
        summary = summarize_trace(trace)
        for s in summary.idle_streams:
            for category in ("host_wait", "kernel_wait", "other"):
                value: Any = getattr(s, f"{category}_s") / US
                out[(summary.rank, s.stream, category)] = value
    return out


def assert_idle_agrees(ours: dict[tuple[int, str, str], float], theirs: dict[tuple[int, str, str], float]) -> None:
    for key, value in theirs.items():
        assert ours.get(key, 0.0) == pytest.approx(value, rel=1e-3, abs=1.0), key
    for key, value in ours.items():
        assert theirs.get(key, 0.0) == pytest.approx(value, rel=1e-3, abs=1.0), key


@pytest.mark.realdata
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_idle_breakdown_per_stream_agrees_with_hta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_idle_agrees(ours_idle(sorted(TRACE_FILTER.glob("*.json.gz"))), hta_idle(TRACE_FILTER))
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    folder = tmp_path / "nccl"
    folder.mkdir()
    shutil.copy(NCCL, folder / NCCL.name)
    assert_idle_agrees(ours_idle([NCCL]), hta_idle(folder))


def test_idle_grid_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str], fleetbench: Any) -> None:
    events = [
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 0, "dur": 10, "args": {"stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 30, "dur": 10, "args": {"stream": 7}},
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert fleetbench("trace", "summarize", trace, "--no-chart", "--format", "md") == 0
    out = capsys.readouterr().out
    assert "idle time per stream over the window" in out
    assert "| 0 | 0 | 7 | 2 | 40.0 us | 20.0 us (50.0%) | 0.0 us (0.0%) | 20.0 us (50.0%) |" in out  # no launch


def test_queue_length_counts_launches_not_yet_started() -> None:
    events = [
        event(10, 20, launch=0),  # +1 at 0, -1 at 10
        event(20, 30, launch=1),  # +1 at 1, -1 at 20
        event(30, 40, launch=2),  # +1 at 2, -1 at 30
        event(50, 60, launch=None),  # no launch in the trace: not in the series
    ]
    (queue,) = queue_lengths(events)
    assert [queue.changes, queue.max] == [6, 3]  # 1 2 3 2 1 0
    assert queue.mean == pytest.approx(1.5) and queue.median == 1.5


@pytest.mark.realdata
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_queue_length_summary_agrees_with_hta() -> None:
    hta_trace_analysis = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed")
    frame = hta_trace_analysis.TraceAnalysis(trace_dir=str(TRACE_FILTER)).get_queue_length_summary(ranks=[0, 1])
    theirs = {
        (int(rank), str(int(stream))): (
            int(row[("queue_length", "count")]),
            row[("queue_length", "mean")],
            row[("queue_length", "max")],
        )
        for (rank, stream), row in frame.iterrows()
    }
    ours = {}
    for trace in sorted(TRACE_FILTER.glob("*.json.gz")):
        summary = summarize_trace(trace)
        for q in summary.queues:
            ours[(summary.rank, q.stream)] = (q.changes, q.mean, q.max)
        (step,) = summary.step_launches  # the window's one step
        assert summary.launch is not None and step.launches == summary.launch.launches
        assert step.delay_outliers > 0 and step.delay_max_s == summary.launch.delay_max_s
    assert ours.keys() == theirs.keys()
    for key, (count, mean, top) in theirs.items():
        assert ours[key] == (count, pytest.approx(mean), top), key
