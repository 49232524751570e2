"""`fleetbench trace summarize` through the real CLI: folders of rank traces, formats, the chart, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from fleetbench.profile.trace.ranks import RankRow, find_straggler
from fleetbench.results.store import read_records
from testdata import OWN_DATA_DIR, get_test_data_dir

DATA = get_test_data_dir()
TRACE_FILTER = DATA / "hta" / "trace_filter"
FSDP2_CPU = OWN_DATA_DIR / "fsdp2-cpu"
FSDP2_RANK0 = FSDP2_CPU / "rank-0.fsdp2.pt.trace.json.gz"
GEMM = DATA / "torch-trace" / "a100_gemm_trace.json"
ALEXNET = DATA / "torch-trace" / "a100_alexnet_trace.json.gz"


def strict_json(text: str) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.realdata
def test_a_folder_of_nccl_ranks(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert fleetbench("trace", "summarize", TRACE_FILTER, "--out-dir", tmp_path, "--top", "3") == 0
    out = capsys.readouterr().out
    assert out.startswith("window steps: ProfilerStep#551")
    assert "ProfilerStep#552 left out" in out
    for text in ("temporal breakdown", "per step", "across ranks", "top kernels", "top CPU ops", "CPU launch gaps"):
        assert text in out
    assert "straggler: rank 0, exposed communication" in out and "(+12.4%)" in out
    chart = tmp_path / "trace_breakdown.png"
    assert chart.read_bytes()[:4] == b"\x89PNG" and f"chart: {chart}" in out


def test_json_is_strict_and_complete(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert fleetbench("trace", "summarize", FSDP2_CPU, "--json", "--out-dir", tmp_path) == 0
    report = strict_json(capsys.readouterr().out)
    assert isinstance(report, dict)
    assert report["window"] == "steps" and report["chart"] == str(tmp_path / "trace_breakdown.png")
    traces = report["traces"]
    assert [t["rank"] for t in traces] == [0, 1]
    for trace in traces:
        assert trace["window"]["steps"] == ["ProfilerStep#2", "ProfilerStep#3"]
        (cpu,) = trace["devices"]
        assert cpu["device"] == "cpu" and 0 < cpu["shares"]["communication"] < 1
        assert 0 < cpu["comm_overlap_ratio"] < 1
        assert [s["name"] for s in trace["steps"]] == ["ProfilerStep#2", "ProfilerStep#3"]
    ranks = report["ranks"]
    assert [r["rank"] for r in ranks["rows"]] == [0, 1] and ranks["straggler"]["gap_ratio"] > 0


@pytest.mark.realdata
def test_markdown_of_several_single_rank_files(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert fleetbench("trace", "summarize", GEMM, ALEXNET, "--format", "md", "--window", "trace", "--no-chart") == 0
    out = capsys.readouterr().out
    assert out.startswith("# Trace summary")
    assert "- window trace: the whole trace (no ProfilerStep annotations)" in out
    assert "| rank | device | span |" in out and "| ---: |" in out
    assert "differs from HTA: 41 cuda_sync events" in out
    assert "chart:" not in out and not list(tmp_path.iterdir())


def test_the_chart_goes_next_to_the_traces_by_default(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "ranks"
    shutil.copytree(FSDP2_CPU, folder)
    (folder / "notes.json").write_text("{}")  # not a rank trace: a folder's other JSON files are left alone
    assert fleetbench("trace", "summarize", folder) == 0
    assert (folder / "trace_breakdown.png").is_file()
    assert "rank 1:" in capsys.readouterr().out


@pytest.mark.realdata
def test_record_writes_one_record_per_rank(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    code = fleetbench(
        "trace", "summarize", TRACE_FILTER, "--record", "--results-dir", results, "--run-id", "t1", "--no-chart"
    )
    assert code == 0
    records = sorted(read_records(results / "t1"), key=lambda r: r.rank)
    assert [(r.benchmark, r.rank, r.status) for r in records] == [("trace", 0, "ok"), ("trace", 1, "ok")]
    overlap = [r.metric("fleetbench_profile_comm_overlap_ratio", gpu=str(r.rank)) for r in records]
    assert overlap == [pytest.approx(0.1181, abs=1e-4), pytest.approx(0.2005, abs=1e-4)]
    gap = records[0].metric("fleetbench_profile_straggler_gap_ratio", figure="exposed_communication")
    assert gap == pytest.approx(0.124, abs=1e-3)
    assert not any(s.name == "fleetbench_profile_straggler_gap_ratio" for s in records[1].metrics)
    assert records[0].summary["trace"]["window"]["left_out"] == ["ProfilerStep#552"]
    assert "result record:" in capsys.readouterr().err


def row(rank: int, step_s: float, comm_s: float) -> RankRow:
    return RankRow(rank, f"r{rank}", "0", "per step", 2, step_s, step_s, 0.0, comm_s, 0.0, 0.0, None)


def test_the_straggler_is_the_rank_furthest_above_the_median() -> None:
    rows = [row(0, 1.0, 0.10), row(1, 1.3, 0.10), row(2, 1.0, 0.11), row(3, 1.0, 0.10)]
    straggler = find_straggler(rows)
    assert straggler is not None
    assert (straggler.rank, straggler.metric) == (1, "step time")
    assert straggler.gap_ratio == pytest.approx(0.3)
    assert find_straggler([row(0, 1.0, 0.1), row(1, 1.0, 0.1)]) is None
    assert find_straggler([row(0, 1.0, 0.1)]) is None


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: tmp / "missing.json", "missing.json not found"),
        (lambda tmp: _write(tmp / "notes.txt", b"hello"), "notes.txt is not a readable Chrome trace"),
        (lambda tmp: _write(tmp / "x.json", b'{"foo": 1}'), "x.json has no traceEvents"),
        (lambda tmp: _mkdir(tmp / "empty"), "no traces in folder"),
        (lambda tmp: _write(tmp / "cut.json.gz", FSDP2_RANK0.read_bytes()[:5000]), "cut.json.gz is not a readable"),
    ],
    ids=["missing", "not-json", "not-a-trace", "empty-folder", "truncated-gz"],
)
def test_bad_input_is_one_line_and_exit_2(
    fleetbench: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    make: Callable[[Path], Path],
    fragment: str,
) -> None:
    path = make(tmp_path)
    assert fleetbench("trace", "summarize", path, "--out-dir", tmp_path / "out") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("fleetbench: error: ") and fragment in line
    assert not (tmp_path / "out").exists()


def test_a_truncated_trace_through_the_console_entry_point(tmp_path: Path) -> None:
    damaged = tmp_path / "rank-0.pt.trace.json.gz"
    with gzip.open(damaged, "wb") as handle:
        handle.write(b'{"traceEvents": [')
    result = run_cli("trace", "summarize", str(tmp_path), timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert str(damaged) in result.stderr


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


@pytest.mark.realdata
def test_a_profile_run_folder_is_read_through_its_trace_json(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`fleetbench profile` writes trace.json beside trace_summary.json and roofline.json."""
    shutil.copy(GEMM, tmp_path / "trace.json")
    (tmp_path / "trace_summary.json").write_text("{}")
    (tmp_path / "roofline.json").write_text("{}")
    assert fleetbench("trace", "summarize", tmp_path, "--json", "--no-chart") == 0
    report = strict_json(capsys.readouterr().out)
    assert isinstance(report, dict) and [t["path"] for t in report["traces"]] == [str(tmp_path / "trace.json")]


def test_record_refuses_a_results_folder_it_cannot_write_before_it_summarises(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder would go")
    code = fleetbench("trace", "summarize", FSDP2_CPU, "--record", "--results-dir", blocker, "--no-chart")
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""  # no summary first, then the refusal
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("fleetbench: error: results dir ") and str(blocker) in line
    assert blocker.read_text() == "a file where the results folder would go"


KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7}


@pytest.mark.parametrize(
    ("events", "fragment"),
    [
        ([], "is not a torch.profiler trace: an empty traceEvents list"),
        ({"traceEvents": []}, "is not a torch.profiler trace: an empty traceEvents list"),
        ([1, 2, 3], "is not a torch.profiler trace: 3 traceEvents without ph and name"),
        ({"traceEvents": [{"a": 1}, {"ts": 4}]}, "is not a torch.profiler trace: 2 traceEvents without ph and name"),
        ([{**KERNEL, "ts": "NaN", "dur": 1}], "has no usable times: every one of its 1 complete events"),
        ([{**KERNEL, "ts": 1e308 * 10, "dur": 1}], "1 with an infinite ts"),
        ([{**KERNEL, "ts": 5, "dur": -5}, {**KERNEL, "ts": 1, "dur": "x"}], "1 with a negative dur"),
        ([{**KERNEL, "ts": 10**400, "dur": 1}], "1 with a ts beyond 1e+18 µs"),
    ],
    ids=["empty-list", "empty-events", "numbers", "no-event-fields", "nan", "inf", "negative-and-text", "huge-int"],
)
def test_json_that_is_no_trace_or_has_no_times_is_one_line_and_exit_2(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Any, fragment: str
) -> None:
    path = _write(tmp_path / "rank-0.json", json.dumps(events).encode())
    assert fleetbench("trace", "summarize", path, "--no-chart") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"fleetbench: error: trace {path} ") and fragment in line, line


def test_events_whose_times_are_not_times_are_counted_named_and_left_out(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    events = [
        {**KERNEL, "name": "good", "ts": 10, "dur": 5},
        {**KERNEL, "name": "text", "ts": "20", "dur": "5"},  # times written as text still count
        {**KERNEL, "name": "bad", "ts": 30, "dur": float("nan")},
        {**KERNEL, "name": "worse", "ts": 40, "dur": -1},
        {**KERNEL, "name": "also-bad", "ts": 50, "dur": -2},
    ]
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps(events), encoding="utf-8")  # json writes NaN as torch.profiler would
    assert fleetbench("trace", "summarize", path, "--json") == 0
    captured = capsys.readouterr()
    (summary,) = json.loads(captured.out)["traces"]
    note = "left out 3 of 5 complete events whose times are not times: 1 with dur NaN (e.g. 'bad': dur=nan); 2 with a negative dur (e.g. 'worse': dur=-1)"
    assert summary["left_out"] == note
    assert captured.err.strip() == f"warning: trace {path}: {note}"
    assert sorted(k["name"] for k in summary["top_kernels"]) == ["good", "text"]  # text times still count
