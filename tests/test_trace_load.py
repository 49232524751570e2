"""Reading traces: times relative to a per-trace origin, distinct short names, one trace per rank in a folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetbench.profile.trace.load import read_events
from fleetbench.profile.trace.summary import summarize_trace

EPOCH_US = 1_733_000_000_000_000  # µs since the epoch, where torch.profiler's clock counts from


def kernel(name: str, ts: float, dur: float, stream: int = 7) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": {}}


def test_fractional_durations_survive_epoch_timestamps(tmp_path: Path) -> None:
    """At 1.7e15 µs a float's grid is 0.25 µs: ts + dur there rounds each 0.1 µs kernel to 0 or 0.25.

    Relative to the trace's origin the durations keep their fractions: busy time is their sum.
    """
    events = [kernel("k", EPOCH_US + 10 * i + 0.5, 0.1) for i in range(1000)]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    read = read_events(trace)
    assert read.origin_us == EPOCH_US
    assert read.device[0].start == 0.5
    (device,) = summarize_trace(trace).devices
    assert device.busy_s == pytest.approx(1000 * 0.1e-6, rel=1e-9)
    absolute = sum((e["ts"] + e["dur"]) - e["ts"] for e in events) * 1e-6  # the old arithmetic
    assert absolute != pytest.approx(1000 * 0.1e-6, rel=0.01)  # which lost them


def test_kernels_of_one_short_name_print_distinct_names(tmp_path: Path) -> None:
    template = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<{}>, at::detail::Array<char*, 1> >"
    )
    events = [kernel(template.format("int"), 0, 10), kernel(template.format("long"), 20, 5)]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    shorts = [k.short for k in summarize_trace(trace).top_kernels]
    assert len(set(shorts)) == 2
    assert all(s.startswith("vectorized_elementwise_kernel~") for s in shorts)


def test_a_folder_with_two_traces_of_one_rank_is_refused_naming_both(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("rank-0.a.pt.trace.json", "rank-0.b.pt.trace.json"):
        (folder / name).write_text(json.dumps({"traceEvents": [kernel("k", 0, 1)], "distributedInfo": {"rank": 0}}))
    assert fleetbench("trace", "summarize", folder, "--no-chart") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert "rank-0.a.pt.trace.json" in line and "rank-0.b.pt.trace.json" in line and "both rank 0" in line
