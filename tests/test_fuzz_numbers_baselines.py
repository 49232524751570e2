"""Numbers that aren't numbers, and damaged baselines, through every reader that takes them.

Baselines: a file `baseline set` writes is cut, has bytes flipped, fields replaced by other JSON
values (processes, noise, records, a figure, its samples, duration_s, rank) and numbers that are none
(NaN, infinities, 1e300, 10^400, denormals, negatives, numbers as text, booleans). Result records:
the same values in their figures. Traces: the same in the times of a gzip trace. ncu exports: the
same in the metric cells of a details CSV made up here. The property, for each reader and for
compare on top of it: a valid result (a comparison, a summary), or a UserError of one line naming the
file; never another exception, never a RuntimeWarning (every warning is an error here).

In process; examples are derandomized, so a run is repeatable (about 25 s on 2 cores).
"""

from __future__ import annotations

import gzip
import json
import math
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetbench.errors import UserError

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
FLOPS = "fleetbench_probe_achieved_flop_per_second"
# JSON tokens of numbers that are none, or are numbers at the edge of the float range
ODD_TOKENS = [
    "NaN", "Infinity", "-Infinity", "1e300", "-1e300", "1e400", "1" + "0" * 400, "5e-324", "2.2e-308", "1e-310",
    "-1", "-0.0", "0", '"1.5e11"', '"NaN"', "true", "false", "null", "[]", "{}", "9" * 5000, "1e30", "1e31",
]  # fmt: skip
TOKENS = st.sampled_from(ODD_TOKENS) | st.floats(allow_nan=True, allow_infinity=True).map(repr).map(
    lambda text: {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
)
MAX_LINE = 600


def mostly(normal: str) -> st.SearchStrategy[str]:
    """`normal` half the time, else a token of ODD_TOKENS or any float: one odd field among good ones is
    the input that gets furthest into a reader."""
    return st.one_of(st.just(normal), TOKENS)


@contextmanager
def no_runtime_warning() -> Iterator[None]:
    """A RuntimeWarning (overflow, invalid value, a mean of nothing) is an error inside the block."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def one_line(exc: UserError, where: str) -> None:
    message = str(exc)
    assert "\n" not in message and len(message) < MAX_LINE, message
    assert where in message, message
    assert exc.exit_code == 2


def record_line(run_id: str, value: str = "1.5e11", samples: str = "[1.4e11, 1.5e11, 1.6e11]", **fields: str) -> str:
    """One probe record line whose figure, samples and named fields are the JSON tokens given."""
    body: dict[str, Any] = {
        "run_id": run_id, "benchmark": "probe", "host": "h", "device": "cpu", "backend": "cpu", "status": "ok",
        "headline": [{"metric": FLOPS, "labels": {"probe": "matmul", "size": "64"}, "value": "@value@",
                      "samples": "@samples@"}],
        "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "duration_s": 1.0,
        "git_revision": "unknown", "packages": {},
    }  # fmt: skip
    tokens = {"value": value, "samples": samples, **fields}
    for key in fields:
        body[key] = f"@{key}@"
    text = json.dumps(body)
    for key, token in tokens.items():
        text = text.replace(f'"@{key}@"', token)
    return text


def compare_with(base_ref: str, root: Path) -> None:
    """compare BASE_REF (a run or baseline) with the good run `good`: a comparison, or one line."""
    from fleetbench.compare.matching import compare_runs, load_run
    from fleetbench.compare.statistics import settings_from
    from fleetbench.config.compare import CompareConfig

    settings_ = settings_from(CompareConfig())
    try:
        base = load_run(base_ref, root)
    except UserError as exc:
        one_line(exc, base_ref if "baseline" not in str(exc) else "")
        return
    for record in base.records:  # what a reader lets through is a record
        assert math.isfinite(record.duration_s) and record.duration_s >= 0 and record.rank >= 0, record
    new = load_run("good", root)
    try:
        comparison = compare_runs(base, new, settings_, False, None, 2.0)
    except UserError as exc:  # figures that overflow the statistics' arithmetic
        one_line(exc, "")
        return
    for benchmark in comparison.benchmarks:
        for row in benchmark.rows:  # what was judged is a measurement on both sides
            for figure in (row.base, row.new):
                assert figure is None or math.isfinite(figure.value), row


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "records.jsonl").write_text(record_line("good") + "\n")
    return tmp_path


@FUZZ
@given(value=mostly("1.5e11"), samples=st.lists(mostly("1.4e11"), max_size=4),
       field=st.sampled_from(["duration_s", "rank", None]), token=TOKENS)  # fmt: skip
def test_records_with_numbers_that_are_none_compare_or_are_one_line(
    root: Path, value: str, samples: list[str], field: str | None, token: str
) -> None:
    fields = {field: token} if field else {}
    folder = root / "odd"
    folder.mkdir(exist_ok=True)
    (folder / "records.jsonl").write_text(record_line("odd", value, f"[{', '.join(samples)}]", **fields) + "\n")
    with no_runtime_warning():
        compare_with("odd", root)


def baseline_bytes(processes: str, noise: str, record: str) -> bytes:
    text = (
        '{"name": "x", "run_id": "odd", "source": "odd", "set_at": "2026-01-01T00:00:00", '
        f'"processes": {processes}, "noise": {noise}, "records": [{record}]}}'
    )
    return text.encode()


NOISE = st.sampled_from(["{}", "[]", "1"]) | st.builds(
    lambda processes, pct: (
        '{"machine": {}, "set_at": "2026", "command": [], "processes": ' + processes + ', "figures": '
        '[{"benchmark": "probe", "metric": "' + FLOPS + '", "labels": {}, "noise_pct": ' + pct + ', "median": 1.0, '
        '"processes": 3}]}'
    ),
    mostly("3"),
    mostly("2.5"),
)


@FUZZ
@given(
    processes=mostly("1"),
    noise=st.just("null") | NOISE,
    value=mostly("1.5e11"),
    field=st.sampled_from(["duration_s", "rank", "status", "host", None]),
    token=TOKENS,
    cut=st.just(1.0) | st.floats(0, 1),
    flips=st.just([]) | st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=3),
)
def test_damaged_baselines_read_and_compare_or_are_one_line(
    root: Path,
    processes: str,
    noise: str,
    value: str,
    field: str | None,
    token: str,
    cut: float,
    flips: list[tuple[float, int]],
) -> None:
    from fleetbench.compare.baselines import read_baseline

    record = record_line("odd", value, f"[{value}]", **({field: token} if field else {}))
    data = bytearray(baseline_bytes(processes, noise, record))
    data = data[: max(0, round(len(data) * cut))]
    for where, byte in flips:
        if data:
            data[min(len(data) - 1, int(where * len(data)))] = byte
    folder = root / "baselines"
    folder.mkdir(exist_ok=True)
    path = folder / "x.json"
    path.write_bytes(bytes(data))
    with no_runtime_warning():
        try:
            found = read_baseline(root, "x")
        except UserError as exc:
            one_line(exc, str(path))
            assert "not found" not in str(exc), str(exc)  # the file is there: damaged, never missing
        else:
            assert isinstance(found.processes, int) and found.processes >= 1
            assert all(r.duration_s >= 0 and r.rank >= 0 for r in found.records)
        compare_with("x", root)


@FUZZ
@given(
    changes=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["ts", "dur"]), TOKENS), min_size=1, max_size=6),
    cut=st.sampled_from([None, 0.3, 0.9]),
)
def test_gzip_traces_with_times_that_are_none_summarise_or_are_one_line(
    changes: list[tuple[int, str, str]], cut: float | None
) -> None:
    from fleetbench.profile.trace.report import build_report

    events = [
        {"ph": "X", "cat": "kernel" if i % 2 else "cpu_op", "name": f"e{i}", "ts": "@ts{i}@", "dur": "@dur{i}@",
         "pid": 0, "tid": 7, "args": {"correlation": i}}
        for i in range(8)
    ]  # fmt: skip
    tokens = {f"@{key}{i}@": str(10 * i if key == "ts" else 5) for i in range(8) for key in ("ts", "dur")}
    for index, key, token in changes:
        tokens[f"@{key}{index}@"] = token
    text = json.dumps({"traceEvents": events})
    for mark, token in tokens.items():
        text = text.replace(f'"{mark}"', token)
    data = gzip.compress(text.encode(), mtime=0)
    if cut is not None:
        data = data[: int(len(data) * cut)]
    with tempfile.TemporaryDirectory() as folder, no_runtime_warning():
        path = Path(folder) / "rank-0.pt.trace.json.gz"
        path.write_bytes(data)
        try:
            report = build_report([path], "trace", 5, None, chart=False)
        except UserError as exc:
            one_line(exc, str(path))
            return
        summary = json.loads(report.to_json(), parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
        for trace in summary["traces"]:
            for device in trace["devices"]:
                assert math.isfinite(device["span_s"]) and device["span_s"] >= 0, device


NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
)
NCU_METRICS = (
    ("gpu__time_duration.sum", "ns"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    ("dram__bytes.sum", "byte"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
)
CELLS = st.sampled_from(["nan", "n/a", "", "inf", "-inf", "1e999", "-5", "1e300", "5e-324", "abc", "1,0,0", "12.5"])


@FUZZ
@given(cells=st.lists(CELLS | TOKENS, min_size=len(NCU_METRICS), max_size=len(NCU_METRICS)), cut=st.integers(0, 40))
def test_ncu_csv_cells_that_are_no_numbers_summarise_or_are_one_line(cells: list[str], cut: int) -> None:
    from fleetbench.profile.ncu.summary import summarize_path

    rows = "".join(
        f'"0","1","app","127.0.0.1","k(float *)","1","7","(256, 1, 1)","(4096, 1, 1)","0","8.9","SOL",'
        f'"{metric}","{unit}","{cell.replace(chr(34), chr(39))}"\n'
        for (metric, unit), cell in zip(NCU_METRICS, cells, strict=True)
    )
    text = NCU_HEADER + rows
    with tempfile.TemporaryDirectory() as folder, no_runtime_warning():
        path = Path(folder) / "r.csv"
        path.write_text(text[: len(text) - cut])
        try:
            summary = summarize_path(path)
        except UserError as exc:
            one_line(exc, str(path))
            return
        for kernel in summary.kernels:
            for figure in (kernel.duration_s, kernel.compute_sol, kernel.memory_sol, kernel.dram_sol):
                assert figure is None or math.isnan(figure) or 0 <= figure <= 1e30, kernel
