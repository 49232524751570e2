"""Bad input, round 3: numbers that aren't numbers, files and folders that cannot be written, damaged
baselines, cut Nsight Compute exports, names the file system refuses, Slurm arguments.

Numbers: NaN, infinities, 1e300, 10^400, denormals, negative durations and throughputs and numbers
written as text, in result records (compare, baseline set, results show, history), in baselines, in
traces (JSON and gzip) and in ncu exports. Files: a results folder, a baseline or an output file that
is immutable (`chattr +i`, which binds root too; those cases skip, saying why, where chattr cannot
set it), a file where a folder belongs. Each case goes through tests/badinput.py:check: one
`fleetbench: error: ...` line naming the file, the field and the value, exit 2, no traceback, and
nothing written: no half file, and no `.tmp` beside a target (a temporary file made and removed
would change its folder's time, which the check sees too).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from badinput import BadInput, check, immutable

FLOPS = "fleetbench_probe_achieved_flop_per_second"
FIGURE = f"{FLOPS}{{dtype=float32,probe=matmul,size=64}}"
NO_MEASUREMENT = "accepted: a finite number >= 0, at most 1e+30, not a denormal"


def record(run_id: str, value: str = "1.5e11", samples: str = "[1.4e11, 1.5e11, 1.6e11]", **fields: str) -> str:
    """One probe record line; the figure, its samples and any top-level field written as the JSON tokens given."""
    body: dict[str, object] = {
        "run_id": run_id, "benchmark": "probe", "host": "h", "device": "cpu", "backend": "cpu", "status": "ok",
        "headline": [{"metric": FLOPS, "labels": {"probe": "matmul", "dtype": "float32", "size": "64"},
                      "value": "@VALUE@", "samples": "@SAMPLES@"}],
        "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "duration_s": 1.0,
        "git_revision": "unknown", "packages": {},
    }  # fmt: skip
    tokens = {"@VALUE@": value, "@SAMPLES@": samples}
    for key, token in fields.items():
        body[key] = f"@{key}@"
        tokens[f"@{key}@"] = token
    text = json.dumps(body)
    for mark, token in tokens.items():
        text = text.replace(f'"{mark}"', token)
    return text + "\n"


def runs(**lines: str) -> dict[str, str | bytes]:
    """Run folders under results/: run id -> its records.jsonl."""
    return {f"results/{run_id}/records.jsonl": line for run_id, line in lines.items()}


def compare(*args: str) -> tuple[str, ...]:
    return ("compare", "--results-dir", "{tmp}/results", *args)


def baseline(*args: str) -> tuple[str, ...]:
    return ("baseline", "--results-dir", "{tmp}/results", *args)


def baseline_text(lines: list[str], **fields: str) -> str:
    """A baseline file as `baseline set` writes it, holding these record lines; `fields` replace its keys
    with the JSON tokens given."""
    payload: dict[str, object] = {
        "name": "b", "run_id": "a", "source": "a", "set_at": "2026-01-01T00:00:00", "processes": 1, "noise": None,
        "records": [json.loads(r, parse_constant=lambda _: None) for r in lines],
    }  # fmt: skip
    for key in fields:
        payload[key] = f"@{key}@"
    text = json.dumps(payload)
    for key, token in fields.items():
        text = text.replace(f'"@{key}@"', token)
    return text


GOOD = record("a")
GOOD_B = record("b")


def with_baseline(text: str | bytes, name: str = "x") -> dict[str, str | bytes]:
    """Run a (good) and baseline `name` holding `text`."""
    return {**runs(a=GOOD), f"results/baselines/{name}.json": text}


def new_run(case_id: str, fragment: str, line: str, *, args: tuple[str, ...] = ("a", "b")) -> BadInput:
    """compare A B where B's records.jsonl is `line`."""
    return BadInput(case_id, compare(*args), fragment, files=runs(a=GOOD, b=line))


RECORD_CASES = [
    new_run("record-figure-1e300", f"b: run b probe {FIGURE} has the value 1e+300; {NO_MEASUREMENT}",
            record("b", "1e300", "[1e300, 1e300, 1e300]")),
    new_run("record-figure-1e31", "has the value 1e+31", record("b", "1e31", "[1e31, 1e31]")),
    new_run("record-figure-denormal", "has the value 5e-324", record("b", "5e-324", "[5e-324, 5e-324, 5e-324]")),
    new_run("record-sample-denormal", "has the value 1e-310 in sample 2 of 3", record("b", "1.5e11", "[1.4e11, 1e-310, 1.6e11]")),
    new_run("record-sample-1e300", "has the value 1e+300 in sample 3 of 3", record("b", "1.5e11", "[1.4e11, 1.5e11, 1e300]")),
    new_run("record-figure-1e400", "has the value inf", record("b", "1e400")),
    new_run("record-figure-minus-1e400", "has the value -inf", record("b", "-1e400")),
    new_run("record-figure-400-digits", "headline.0.value: Input should be a valid number (got 1000000", record("b", "1" + "0" * 400)),
    new_run("record-figure-text", "headline.0.value: Input should be a valid number (got '1.5e11')", record("b", '"1.5e11"')),
    new_run("record-figure-text-nan", "headline.0.value: Input should be a valid number (got 'NaN')", record("b", '"NaN"')),
    new_run("record-figure-bool", "headline.0.value: Input should be a valid number (got True)", record("b", "true")),
    new_run("record-sample-text", "headline.0.samples.1: Input should be a valid number (got '1.5e11')", record("b", "1.5e11", '[1.4e11, "1.5e11"]')),
    new_run("record-negative-zero-sample", "has the value -1.0 in sample 1 of 2", record("b", "1.5e11", "[-1.0, -0.0]")),
    new_run("record-duration-text", "duration_s: Input should be a valid number (got '1.0')", record("b", duration_s='"1.0"')),
    new_run("record-duration-negative", "duration_s: Input should be greater than or equal to 0 (got -1.0)", record("b", duration_s="-1.0")),
    new_run("record-duration-nan", "duration_s: Input should be a finite number (got nan)", record("b", duration_s="NaN")),
    new_run("record-duration-infinite", "duration_s: Input should be a finite number (got inf)", record("b", duration_s="1e999")),
    new_run("record-duration-null", "duration_s: Input should be a valid number (got None)", record("b", duration_s="null")),
    new_run("record-rank-text", "rank: Input should be a valid integer (got '0')", record("b", rank='"0"')),
    new_run("record-rank-negative", "rank: Input should be greater than or equal to 0 (got -1)", record("b", rank="-1")),
    new_run("record-rank-float", "rank: Input should be a valid integer (got 0.0)", record("b", rank="0.0")),
    new_run("record-rank-bool", "rank: Input should be a valid integer (got False)", record("b", rank="false")),
    new_run("record-base-1e300", f"b: run a probe {FIGURE} has the value 1e+300", record("a", "1e300", "[1e300]"), args=("b", "a")),
    BadInput("record-baseline-set-1e300", baseline("set", "main", "b"), "b: run b probe", files=runs(b=record("b", "1e300", "[1e300]"))),
    BadInput("record-baseline-set-denormal", baseline("set", "main", "b"), "has the value 5e-324",
             files=runs(b=record("b", "5e-324", "[5e-324]"))),
    BadInput("record-baseline-set-duration", baseline("set", "main", "b"), "duration_s: Input should be greater than or equal to 0",
             files=runs(b=record("b", duration_s="-3"))),
    BadInput("record-results-show-duration", ("results", "show", "b", "--results-dir", "{tmp}/results"),
             "b/records.jsonl:1: not a valid result record: duration_s", files=runs(b=record("b", duration_s='"fast"'))),
    BadInput("record-results-show-rank", ("results", "show", "b", "--results-dir", "{tmp}/results"),
             "rank: Input should be a valid integer (got '1')", files=runs(b=record("b", rank='"1"'))),
]  # fmt: skip

BASELINE_CASES = [
    BadInput("baseline-damaged-as-run", compare("x", "a"), "x.json: not a baseline file: it is damaged (Expecting",
             files=with_baseline("{")),
    BadInput("baseline-damaged-never-not-found", compare("--baseline", "x", "a"), "x.json: not a baseline file: it is damaged",
             files=with_baseline(baseline_text([GOOD])[:-30])),
    BadInput("baseline-is-a-folder", compare("--baseline", "x", "a"), "x.json is a folder, not a file",
             files={**runs(a=GOOD), "results/baselines/x.json/inside": "1"}),
    BadInput("baseline-empty-file", compare("--baseline", "x", "a"), "x.json: not a baseline file: it is damaged",
             files=with_baseline("")),
    BadInput("baseline-not-utf8", compare("--baseline", "x", "a"), "x.json: not a baseline file: it is damaged",
             files=with_baseline(b'{"name": "caf\xe9"}')),
    BadInput("baseline-a-list", compare("--baseline", "x", "a"), "x.json: not a baseline file: it is damaged",
             files=with_baseline("[1, 2]")),
    BadInput("baseline-records-missing", compare("--baseline", "x", "a"), "it is damaged ('records')",
             files=with_baseline('{"name": "x", "run_id": "a"}')),
    BadInput("baseline-record-duration-text", compare("--baseline", "x", "a"),
             "it is damaged (records: duration_s: Input should be a valid number (got '1')",
             files=with_baseline(baseline_text([record("a", duration_s='"1"')]))),
    BadInput("baseline-processes-infinite", compare("--baseline", "x", "a"), "processes is inf; accepted: a whole number in 1-10000",
             files=with_baseline(baseline_text([GOOD], processes="Infinity"))),
    BadInput("baseline-processes-negative", compare("--baseline", "x", "a"), "processes is -4; accepted",
             files=with_baseline(baseline_text([GOOD], processes="-4"))),
    BadInput("baseline-processes-zero", compare("--baseline", "x", "a"), "processes is 0; accepted",
             files=with_baseline(baseline_text([GOOD], processes="0"))),
    BadInput("baseline-processes-text", compare("--baseline", "x", "a"), "processes is '2'; accepted",
             files=with_baseline(baseline_text([GOOD], processes='"2"'))),
    BadInput("baseline-processes-fraction", compare("--baseline", "x", "a"), "processes is 2.5; accepted",
             files=with_baseline(baseline_text([GOOD], processes="2.5"))),
    BadInput("baseline-processes-5000-digits", compare("--baseline", "x", "a"), "Exceeds the limit (4300 digits)",
             files=with_baseline(baseline_text([GOOD], processes="9" * 5000))),
    BadInput("baseline-processes-huge", compare("--baseline", "x", "a"), "processes is 100000000000; accepted",
             files=with_baseline(baseline_text([GOOD], processes="100000000000"))),
    BadInput("baseline-figure-1e300", compare("--baseline", "x", "a"), f"baseline x (a): run a probe {FIGURE} has the value 1e+300",
             files=with_baseline(baseline_text([record("a", "1e300", "[1e300, 1e300]")]))),
    BadInput("baseline-figure-denormal", compare("--baseline", "x", "a"), "has the value 5e-324",
             files=with_baseline(baseline_text([record("a", "5e-324", "[5e-324]")]))),
    BadInput("baseline-figure-text", compare("--baseline", "x", "a"), "records: headline.0.value: Input should be a valid number (got '7')",
             files=with_baseline(baseline_text([record("a", '"7"')]))),
    BadInput("baseline-noise-pct-huge", compare("--baseline", "x", "a"), "noise_pct 1e+300 of " + FLOPS,
             files=with_baseline(baseline_text([GOOD], noise=json.dumps({
                 "machine": {}, "set_at": "2026", "command": [], "processes": 3,
                 "figures": [{"benchmark": "probe", "metric": FLOPS, "labels": {}, "noise_pct": 1e300, "median": 1.0, "processes": 3}]})))),
    BadInput("baseline-noise-processes-infinite", compare("--baseline", "x", "a"), "it is damaged (processes inf;",
             files=with_baseline(baseline_text([GOOD], noise='{"machine": {}, "set_at": "2026", "command": [], '
                                               '"processes": Infinity, "figures": []}'))),
    BadInput("baseline-rm-a-folder", baseline("rm", "x"), "x.json is a folder, not a baseline file",
             files={"results/baselines/x.json/inside": "1"}),
]  # fmt: skip

IMMUTABLE_CASES = [
    BadInput("immutable-baseline-rm", baseline("rm", "x"), "baseline 'x': cannot remove", files=with_baseline(baseline_text([GOOD])),
             prepare=immutable("results/baselines/x.json")),
    BadInput("immutable-baselines-folder-rm", baseline("rm", "x"), "(Operation not permitted); make it and its folder writable",
             files=with_baseline(baseline_text([GOOD])), prepare=immutable("results/baselines")),
    BadInput("immutable-baseline-set-over", baseline("set", "x", "a"), "x.json: the file is read-only or immutable (chattr +i)",
             files=with_baseline(baseline_text([GOOD])), prepare=immutable("results/baselines/x.json")),
    BadInput("immutable-baselines-folder-set", baseline("set", "y", "a"), "baseline y: cannot write",
             files=with_baseline(baseline_text([GOOD])), prepare=immutable("results/baselines")),
    BadInput("immutable-results-root-baseline-set", baseline("set", "y", "a"), "baselines/y.json (Operation not permitted)",
             files=runs(a=GOOD), prepare=immutable("results")),
    BadInput("immutable-compare-out", compare("a", "b", "--format", "md", "--out", "{tmp}/cmp.md"),
             "cmp.md: the file is read-only or immutable", files={**runs(a=GOOD, b=GOOD_B), "cmp.md": "old\n"},
             prepare=immutable("cmp.md")),
    BadInput("immutable-compare-out-folder", compare("a", "b", "--format", "csv", "--out", "{tmp}/out/cmp.csv"),
             "cmp.csv (Operation not permitted)", files={**runs(a=GOOD, b=GOOD_B), "out/.keep": ""},
             prepare=immutable("out")),
    BadInput("immutable-results-probe", ("probe", "--results-dir", "{tmp}/res"), "res is not writable (Permission denied)",
             files={"res/.keep": ""}, prepare=immutable("res")),
    BadInput("immutable-results-trace-record", ("trace", "summarize", "{tmp}/t.json", "--record", "--results-dir", "{tmp}/res"),
             "is not writable (Permission denied)",
             files={"t.json": json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}]}),
                    "res/.keep": ""}, prepare=immutable("res")),
    BadInput("immutable-history-png", ("history", FLOPS, "--results-dir", "{tmp}/results", "--png", "{tmp}/h.png"),
             "h.png: the file is read-only or immutable",
             files={**runs(a=GOOD, b=GOOD_B), "h.png": b"\x89PNG old"}, prepare=immutable("h.png")),
    # what the chmod cases of test_jobs.py try, in a form that binds root too
    BadInput("immutable-report-run-folder", ("report", "r1", "--results-dir", "results", "--offline"),
             "report folder results/r1/report/panels is not writable (Operation not permitted)",
             files={"results/r1/records.jsonl": record("r1")}, prepare=immutable("results/r1")),
    BadInput("immutable-report-page", ("report", "r1", "--results-dir", "results", "--offline"),
             "report page results/r1/report/index.html: cannot write results/r1/report/index.html: the file is read-only or immutable",
             files={"results/r1/records.jsonl": record("r1"), "results/r1/report/index.html": "old\n"},
             prepare=immutable("results/r1/report/index.html")),
    BadInput("immutable-dashboards-out", ("dashboards", "--out", "grafana"),
             "dashboards folder grafana is not writable (Operation not permitted)",
             files={"grafana/README": "generated"}, prepare=immutable("grafana")),
    BadInput("immutable-history-folder", ("history", FLOPS, "--results-dir", "{tmp}/results"), "history",
             files={**runs(a=GOOD, b=GOOD_B), "results/history/.keep": ""}, prepare=immutable("results/history")),
]  # fmt: skip


def summarize(*args: str) -> tuple[str, ...]:
    return ("trace", "summarize", *args)


def event(**fields: object) -> dict[str, object]:
    """One complete kernel event, with `fields` replacing its own."""
    return {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 5, "pid": 0, "tid": 7, **fields}


def trace(*events: dict[str, object], **top: object) -> str:
    return json.dumps({"traceEvents": list(events), **top})


def trace_case(case_id: str, fragment: str, text: str | bytes, name: str = "t.json") -> BadInput:
    return BadInput(case_id, summarize(f"{{tmp}}/{name}"), fragment, files={name: text})


NO_TIMES = "has no usable times: every one of its"
TRACE_CASES = [
    trace_case("trace-ts-5000-digits", "Exceeds the limit (4300 digits)",
               '{"traceEvents": [{"ph": "X", "name": "k", "ts": ' + "9" * 5000 + ', "dur": 1}]}'),
    trace_case("trace-gz-ts-5000-digits", "t.json.gz is not a readable Chrome trace JSON (Exceeds the limit",
               gzip.compress(('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": ' + "7" * 5000 + "}]}").encode()),
               name="t.json.gz"),
    trace_case("trace-ts-400-digits", "1 with a ts beyond 1e+18 µs", trace(event(ts=10**400))),
    trace_case("trace-dur-400-digits", "1 with a dur beyond 1e+18 µs", trace(event(dur=10**400))),
    trace_case("trace-ts-1e300", "1 with a ts beyond 1e+18 µs (e.g. 'k': ts=1e+300)", trace(event(ts=1e300))),
    trace_case("trace-ts-minus-infinity", "1 with an infinite ts", trace(event(ts=-float("inf")))),
    trace_case("trace-dur-infinity", "1 with an infinite dur", trace(event(dur=float("inf")))),
    trace_case("trace-dur-nan", "1 with dur NaN", trace(event(dur=float("nan")))),
    trace_case("trace-dur-denormal", "1 with a denormal dur (e.g. 'k': dur=5e-324)", trace(event(dur=5e-324))),
    trace_case("trace-dur-negative-zero-ts-nan", f"{NO_TIMES} 2 complete events", trace(event(dur=-1), event(ts=float("nan")))),
    trace_case("trace-ts-bool", "1 with a ts that is no number (e.g. 'k': ts=True)", trace(event(ts=True))),
    trace_case("trace-dur-bool", "1 with a dur that is no number", trace(event(dur=False))),
    trace_case("trace-ts-null", "1 with a ts that is no number (e.g. 'k': ts=None)", trace(event(ts=None))),
    trace_case("trace-ts-text-word", "1 with a ts that is no number (e.g. 'k': ts='soon')", trace(event(ts="soon"))),
    trace_case("trace-dur-text-negative", "1 with a negative dur", trace(event(dur="-5"))),
    trace_case("trace-ts-list", "1 with a ts that is no number", trace(event(ts=[1]))),
    trace_case("trace-gz-every-ts-nan", f"{NO_TIMES} 3 complete events", gzip.compress(trace(*[event(ts=float("nan"))] * 3).encode()),
               name="rank-0.pt.trace.json.gz"),
    trace_case("trace-only-metadata", "holds no complete events (ph 'X': ops, kernels, steps), only ph M",
               trace({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}})),
    trace_case("trace-only-instants-and-counters", "only ph C, i",
               trace({"ph": "i", "name": "mark", "ts": 1}, {"ph": "C", "name": "mem", "ts": 2, "args": {"x": 1}})),
    trace_case("trace-gz-only-flow-events", "only ph f, s",
               gzip.compress(trace({"ph": "s", "name": "ac2g", "id": 1, "ts": 1}, {"ph": "f", "name": "ac2g", "id": 1, "ts": 2}).encode()),
               name="t.json.gz"),
    trace_case("trace-events-of-strings", "is not a torch.profiler trace: 2 traceEvents without ph and name", '{"traceEvents": ["a", "b"]}'),
    trace_case("trace-events-without-ph", "1 traceEvents without ph and name", trace({"name": "k", "ts": 1, "dur": 2})),
    trace_case("trace-bare-array-of-nulls", "3 traceEvents without ph and name", "[null, null, null]"),
    trace_case("trace-gz-empty-list", "is not a torch.profiler trace: an empty traceEvents list", gzip.compress(b"[]"), name="t.json.gz"),
    trace_case("trace-gz-of-gz", "t.json.gz is not a readable Chrome trace JSON", gzip.compress(gzip.compress(trace(event()).encode())),
               name="t.json.gz"),
    trace_case("trace-gz-nan-token-cut", "t.json.gz is not a readable Chrome trace JSON",
               gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "k", "ts": Na'), name="t.json.gz"),
]  # fmt: skip

# A details export as ncu writes it (every cell quoted, every row ended), made up here: launch 0 of a kernel.
NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
)


def ncu_row(metric: str, unit: str, value: str) -> str:
    return (
        f'"0","1","app","127.0.0.1","scale(float *, int)","1","7","(256, 1, 1)","(4096, 1, 1)","0","8.9",'
        f'"GPU Speed Of Light Throughput","{metric}","{unit}","{value}"\n'
    )


NCU_CSV = NCU_HEADER + "".join(
    ncu_row(metric, unit, value)
    for metric, unit, value in (
        ("gpu__time_duration.sum", "ns", "2,928"),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "12.5"),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "80.1"),
    )
)
# ncu's console output for the same launch, made up here in the layout ncu prints.
NCU_LOG = """==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "scale" - 0: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
[4242] python3@127.0.0.1
  scale(float *, int) (4096, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 8.9
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    Memory Throughput                 %        81.52
    Duration                         us         2.94
    Compute (SM) Throughput           %        12.20
    ----------------------- ----------- ------------
"""


def ncu(case_id: str, fragment: str, text: str | bytes, *args: str, name: str = "r.csv") -> BadInput:
    return BadInput(case_id, ("ncu", "summarize", f"{{tmp}}/{name}", *args), fragment, files={name: text})


NCU_CASES = [
    ncu("ncu-csv-cut-in-header", "r.csv is cut: the file ends inside its header row", NCU_HEADER[:70]),
    ncu("ncu-csv-header-without-newline", "r.csv is cut: the file ends inside its header row", NCU_HEADER[:-1]),
    ncu("ncu-csv-cut-in-first-row", "r.csv is cut: the file ends inside its first kernel row", NCU_CSV[: len(NCU_HEADER) + 60]),
    ncu("ncu-csv-cut-after-first-quote", "r.csv is cut", NCU_CSV[: len(NCU_HEADER) + 1]),
    ncu("ncu-csv-first-row-short", "r.csv is cut or damaged: none of its 1 kernel rows is whole (row 1 has 3 cells",
        NCU_HEADER + '"0","1","app"\n'),
    ncu("ncu-csv-preamble-then-cut-header", "is cut: the file ends inside its header row",
        "==PROF== Connected to process 1\n" + NCU_HEADER[:40]),
    ncu("ncu-csv-cut-gz-named", "r.csv is cut", NCU_HEADER[:100]),
    ncu("ncu-log-cut-before-results", "r.txt is cut: ncu profiled 1 launch(es)", NCU_LOG[:180], name="r.txt"),
    ncu("ncu-log-cut-three-profiled", "ncu profiled 3 launch(es)",
        "".join(f'==PROF== Profiling "k{i}" - {i}: 0%....50%....100% - 9 passes\n' for i in range(3)), name="r.txt"),
    ncu("ncu-peak-infinite", "'dram=1e999GB/s' is no peak; accepted: a number above 0 and below 1e30", NCU_CSV,
        "--peak", "dram=1e999GB/s,fp32=1TFLOPS,tensor=1TFLOPS"),
    ncu("ncu-peak-zero", "'fp32=0TFLOPS' is no peak", NCU_CSV, "--peak", "dram=100GB/s,fp32=0TFLOPS,tensor=1TFLOPS"),
    ncu("ncu-peak-1e300", "'tensor=1e300' is no peak", NCU_CSV, "--peak", "dram=100GB/s,fp32=1,tensor=1e300"),
    ncu("ncu-peak-below-a-byte", "'dram=0.0000000001' is no peak", NCU_CSV, "--peak", "dram=0.0000000001,fp32=1,tensor=1"),
    ncu("ncu-peak-text", "'dram=fast' is not KEY=NUMBER[UNIT]", NCU_CSV, "--peak", "dram=fast"),
    ncu("ncu-csv-header-only-text", "r.csv has a CSV header but no kernel rows", NCU_HEADER),
    BadInput("ncu-record-into-a-file", ("ncu", "summarize", "{tmp}/r.csv", "--record", "--results-dir", "{tmp}/res"),
             "res is not writable (it is a file, not a folder)", files={"r.csv": NCU_CSV, "res": "a file\n"}),
    BadInput("ncu-record-immutable-results", ("ncu", "summarize", "{tmp}/r.csv", "--record", "--results-dir", "{tmp}/res"),
             "res is not writable (Permission denied)", files={"r.csv": NCU_CSV, "res/.keep": ""}, prepare=immutable("res")),
]  # fmt: skip


def slurm(*args: str) -> tuple[str, ...]:
    return ("slurm", *args)


SLURM_CASES = [
    BadInput("slurm-submit-results-a-file", slurm("submit", "--local", "--results-dir", "{tmp}/f"),
             "/f is not writable (it is a file, not a folder); pass a writable folder with --results-dir", files={"f": "x\n"}),
    BadInput("slurm-wait-results-a-file", slurm("wait", "42", "--local", "--results-dir", "{tmp}/f"),
             "is not writable (it is a file, not a folder)", files={"f": "x\n"}),
    BadInput("slurm-collect-results-under-a-file", slurm("collect", "42", "--local", "--results-dir", "{tmp}/f/runs"),
             "f is a file, not a folder", files={"f": "x\n"}),
    BadInput("slurm-collect-results-immutable", slurm("collect", "42", "--local", "--results-dir", "{tmp}/res/runs"),
             "results folder", files={"res/.keep": ""}, prepare=immutable("res")),
    BadInput("slurm-submit-results-name-too-long", slurm("submit", "--local", "--results-dir", "{tmp}/" + "r" * 300),
             "has a component of 300 bytes; accepted: at most 255 bytes"),
    BadInput("slurm-status-id-zero", slurm("status", "0", "--local"), "job id '0' is not accepted; accepted: the number sbatch printed"),
    BadInput("slurm-status-id-negative", slurm("status", "-5", "--local"), "job id '-5' is not accepted"),
    BadInput("slurm-status-id-plus", slurm("status", "+42", "--local"), "job id '+42' is not accepted"),
    BadInput("slurm-cancel-id-beyond-max", slurm("cancel", "67108864", "--local"), "job id '67108864' is not accepted; accepted: the number sbatch printed, 1-67108863"),
    BadInput("slurm-collect-id-with-step", slurm("collect", "42.0", "--local"), "job id '42.0' is not accepted"),
    BadInput("slurm-wait-id-array", slurm("wait", "42_1", "--local"), "job id '42_1' is not accepted"),
    BadInput("slurm-wait-id-fullwidth", slurm("wait", "４２", "--local"), "job id '４２' is not accepted"),
    BadInput("slurm-wait-timeout-zero", slurm("wait", "42", "--timeout", "0", "--local"), "argument --timeout: '0' is not accepted"),
    BadInput("slurm-wait-timeout-1e400", slurm("wait", "42", "--timeout", "1e400", "--local"), "argument --timeout: '1e400' is not accepted"),
    BadInput("slurm-submit-timeout-text", slurm("submit", "--timeout", "soon"), "argument --timeout: 'soon' is not accepted"),
    BadInput("slurm-submit-cpus-zero", slurm("submit", "--cpus-per-task", "0"), "--cpus-per-task 0 is not accepted"),
    BadInput("slurm-submit-partition-spaces", slurm("submit", "--partition", "gpu nodes"), "--partition 'gpu nodes' is not accepted"),
    BadInput("slurm-submit-gpus-negative", slurm("submit", "--gpus-per-node", "-1"), "--gpus-per-node -1 is not accepted"),
    BadInput("slurm-submit-checkpoint-negative", slurm("submit", "--checkpoint-every", "-2"), "--checkpoint-every -2 is not accepted"),
    BadInput("slurm-submit-nodes-beyond-32-bits", slurm("submit", "--nodes", "4294967294"), "--nodes 4294967294 is not accepted; use 1-4294967293"),
    BadInput("slurm-submit-nodes-5000-digits", slurm("submit", "--nodes", "9" * 4000), "--nodes 99999999999999999999... (4000 digits) is not accepted"),
    BadInput("slurm-submit-gpus-beyond-16-bits", slurm("submit", "--gpus-per-node", "65534"), "--gpus-per-node 65534 is not accepted; use 0-65533 (0: CPU, gloo)"),
    BadInput("slurm-submit-cpus-beyond-16-bits", slurm("submit", "--cpus-per-task", "70000"), "--cpus-per-task 70000 is not accepted; use 1-65533"),
    BadInput("slurm-submit-steps-beyond-trainer", slurm("submit", "--steps", "10000001"), "--steps 10000001 is not accepted; use 1-10000000"),
    BadInput("slurm-submit-checkpoint-beyond-steps", slurm("submit", "--checkpoint-every", "20000000"), "--checkpoint-every 20000000 is not accepted; use 0-10000000 (0: none)"),
    BadInput("slurm-submit-time-hours", slurm("submit", "--time", "2h"), "--time '2h' is not accepted; accepted: Slurm's MINUTES"),
]  # fmt: skip

NAME_CASES = [
    BadInput("name-baseline-set-300-chars", baseline("set", "n" * 300, "a"), "baseline name 'nnnn", files=runs(a=GOOD)),
    BadInput("name-baseline-rm-dot-dot", baseline("rm", ".."), "baseline name '..' is not accepted"),
    BadInput("name-baseline-rm-hidden", baseline("rm", ".x"), "baseline name '.x' is not accepted"),
    BadInput("name-compare-baseline-slash", compare("--baseline", "a/b", "a"), "baseline name 'a/b' is not accepted",
             files=runs(a=GOOD)),
    BadInput("name-probe-run-id-nul", ("probe", "--run-id", "a\x01b"), "--run-id: run.run_id: Value error"),
    BadInput("name-probe-run-id-space", ("probe", "--run-id", "my run"), "(got 'my run')"),
    BadInput("name-results-show-empty", ("results", "show", "", "--results-dir", "{tmp}"), "run id '' is not accepted"),
    BadInput("name-history-png-too-long", ("history", FLOPS, "--results-dir", "{tmp}/results", "--png", "{tmp}/" + "p" * 300 + ".png"),
             "has a component of 304 bytes; accepted: at most 255 bytes", files=runs(a=GOOD, b=GOOD_B)),
]  # fmt: skip

CASES: list[BadInput] = [
    *RECORD_CASES,
    *BASELINE_CASES,
    *IMMUTABLE_CASES,
    *TRACE_CASES,
    *NCU_CASES,
    *SLURM_CASES,
    *NAME_CASES,
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_number_or_file_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    result = check(case, tmp_path / "work", tmp_path / "home")
    assert "RuntimeWarning" not in result.stderr + result.stdout
    assert not list((tmp_path / "work").rglob("*.tmp")), "a temporary file was left next to a target"
