"""Bad input to the CLI itself, config files, `--set`, URLs, environment variables and the results folder.

Each case runs the real entry point in a subprocess through tests/badinput.py:check: one
`fleetbench: error: ...` line naming the problem, exit 2, no traceback, nothing written. The
environment is the test's own with the case's variables on top; a FLEETBENCH_* variable fleetbench
does not know adds a warning line before the error (tests/test_cli_safety_net.py), so no case sets one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from badinput import BadInput, check, record_line
from fleetbench.config.schema import FleetbenchConfig

RECORD = record_line("good")
SECTIONS = ", ".join(sorted(FleetbenchConfig.model_fields))
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)


def probe(*args: str) -> tuple[str, ...]:
    """`fleetbench probe ARGS`: the cheapest command that reads a whole config."""
    return ("probe", *args)


def config(name: str, fragment: str, text: str | bytes, case_id: str) -> BadInput:
    """A case: `probe --config {tmp}/NAME` with NAME holding `text`."""
    return BadInput(case_id, probe("--config", f"{{tmp}}/{name}"), fragment, files={name: text})


def override(value: str, fragment: str, case_id: str) -> BadInput:
    """A case: `probe --set VALUE`."""
    return BadInput(case_id, probe("--set", value), fragment)


def results(*args: str) -> tuple[str, ...]:
    """`fleetbench results --results-dir {tmp}/results ARGS`."""
    return ("results", "--results-dir", "{tmp}/results", *args)


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "c.yaml")


# The cases of the first bad-input test, as they were.
FIRST_CASES = [
    config(
        "c.yaml",
        "c.yaml: probe.matmul_size: unknown key; accepted: copy_mib, device, dtype, matmul_sizes",
        "probe:\n  matmul_size: [128]\n",
        "yaml-unknown-key",
    ),
    config(
        "c.toml",
        "c.toml: probe.min_run_time_s: Input should be a valid number",
        '[probe]\nmin_run_time_s = "long"\n',
        "toml-wrong-type",
    ),
    config(
        "c.yaml",
        "probe.matmul_sizes.0: Input should be less than or equal to 16384",
        "probe:\n  matmul_sizes: [100000]\n",
        "yaml-out-of-range",
    ),
    config("c.yaml", f"probes: unknown key; accepted: {SECTIONS}", "probes: {}\n", "yaml-unknown-section"),
    config("c.yaml", "c.yaml: invalid YAML at line", "probe:\n  dtype: [float32\n", "yaml-malformed"),
    config("c.toml", "c.toml: invalid TOML", "[probe\n", "toml-malformed"),
    config("c.yaml", "top level must be a mapping", "- probe\n", "yaml-top-level-list"),
    BadInput("config-missing", probe("--config", "{tmp}/none.yaml"), "none.yaml: config file not found"),
    BadInput("config-is-a-folder", probe("--config", "{tmp}/d.yaml"), "is a folder", files={"d.yaml/x": ""}),
    config(
        "c.json", "unsupported config format '.json'; accepted: .yaml, .yml, .toml", "{}", "config-unsupported-suffix"
    ),
    BadInput(
        "set-through-a-file-value",
        probe("--config", "{tmp}/c.yaml", "--set", "probe.dtype.x=1"),
        "'dtype' is a value, not a section",
        files={"c.yaml": "probe:\n  dtype: float32\n"},
    ),
    override("probe.dtype", "use SECTION.KEY=VALUE", "set-without-equals"),
    override("probe.dtype.x=1", "--set probe.dtype.x=1: probe.dtype: Input should be", "set-into-a-value"),
    BadInput("flag-unknown", probe("--sizes", "3"), "unrecognized arguments: --sizes 3"),
    BadInput("command-unknown", ("frobnicate",), "invalid choice: 'frobnicate'"),
    BadInput("flag-device-choice", probe("--device", "tpu"), "Input should be 'auto', 'cpu', 'cuda' or 'mps'"),
    BadInput("flag-device-cuda-without-gpu", probe("--device", "cuda"), "torch sees no CUDA GPU"),
    BadInput("run-id-parent", probe("--run-id", "../escape"), "--run-id: run.run_id: Value error"),
    BadInput("run-id-slash", probe("--run-id", "a/b"), "use 1-64 characters of letters, digits"),
    BadInput("results-show-dotdot", ("results", "show", ".."), "run id '..' is not accepted"),
    BadInput(
        "results-dir-under-a-file",
        probe("--results-dir", "{tmp}/blocker/results"),
        "is not writable",
        files={"blocker": "a file, not a folder"},
    ),
    BadInput(
        "pushgateway-flag-no-scheme",
        probe("--pushgateway", "127.0.0.1:9091"),
        "--pushgateway: telemetry.pushgateway: Value error",
    ),
    BadInput("pushgateway-flag-bad-port", probe("--pushgateway", "http://127.0.0.1:99999"), "invalid port"),
    BadInput("pushgateway-flag-ftp", probe("--pushgateway", "ftp://127.0.0.1"), "not an http(s) URL"),
    BadInput("flush-bad-url", ("metrics", "flush", "--pushgateway", "nowhere"), "--pushgateway 'nowhere'"),
    BadInput("flush-missing-spool", ("metrics", "flush", "--spool-dir", "{tmp}/nope"), "does not exist"),
    BadInput("results-show-unknown-run", ("results", "--results-dir", "{tmp}", "show", "nope"), "run 'nope' not found"),
]

# Config files damaged the ways files get damaged: editors, encodings, copy and paste, the wrong file.
FILE_CASES = [
    config("c.yaml", "a tab: YAML indents with spaces", "probe:\n\tdtype: float32\n", "yaml-tab-indent"),
    config(
        "c.yaml",
        "c.yaml: invalid YAML at line 3: duplicate key 'dtype' (first at line 2)",
        "probe:\n  dtype: float32\n  dtype: float16\n",
        "yaml-duplicate-key",
    ),
    config("c.yaml", "duplicate key 'probe' (first at line 1)", "probe: {}\nprobe: {}\n", "yaml-duplicate-section"),
    config("c.toml", "c.toml: invalid TOML", '[probe]\ndtype = "float32"\ndtype = "float16"\n', "toml-duplicate-key"),
    config(
        "c.yaml",
        "c.yaml: not UTF-8 text (byte 0xe9 at line 2)",
        "probe:\n  dtype: 'fl\xe9'\n".encode("latin-1"),
        "yaml-latin-1",
    ),
    config("c.toml", "c.toml: not UTF-8 text (byte 0xff at line 1)", b"\xff\xfe[probe]\n", "toml-utf16-bom"),
    config("c.yaml", "not UTF-8 text (byte 0x89 at line 1)", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "yaml-binary"),
    config("c.yaml", "character #x0000 is not allowed", "probe:\x00\n", "yaml-nul-character"),
    config("c.toml", "c.toml: invalid TOML", "[probe]\ndtype = 'a\x00'\n", "toml-nul-character"),
    config("c.yaml", "Exceeds the limit (4300 digits)", f"train:\n  seed: {'9' * 5000}\n", "yaml-5000-digits"),
    config("c.toml", "Exceeds the limit (4300 digits)", f"[train]\nseed = {'9' * 5000}\n", "toml-5000-digits"),
    config(
        "c.yaml",
        "train.node_rank: Input should be an integer of at most 64 bits",
        f"train:\n  node_rank: {2**70}\n",
        "yaml-int-beyond-64-bits",
    ),
    config("c.yaml", "train.grad_clip: Input should be a finite number", "train:\n  grad_clip: .inf\n", "yaml-inf"),
    config("c.toml", "train.lr: Input should be a finite number", "[train]\nlr = nan\n", "toml-nan"),
    config("c.yaml", "c.yaml: invalid YAML at line 1", "probe: " + "[" * 5000 + "]" * 5000 + "\n", "yaml-deep-nesting"),
    config("c.toml", "nested too deeply", "[probe]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "toml-deep-nesting"),
    config("c.yaml", "holds more than 100000 values once YAML aliases are expanded", ALIAS_BOMB, "yaml-alias-bomb"),
    config("c.yaml", "a YAML alias refers to its own anchor", "probe: &a\n  matmul_sizes: *a\n", "yaml-self-alias"),
    config("c.yaml", "larger than 1 MiB", "#" * (2 << 20), "yaml-2-mib"),
    config("c.yaml", "top level must be a mapping", "42\n", "yaml-top-level-scalar"),
    config("c.yaml", "could not determine a constructor", "probe: !!python/object:os.system x\n", "yaml-python-tag"),
    config("c.yaml", "expected a single document", "probe: {}\n---\ntrain: {}\n", "yaml-two-documents"),
    config("config", "unsupported config format '(none)'", "probe: {}\n", "config-no-suffix"),
    BadInput("config-fifo", probe("--config", "{tmp}/c.yaml"), "is not a regular file", prepare=_fifo),
    config(
        "c.yaml", "c.yaml: probe: a section holds keys (copy_mib, device, ", "probe: 5\n", "yaml-section-not-mapping"
    ),
    config("c.yaml", "run.run_id: Input should be a valid string", "run:\n  run_id: 2024-01-01\n", "yaml-date-run-id"),
    config(
        "c.yaml",
        "c.yaml: telemetry.pushgateway: Value error, is not an http(s) URL",
        "telemetry:\n  pushgateway: localhost:9091\n",
        "yaml-pushgateway-no-scheme",
    ),
    config(
        "c.yaml",
        "workload 'script' needs profile.script=PATH",
        "profile:\n  workload: script\n",
        "yaml-profile-script-missing",
    ),
]

# One unknown key and one wrong type in every section, nested ones included.
SECTION_CASES = [
    config(
        "c.yaml",
        "run.results: unknown key; accepted: continues, results_dir, run_id",
        "run:\n  results: r\n",
        "unknown-run",
    ),
    config("c.yaml", "telemetry.push_gateway: unknown key", "telemetry:\n  push_gateway: x\n", "unknown-telemetry"),
    config("c.toml", "train.step: unknown key", "[train]\nstep = 3\n", "unknown-train"),
    config("c.yaml", "profile.workloads: unknown key", "profile:\n  workloads: linear\n", "unknown-profile"),
    config(
        "c.toml",
        "profile.thresholds.latency_bound: unknown key",
        "[profile.thresholds]\nlatency_bound = 0.5\n",
        "unknown-profile-thresholds",
    ),
    config("c.yaml", "profile.ncu.launches: unknown key", "profile:\n  ncu:\n    launches: 3\n", "unknown-profile-ncu"),
    config("c.yaml", "edge.kernel: unknown key", "edge:\n  kernel: [copy]\n", "unknown-edge"),
    config("c.toml", "compare.alpa: unknown key", "[compare]\nalpa = 0.05\n", "unknown-compare"),
    config("c.yaml", "run.run_id: Input should be a valid string", "run:\n  run_id: [a]\n", "type-run"),
    config(
        "c.yaml",
        "telemetry.push_retries: Input should be a valid integer",
        "telemetry:\n  push_retries: many\n",
        "type-telemetry",
    ),
    config(
        "c.yaml",
        "probe.threads: Input should be an integer, not true or false",
        "probe:\n  threads: yes\n",
        "type-probe",
    ),
    config("c.toml", "train.fsdp: Input should be true or false (got 1)", "[train]\nfsdp = 1\n", "type-train"),
    config("c.yaml", "profile.top: Input should be an integer, not true", "profile:\n  top: true\n", "type-profile"),
    config(
        "c.yaml",
        "profile.thresholds.latency_bound_below: Input should be a valid number",
        "profile:\n  thresholds:\n    latency_bound_below: high\n",
        "type-profile-thresholds",
    ),
    config(
        "c.toml",
        "profile.ncu.launch_count: Input should be a valid integer, got a number with a fractional part",
        "[profile.ncu]\nlaunch_count = 1.5\n",
        "type-profile-ncu",
    ),
    config("c.yaml", "edge.kernels: Input should be a valid list", "edge:\n  kernels: copy\n", "type-edge"),
    config("c.toml", "compare.alpha: Input should be a number, not true", "[compare]\nalpha = true\n", "type-compare"),
]

# `--set` in each of its bad forms.
SET_CASES = [
    override("=1", "use SECTION.KEY=VALUE", "set-empty-key"),
    override("probe..dtype=float32", "use SECTION.KEY=VALUE", "set-empty-segment"),
    override("probe.=float32", "use SECTION.KEY=VALUE", "set-trailing-dot"),
    override("probe=1", "--set probe=1: probe: Input should be a valid dictionary", "set-section-only"),
    override("probe.matmul_sizes=[1,", "is not a valid scalar or [list]", "set-unclosed-list"),
    override("nope.x=1", f"nope: unknown key; accepted: {SECTIONS}", "set-unknown-section"),
    override("probe.speed=fast", "probe.speed: unknown key; accepted: copy_mib, device", "set-unknown-key"),
    override("probe.threads=true", "probe.threads: Input should be an integer, not true or false", "set-bool-as-int"),
    override(
        "train.fsdp=1", "--set train.fsdp=1: train.fsdp: Input should be true or false (got 1)", "set-int-as-bool"
    ),
    override("train.fsdp=maybe", "train.fsdp: Input should be true or false (got 'maybe')", "set-text-as-bool"),
    override("probe.threads=1.5", "got a number with a fractional part", "set-fraction-as-int"),
    override("probe.min_run_time_s=true", "Input should be a number, not true or false", "set-bool-as-float"),
    override("probe.matmul_sizes=[512,true]", "probe.matmul_sizes.1: Input should be an integer", "set-bool-in-list"),
    override("run.run_id=2024", "quote a number to make it text", "set-number-as-text"),
    override("probe.threads=0", "probe.threads: Input should be greater than or equal to 1", "set-zero-threads"),
    override("train.seed=99999999999999999999999", "at most 64 bits", "set-beyond-64-bits"),
    override("train.lr=.nan", "train.lr: Input should be a finite number", "set-nan"),
    override("probe.dtype=!!python/name:os.system", "could not determine a constructor", "set-python-tag"),
    override(
        "compare.fail_thresholds_pct={a: 1, a: 2}", "duplicate key 'a' (first at line 1)", "set-duplicate-flow-key"
    ),
    override("telemetry.pushgateway=ftp://h", "telemetry.pushgateway: Value error, is not an http(s) URL", "set-url"),
    override(
        "edge.thermal_sources=[ipmi]", "edge.thermal_sources.0: Input should be 'thermal_zone'", "set-thermal-source"
    ),
    override(
        "edge.thermal_sources=[hwmon,hwmon]",
        "edge.thermal_sources: Value error, values must be unique",
        "set-thermal-twice",
    ),
    override("edge.cooldown_margin_c=0", "edge.cooldown_margin_c: Input should be greater than 0", "set-zero-margin"),
    override("edge.cooldown_poll_s=-1", "edge.cooldown_poll_s: Input should be greater than 0", "set-negative-poll"),
    override(f"probe.threads={'9' * 5000}", "Exceeds the limit (4300 digits)", "set-5000-digits"),
    override("probe.dtype=*x", "found undefined alias", "set-undefined-alias"),
    override("probe.dtype=", "probe.dtype: Input should be 'float32', 'float16' or 'bfloat16' (got '')", "set-empty"),
    override("probe.dtype=a\n---\nb", "expected a single document", "set-two-documents"),
]

# Flags: bad numbers, run ids, global options, unknown subcommands of every command group.
FLAG_CASES = [
    BadInput("flag-steps-not-int", ("train", "--steps", "ten"), "argument --steps: invalid int value: 'ten'"),
    BadInput("flag-timeout-negative", ("metrics", "flush", "--timeout", "-1"), "--timeout -1.0 is not accepted"),
    BadInput("flag-timeout-not-float", ("metrics", "flush", "--timeout", "abc"), "invalid float value: 'abc'"),
    BadInput("run-id-empty", probe("--run-id", ""), "run.run_id: Value error, use 1-64 characters"),
    BadInput("run-id-space", probe("--run-id", "a b"), "(got 'a b')"),
    BadInput("run-id-too-long", probe("--run-id", "r" * 65), "use 1-64 characters"),
    BadInput("run-id-leading-dot", probe("--run-id", ".hidden"), "starting with a letter or digit"),
    BadInput("global-log-level-choice", ("--log-level", "loud", "results", "list"), "invalid choice: 'loud'"),
    BadInput("global-debug-value", ("--debug=1", "results", "list"), "argument --debug: ignored explicit argument"),
    *(
        BadInput(f"subcommand-unknown-{group}", (group, "frob"), f"fleetbench {group}: argument")
        for group in ("ncu", "trace", "metrics", "results", "stack", "images", "cluster", "baseline")
    ),
]

# Environment variables with bad values, and URLs from flags and the environment.
ENV_CASES = [
    BadInput(
        "env-log-level",
        ("results", "list"),
        "FLEETBENCH_LOG_LEVEL='loud' is not accepted; use one of debug, info, warning, error",
        env={"FLEETBENCH_LOG_LEVEL": "loud"},
    ),
    BadInput("env-debug", ("results", "list"), "FLEETBENCH_DEBUG='maybe'", env={"FLEETBENCH_DEBUG": "maybe"}),
    BadInput(
        "env-prometheus-url",
        ("report", "--results-dir", "{tmp}"),
        "$FLEETBENCH_PROMETHEUS_URL 'not-a-url' is not accepted: is not an http(s) URL",
        env={"FLEETBENCH_PROMETHEUS_URL": "not-a-url"},
    ),
    BadInput(
        "env-prometheus-url-port",
        ("report", "--results-dir", "{tmp}"),
        "has an invalid port",
        env={"FLEETBENCH_PROMETHEUS_URL": "http://127.0.0.1:99999"},
    ),
    BadInput(
        "env-prometheus-port",
        ("report", "--results-dir", "{tmp}"),
        "FLEETBENCH_PROMETHEUS_PORT='abc' is not accepted; use a port number in 1-65535",
        env={"FLEETBENCH_PROMETHEUS_PORT": "abc"},
    ),
    BadInput(
        "env-pushgateway-port",
        ("report", "--results-dir", "{tmp}"),
        "FLEETBENCH_PUSHGATEWAY_PORT='0' is not accepted",
        env={"FLEETBENCH_PUSHGATEWAY_PORT": "0"},
    ),
    BadInput(
        "env-pushgateway",
        probe(),
        "FLEETBENCH_PUSHGATEWAY: telemetry.pushgateway: Value error, is not an http(s) URL",
        env={"FLEETBENCH_PUSHGATEWAY": "nowhere"},
    ),
    BadInput(
        "env-pushgateway-port-zero",
        probe(),
        "FLEETBENCH_PUSHGATEWAY: telemetry.pushgateway: Value error, has port 0",
        env={"FLEETBENCH_PUSHGATEWAY": "http://127.0.0.1:0"},
    ),
    BadInput(
        "prometheus-flag",
        ("report", "--results-dir", "{tmp}", "--prometheus", "not-a-url"),
        "--prometheus 'not-a-url' is not accepted: is not an http(s) URL (no scheme); expected http(s)://HOST",
    ),
    BadInput(
        "prometheus-flag-query",
        ("report", "--results-dir", "{tmp}", "--prometheus", "http://h:9090/?x=1"),
        "is not accepted: must not carry a query or fragment",
    ),
    BadInput(
        "prometheus-flag-userinfo",
        ("report", "--results-dir", "{tmp}", "--prometheus", "http://u:p@h:9090"),
        "carries user:password@",
    ),
    BadInput(
        "prometheus-flag-no-host",
        ("report", "--results-dir", "{tmp}", "--prometheus", "http://:9090"),
        "--prometheus 'http://:9090' is not accepted: is not an http(s) URL (no host)",
    ),
]

# The results folder and the records in it.
RESULTS_CASES = [
    BadInput(
        "results-list-missing-folder",
        results("list"),
        "/results does not exist; run a benchmark first or pass --results-dir",
    ),
    BadInput(
        "results-list-file-not-folder",
        results("list"),
        "/results is not a folder; pass the folder that holds the runs",
        files={"results": "not a folder"},
    ),
    BadInput("results-show-missing-folder", results("show", "r1"), "does not exist; run a benchmark first"),
    BadInput(
        "results-show-truncated-record",
        results("show", "bad"),
        "results/bad/records.jsonl:2: not a valid result record: Invalid JSON",
        files={"results/bad/records.jsonl": RECORD + RECORD[:100] + "\n"},
    ),
    BadInput(
        "results-show-empty-records",
        results("show", "empty"),
        "run 'empty' holds no records",
        files={"results/empty/records.jsonl": ""},
    ),
    BadInput(
        "results-show-binary-records",
        results("show", "bin"),
        "results/bin/records.jsonl:1: not a valid result record",
        files={"results/bin/records.jsonl": b"\xff\xfe\x00\x01garbage\n"},
    ),
    BadInput(
        "results-show-wrong-schema",
        results("show", "old"),
        "results/old/records.jsonl:1: not a valid result record: run_id: Field required",
        files={"results/old/records.jsonl": '{"schema_version": 1}\n'},
    ),
    BadInput(
        "results-show-records-folder",
        results("show", "odd"),
        "run 'odd' not found",
        files={"results/odd/records.jsonl/x": ""},
    ),
    BadInput("results-show-bad-run-id", results("show", "a b"), "run id 'a b' is not accepted"),
    BadInput("results-show-dot", results("show", "."), "run id '.' is not accepted"),
    BadInput(
        "report-unknown-run",
        ("report", "nope", "--results-dir", "{tmp}/results", "--offline"),
        "run 'nope' not found",
        files={"results/good/records.jsonl": RECORD},
    ),
    BadInput(
        "report-missing-folder",
        ("report", "r1", "--results-dir", "{tmp}/nothing", "--offline"),
        "/nothing does not exist",
    ),
]

CASES: list[BadInput] = [*FIRST_CASES, *FILE_CASES, *SECTION_CASES, *SET_CASES, *FLAG_CASES, *ENV_CASES, *RESULTS_CASES]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    check(case, tmp_path / "work", tmp_path / "home")
