"""Bad input to `compare`, `baseline`, `noise` and `history`: figures that are no measurement, damaged
baselines, the options of --rounds.

Each case runs the real entry point in a subprocess through tests/badinput.py:check: one
`fleetbench: error: ...` line naming the problem, exit 2, no traceback, nothing written (no baseline
set from a refused run, no plot, no run folder of a refused --rounds).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from badinput import BadInput, check

FLOPS = "fleetbench_probe_achieved_flop_per_second"


def record(run_id: str, value: str = "1.5e11", samples: str = "[1.4e11, 1.5e11, 1.6e11]") -> str:
    """One probe record line whose matmul figure is written with the JSON tokens given (NaN, Infinity ...)."""
    body = {
        "run_id": run_id, "benchmark": "probe", "host": "h", "device": "cpu", "backend": "cpu", "status": "ok",
        "headline": [{"metric": FLOPS, "labels": {"probe": "matmul", "dtype": "float32", "size": "64"},
                      "value": "@VALUE@", "samples": "@SAMPLES@"}],
        "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "duration_s": 1.0,
        "git_revision": "unknown", "packages": {},
    }  # fmt: skip
    text = json.dumps(body).replace('"@VALUE@"', value).replace('"@SAMPLES@"', samples)
    return text + "\n"


def runs(**lines: str) -> dict[str, str | bytes]:
    """Run folders under results/: run id -> its records.jsonl."""
    return {f"results/{run_id}/records.jsonl": line for run_id, line in lines.items()}


def compare(*args: str) -> tuple[str, ...]:
    return ("compare", "--results-dir", "{tmp}/results", *args)


def baseline_file(records: list[str]) -> str:
    """A baseline file as `baseline set` writes it, holding these record lines."""
    payload = {"name": "b", "run_id": "a", "source": "a", "set_at": "2026-01-01T00:00:00", "processes": 1,
               "noise": None, "records": [json.loads(r, parse_constant=lambda _: None) for r in records]}  # fmt: skip
    return json.dumps(payload)


GOOD = record("a")
CASES = [
    BadInput("nan-value", compare("a", "b"), f"run b probe {FLOPS}{{dtype=float32,probe=matmul,size=64}} has the value nan",
             files=runs(a=GOOD, b=record("b", "NaN"))),
    BadInput("inf-value", compare("a", "b"), "has the value inf; accepted: a finite number >= 0",
             files=runs(a=GOOD, b=record("b", "Infinity"))),
    BadInput("negative-throughput", compare("a", "b"), "has the value -150000000000.0; accepted",
             files=runs(a=GOOD, b=record("b", "-1.5e11"))),
    BadInput("nan-in-samples", compare("a", "b"), "has the value nan in sample 2 of 3",
             files=runs(a=GOOD, b=record("b", "1.5e11", "[1.4e11, NaN, 1.6e11]"))),
    BadInput("nan-base", compare("b", "a"), "b: run b probe", files=runs(a=GOOD, b=record("b", "-Infinity"))),
    BadInput("baseline-set-nan", ("baseline", "--results-dir", "{tmp}/results", "set", "main", "b"),
             "run b probe", files=runs(b=record("b", "NaN"))),
    BadInput("baseline-with-nulls", compare("--baseline", "old", "a"), "baseline old (a): run a probe fleetbench_probe_achieved_flop_per_second{dtype=float32,probe=matmul,size=64} has the value nan",
             files={**runs(a=GOOD), "results/baselines/old.json": baseline_file([record("a", "NaN")])}),
    BadInput("baseline-truncated", compare("--baseline", "cut", "a"), "cut.json: not a baseline file",
             files={**runs(a=GOOD), "results/baselines/cut.json": baseline_file([GOOD])[:40]}),
    BadInput("baseline-negative", compare("--baseline", "neg", "a"), "baseline neg (a): run a probe",
             files={**runs(a=GOOD), "results/baselines/neg.json": baseline_file([record("a", "-2.0")])}),
    BadInput("rounds-one", compare("--rounds", "1", "--", "probe"), "--rounds: '1' is not accepted; accepted: 3 to 1000 processes per side"),
    BadInput("rounds-not-a-job", compare("--rounds", "3", "--", "results"), "--rounds runs a benchmark command, got 'results'"),
    BadInput("rounds-no-command", compare("--rounds", "3"), "--rounds runs a benchmark command, got nothing"),
    BadInput("rounds-own-run-id", compare("--rounds", "3", "--", "probe", "--run-id", "x"), "--run-id: --rounds sets"),
    BadInput("rounds-own-results", compare("--rounds", "3", "--", "probe", "--results-dir=x"), "--results-dir: --rounds sets"),
    BadInput("rounds-and-baseline", compare("--rounds", "3", "--baseline", "b", "--", "probe"), "pass one of them"),
    BadInput("new-set-without-rounds", compare("a", "b", "--new-set", "probe.threads=1"), "--new-set applies to --rounds",
             files=runs(a=GOOD, b=record("b"))),
    BadInput("rounds-unknown-rev", compare("--rounds", "3", "--repo", "{tmp}", "--base-rev", "nope", "--", "probe"),
             "--base-rev 'nope' is not a commit of"),
    BadInput("rounds-bad-new-set", compare("--rounds", "3", "--new-set", "probe.nope=1", "--", "probe"),
             "--new-set: ", ),
    BadInput("noise-one-round", ("noise", "--rounds", "1", "--", "probe"), "--rounds: '1' is not accepted; accepted: 3 to 1000 processes per side"),
    BadInput("noise-not-a-job", ("noise", "--", "stack", "up"), "--rounds runs a benchmark command, got 'stack'"),
    BadInput("noise-set-not-compare", ("noise", "--set", "probe.threads=1", "--", "probe"), "--set 'probe.threads=1' is not accepted; accepted: compare.KEY=VALUE"),
    BadInput("noise-set-bad-value", ("noise", "--set", "compare.noise_factor=-1", "--", "probe"), "compare.noise_factor"),
    BadInput("noise-bad-baseline-name", ("noise", "--baseline", "../x", "--", "probe"), "baseline name '../x' is not accepted"),
    BadInput("history-unknown-metric", ("history", "probe_flops"), "metric 'probe_flops' is not a headline metric"),
    BadInput("history-bad-label", ("history", FLOPS, "--label", "size"), "--label 'size' is not accepted"),
    BadInput("history-bad-format", ("history", FLOPS, "--format", "xml"), "--format 'xml' is not accepted"),
    BadInput("history-bad-penalty", ("history", FLOPS, "--penalty", "0"), "--penalty 0.0 is not accepted"),
    BadInput("history-no-runs", ("history", FLOPS, "--results-dir", "{tmp}/results"), "no successful run under",
             files={"results/.keep": ""}),
    BadInput("history-png-folder", ("history", FLOPS, "--png", "{tmp}"), "is a folder; pass a file path"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_to_compare_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    result = check(case, tmp_path / "work", tmp_path / "home")
    assert "RuntimeWarning" not in result.stderr
