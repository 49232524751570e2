"""Bad input through the real CLI: one line naming the problem, exit 2, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.config.schema import FleetbenchConfig

# Each case: files to create (name -> text), CLI args ({tmp} is the temp folder), a fragment of the message.
CASES = {
    "unknown key in YAML": (
        {"c.yaml": "probe:\n  matmul_size: [128]\n"},
        ["probe", "--config", "{tmp}/c.yaml"],
        "c.yaml: probe.matmul_size: unknown key; accepted: copy_mib, device, dtype, matmul_sizes",
    ),
    "wrong type in TOML": (
        {"c.toml": '[probe]\nmin_run_time_s = "long"\n'},
        ["probe", "--config", "{tmp}/c.toml"],
        "c.toml: probe.min_run_time_s: Input should be a valid number",
    ),
    "out of range": (
        {"c.yaml": "probe:\n  matmul_sizes: [100000]\n"},
        ["probe", "--config", "{tmp}/c.yaml"],
        "probe.matmul_sizes.0: Input should be less than or equal to 16384",
    ),
    "unknown section": (
        {"c.yaml": "probes: {}\n"},
        ["probe", "--config", "{tmp}/c.yaml"],
        "probes: unknown key; accepted: " + ", ".join(sorted(FleetbenchConfig.model_fields)),
    ),
    "malformed YAML": (
        {"c.yaml": "probe:\n  dtype: [float32\n"},
        ["probe", "--config", "{tmp}/c.yaml"],
        "c.yaml: invalid YAML at line",
    ),
    "malformed TOML": (
        {"c.toml": "[probe\n"},
        ["probe", "--config", "{tmp}/c.toml"],
        "c.toml: invalid TOML",
    ),
    "top level not a mapping": (
        {"c.yaml": "- probe\n"},
        ["probe", "--config", "{tmp}/c.yaml"],
        "top level must be a mapping",
    ),
    "missing config file": ({}, ["probe", "--config", "{tmp}/none.yaml"], "none.yaml: config file not found"),
    "config is a folder": ({"d.yaml/x": ""}, ["probe", "--config", "{tmp}/d.yaml"], "is a folder"),
    "unsupported config format": (
        {"c.json": "{}"},
        ["probe", "--config", "{tmp}/c.json"],
        "unsupported config format '.json'; accepted: .yaml, .yml, .toml",
    ),
    "override through a value": (
        {"c.yaml": "probe:\n  dtype: float32\n"},
        ["probe", "--config", "{tmp}/c.yaml", "--set", "probe.dtype.x=1"],
        "'dtype' is a value, not a section",
    ),
    "override without =": ({}, ["probe", "--set", "probe.dtype"], "use SECTION.KEY=VALUE"),
    "override into a value": (
        {},
        ["probe", "--set", "probe.dtype.x=1"],
        "--set probe.dtype.x=1: probe.dtype: Input should be",
    ),
    "unknown flag": ({}, ["probe", "--sizes", "3"], "unrecognized arguments: --sizes 3"),
    "unknown command": ({}, ["frobnicate"], "invalid choice: 'frobnicate'"),
    "bad device choice": ({}, ["probe", "--device", "tpu"], "Input should be 'auto', 'cpu', 'cuda' or 'mps'"),
    "cuda without a GPU": ({}, ["probe", "--device", "cuda"], "torch sees no CUDA GPU"),
    "run id with a path separator": ({}, ["probe", "--run-id", "../escape"], "--run-id: run.run_id: Value error"),
    "run id with a slash": ({}, ["probe", "--run-id", "a/b"], "use 1-64 characters of letters, digits"),
    "run id '..'": ({}, ["results", "show", ".."], "run id '..' is not accepted"),
    "unwritable results dir": (
        {"blocker": "a file, not a folder"},
        ["probe", "--results-dir", "{tmp}/blocker/results"],
        "is not writable",
    ),
    "Pushgateway URL without scheme": (
        {},
        ["probe", "--pushgateway", "127.0.0.1:9091"],
        "--pushgateway: telemetry.pushgateway: Value error",
    ),
    "Pushgateway URL with bad port": ({}, ["probe", "--pushgateway", "http://127.0.0.1:99999"], "invalid port"),
    "Pushgateway URL with ftp scheme": ({}, ["probe", "--pushgateway", "ftp://127.0.0.1"], "not an http(s) URL"),
    "flush with a bad URL": ({}, ["metrics", "flush", "--pushgateway", "nowhere"], "--pushgateway 'nowhere'"),
    "flush with a missing spool": ({}, ["metrics", "flush", "--spool-dir", "{tmp}/nope"], "does not exist"),
    "unknown run": ({}, ["results", "--results-dir", "{tmp}", "show", "nope"], "run 'nope' not found"),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_gets_one_clear_line(case: str, tmp_path: Path) -> None:
    files, args, fragment = CASES[case]
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in args], cwd=tmp_path)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fleetbench: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    # Nothing half-written: no results folder, no run folder, no spool.
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_there_are_at_least_fifteen_cases() -> None:
    assert len(CASES) >= 15
