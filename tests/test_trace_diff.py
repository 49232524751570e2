"""`fleetbench trace diff A B` (HTA's TraceDiff): A/A is empty; planted changes are found and ranked; bad input."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetbench.errors import UserError
from fleetbench.profile.trace.diff import diff_traces
from testdata import get_test_data_dir

DATA = get_test_data_dir()
RANK0 = DATA / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
RANK1 = DATA / "hta" / "trace_filter" / "sampled_rank-1.json.gz"


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def kernel(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": {"stream": 7}}


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_added_removed_and_changed_ranked_by_time_delta(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", [kernel("gemm", 0, 100), kernel("relu", 100, 5), kernel("old", 110, 3)])
    b = write(
        tmp_path / "b.json",
        [kernel("gemm", 0, 60), kernel("gemm", 60, 60), kernel("relu", 120, 5), kernel("new", 130, 40)],
    )
    result = diff_traces(a, b, "trace")
    rows = [(r.kind, r.name, r.status, r.count_a, r.count_b) for r in result.rows]
    assert rows == [
        ("kernel", "new", "added", 0, 1),  # +40 µs
        ("kernel", "gemm", "changed", 1, 2),  # +20 µs
        ("kernel", "old", "removed", 1, 0),  # -3 µs
    ]
    assert result.rows[0].delta_s == pytest.approx(40e-6)
    assert result.rows[2].delta_s == pytest.approx(-3e-6)
    assert result.unchanged["kernel"] == 1  # relu
    assert result.totals("kernel") == (pytest.approx(108e-6), pytest.approx(165e-6))


@pytest.mark.realdata
def test_a_trace_against_itself_changes_nothing() -> None:
    result = diff_traces(RANK0, RANK0)
    assert result.rows == []
    assert result.unchanged["kernel"] > 10 and result.unchanged["op"] > 10


@pytest.mark.realdata
def test_a_planted_slowdown_in_a_real_trace_tops_the_diff(tmp_path: Path) -> None:
    """One kernel name made 30 % slower and one op removed: the diff finds exactly those two."""
    data = load(RANK0)
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    target = max({e["name"] for e in kernels}, key=lambda n: sum(e["dur"] for e in kernels if e["name"] == n))
    for e in kernels:
        if e["name"] == target:
            e["dur"] = e["dur"] * 1.3
    ops = [e for e in data["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    gone = next(e["name"] for e in ops if sum(1 for o in ops if o["name"] == e["name"]) == 1)
    data["traceEvents"] = [e for e in data["traceEvents"] if not (e.get("cat") == "cpu_op" and e["name"] == gone)]
    planted = tmp_path / "rank-0.json"
    planted.write_text(json.dumps(data))
    result = diff_traces(RANK0, planted)
    assert {(r.name, r.status) for r in result.rows} == {(target, "changed"), (gone, "removed")}
    slower = next(r for r in result.rows if r.name == target)
    assert slower.count_a == slower.count_b
    assert slower.time_b_s == pytest.approx(slower.time_a_s * 1.3, rel=1e-6)


@pytest.mark.realdata
def test_two_real_runs_through_the_cli(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two ranks of one NCCL job as two runs (run folders with profile/): tables, Markdown and JSON."""
    for name, trace in (("run-a", RANK0), ("run-b", RANK1)):
        (tmp_path / name / "profile").mkdir(parents=True)
        (tmp_path / name / "profile" / "rank-0.pt.trace.json.gz").write_bytes(trace.read_bytes())
    assert fleetbench("trace", "diff", tmp_path / "run-a", tmp_path / "run-b", "--top", "5") == 0
    out = capsys.readouterr().out
    assert "changed from A to B" in out and "kernels: total" in out
    assert fleetbench("trace", "diff", tmp_path / "run-a", tmp_path / "run-b", "--format", "md") == 0
    assert "| kind | name | status |" in capsys.readouterr().out
    assert fleetbench("trace", "diff", tmp_path / "run-a", tmp_path / "run-b", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    deltas = [abs(r["delta_s"]) for r in data["rows"]]
    assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0
    assert data["a"]["steps"] == data["b"]["steps"] == 1


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: tmp / "missing.json", "missing.json not found"),
        (lambda tmp: (tmp / "notes.json").write_text("hello") and tmp / "notes.json", "is not a readable Chrome trace"),
        (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "no traces in folder"),
    ],
    ids=["missing", "not-json", "empty-folder"],
)
def test_bad_input_is_one_line_and_exit_2(
    fleetbench: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    make: Callable[[Path], Path],
    fragment: str,
) -> None:
    good = write(tmp_path / "good.json", [kernel("gemm", 0, 1)])
    assert fleetbench("trace", "diff", good, make(tmp_path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("fleetbench: error: ") and fragment in line
    with pytest.raises(UserError):
        diff_traces(good, tmp_path / "missing.json")
