"""Damaged Chrome traces through the trace summary, and damaged inventories through the deploy checks.

Traces: the real ones in tests/data (torch-trace: an A100 GEMM and AlexNet; fsdp2-cpu: two gloo
ranks) are cut off, have bytes flipped (in the JSON or in the gzip stream), are emptied or made
non-UTF-8, lose `traceEvents` or get it as another type, and have event fields (`ts`, `dur`, `cat`,
`name`, `pid`, `tid`, `args`, `ph`) replaced by other JSON types, negative, huge or non-finite numbers,
numbers as strings. The property: `build_report` returns a summary that is strict JSON, renders, and
whose breakdowns add up (compute + communication + memory + idle = span, shares in [0, 1]), or raises
a UserError of one line naming the file; nothing else escapes.

Inventories: what `ansible-inventory --list` and `ansible-playbook --list-hosts --list-tags` print is
replaced by any text and any JSON, and the inventory files by any bytes and any YAML; the checks
accept or raise a one-line UserError. A few generated inventories go through the real ansible
commands (`launcher.validate`), which must agree: accepted means hosts that the playbook targets.

In process; examples are derandomized, so a run is repeatable (about 20 s on 2 cores).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from fleetbench.cli.views.trace import print_report
from fleetbench.deploy import inventory as inv
from fleetbench.deploy.launcher import Selection, deploy_dir, resolve_inventory, resolve_playbook, validate
from fleetbench.errors import UserError
from fleetbench.profile.trace.report import build_report
from testdata import OWN_DATA_DIR, get_test_data_dir, missing_reason

# The project's own gloo captures always; the published CUDA traces where the test data is there.
OWN_TRACES = (
    OWN_DATA_DIR / "fsdp2-cpu" / "rank-0.fsdp2.pt.trace.json.gz",
    OWN_DATA_DIR / "fsdp2-cpu" / "rank-1.fsdp2.pt.trace.json.gz",
)
CUDA_TRACES = (
    get_test_data_dir() / "torch-trace" / "a100_gemm_trace.json",
    get_test_data_dir() / "torch-trace" / "a100_alexnet_trace.json.gz",
)
TRACES = (*(CUDA_TRACES if missing_reason() is None else ()), *OWN_TRACES)
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ODD_NUMBERS = st.sampled_from([-1, -(10**12), 10**30, 10**400, 1e308, -1e308, math.nan, math.inf, -math.inf, 0.5])
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | ODD_NUMBERS
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["12", "-5", "1e400", "nan", "inf", "ProfilerStep#3", "kernel", "cpu_op", "X"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = ("ts", "dur", "cat", "name", "pid", "tid", "args", "ph")


@cache
def raw_json(index: int) -> bytes:
    """The trace's JSON text (decompressed)."""
    path = TRACES[index]
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


@cache
def events(index: int) -> dict[str, Any]:
    """The trace's JSON object; the large CPU traces cut to their first 400 events, for speed."""
    data: dict[str, Any] = json.loads(raw_json(index))
    return {**data, "traceEvents": data["traceEvents"][:400]}


def strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def summarise(path: Path, window: str = "steps") -> None:
    """The property on one file: a summary that holds together, or one UserError line naming the file."""
    try:
        report = build_report([path], window, 5, None, chart=False)
    except UserError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message, message
        return
    data = strict(report.to_json())
    for trace in data["traces"]:
        assert len(trace["top_kernels"]) <= 5 and len(trace["top_ops"]) <= 5
        for device in trace["devices"] + [d for step in trace["steps"] for d in step["devices"]]:
            parts = device["compute_s"] + device["communication_s"] + device["memory_s"] + device["idle_s"]
            assert math.isclose(parts, device["span_s"], rel_tol=1e-6, abs_tol=1e-9), device
            assert all(-1e-9 <= share <= 1 + 1e-9 for share in device["shares"].values()), device
    console = Console(file=io.StringIO(), width=160)
    print_report(console, report, "table")
    print_report(console, report, "md")


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


@FUZZ
@given(
    index=st.integers(0, len(TRACES) - 1),
    cut=st.floats(0, 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=4),
    compress=st.booleans(),
    damage_gzip=st.booleans(),
)
def test_cut_and_flipped_traces(
    index: int, cut: float, flips: list[tuple[float, int]], compress: bool, damage_gzip: bool
) -> None:
    data = bytearray(raw_json(index)[: int(len(raw_json(index)) * cut)] if cut < 0.999 else raw_json(index))
    if compress:
        data = bytearray(gzip.compress(bytes(data), mtime=0))
    target = data if (damage_gzip or not compress) else None
    if target is not None:
        for where, xor in flips:
            if target:
                target[min(int(where * len(target)), len(target) - 1)] ^= xor
    with tempfile.TemporaryDirectory() as folder:
        summarise(write(Path(folder), "rank-0.pt.trace.json.gz" if compress else "rank-0.json", bytes(data)))


@FUZZ
@given(
    index=st.integers(0, len(TRACES) - 1),
    changes=st.lists(
        st.tuples(st.integers(0, 399), st.sampled_from(FIELDS), JSON_VALUES | ODD_NUMBERS), min_size=1, max_size=12
    ),
    drop=st.lists(st.tuples(st.integers(0, 399), st.sampled_from(FIELDS)), max_size=4),
    window=st.sampled_from(["steps", "trace"]),
)
def test_events_with_wrong_types_and_numbers(
    index: int, changes: list[tuple[int, str, Any]], drop: list[tuple[int, str]], window: str
) -> None:
    data = json.loads(json.dumps(events(index)))
    items = data["traceEvents"]
    for position, key, value in changes:
        event = items[position % len(items)]
        if isinstance(event, dict):
            event[key] = value
    for position, key in drop:
        event = items[position % len(items)]
        if isinstance(event, dict):
            event.pop(key, None)
    text = json.dumps(data, allow_nan=True)  # NaN and Infinity as Python writes them: json.load reads them back
    with tempfile.TemporaryDirectory() as folder:
        summarise(write(Path(folder), "rank-0.json", text.encode()), window)


@FUZZ
@given(
    index=st.integers(0, len(TRACES) - 1),
    flips=st.lists(st.tuples(st.floats(0.05, 1), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_gzip_streams_damaged_inside(index: int, flips: list[tuple[float, int]]) -> None:
    """Bytes flipped inside the deflate data (past the header): zlib's own errors, CRC and length errors."""
    data = bytearray(gzip.compress(raw_json(index), mtime=0))
    for where, xor in flips:
        data[min(10 + int(where * (len(data) - 10)), len(data) - 1)] ^= xor
    with tempfile.TemporaryDirectory() as folder:
        summarise(write(Path(folder), "rank-1.pt.trace.json.gz", bytes(data)))


def _replace_events(data: dict[str, Any], value: Any) -> dict[str, Any]:
    return {**data, "traceEvents": value}


def _without_events(data: dict[str, Any], value: Any) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "traceEvents"}


def _as_top_level(data: dict[str, Any], value: Any) -> Any:
    return value


def _events_as_array(data: dict[str, Any], value: Any) -> Any:
    return data["traceEvents"]


def _odd_metadata(data: dict[str, Any], value: Any) -> dict[str, Any]:
    return {**data, "distributedInfo": value, "deviceProperties": value}


def _events_replaced(data: dict[str, Any], value: Any) -> dict[str, Any]:
    return {**data, "traceEvents": [value, *data["traceEvents"][:50], value]}


@FUZZ
@given(
    index=st.integers(0, len(TRACES) - 1),
    shape=st.sampled_from(
        [_replace_events, _without_events, _as_top_level, _events_as_array, _odd_metadata, _events_replaced]
    ),
    value=JSON_VALUES,
)
def test_traces_of_the_wrong_shape(index: int, shape: Any, value: Any) -> None:
    text = json.dumps(shape(events(index), value), allow_nan=True)
    with tempfile.TemporaryDirectory() as folder:
        summarise(write(Path(folder), "trace.json", text.encode()))


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"   \n",
        b"\xff\xfe\x00{",
        '{"traceEvents": [], "name": "caf\u00e9"}'.encode("latin-1"),
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00",  # a gzip header and nothing after it
        b"[" * 50_000,
        b'{"traceEvents": [' + b"[" * 50_000 + b"]" * 50_000 + b"]}",
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#' + b"9" * 6000 + b'", "ts": 1}]}',
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1' + b"0" * 500 + b', "dur": 5}]}',
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": NaN, "dur": Infinity}]}',
        b'{"traceEvents": [{"ph": "X", "cat": ["kernel"], "name": {}, "ts": 1, "dur": 2, "pid": [1], "tid": {}}]}',
    ],
    ids=[
        "empty",
        "blank",
        "binary",
        "latin-1",
        "bare-gzip-header",
        "deep-array",
        "deep-event",
        "huge-step-number",
        "huge-int-time",
        "non-finite-times",
        "unhashable-fields",
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_odd_trace_files(content: bytes, suffix: str, tmp_path: Path) -> None:
    data = content if suffix == ".json" or content.startswith(b"\x1f\x8b") else gzip.compress(content, mtime=0)
    summarise(write(tmp_path, f"rank-3{suffix}", data))


# Inventories: the parsing of what ansible prints, fed any text.
ANSIBLE_LINES = st.sampled_from(
    [
        "[WARNING]: Failed to parse inventory with 'yaml' plugin: YAML parsing failed: bad",
        "[WARNING]: Failed to parse inventory with 'auto' plugin: no root 'plugin' key found",
        "[WARNING]: Failed to parse inventory with 'ini' plugin: Expected key=value, got: <class 'x._AnsibleTaggedList'>",
        "[WARNING]:  * Failed to parse /x/hosts with ini plugin: Invalid section",
        "[WARNING]: Unable to parse /x/hosts.yml as an inventory source",
        "[WARNING]: Unable to parse /x as an inventory source",
        "[WARNING]: No inventory was parsed, only implicit localhost is available",
        "[WARNING]: Could not match supplied host pattern, ignoring: nosuch",
        "[ERROR]: Specified inventory, host pattern and/or --limit leaves us with no hosts to target.",
        "Origin: /x/hosts.yml:4:1",
        "\x1b[1;35m[WARNING]: Unable to parse /x/y.ini as an inventory source\x1b[0m",
        "  play #1 (all:!edge_metal): Node exporter\tTAGS: []",
        "    hosts (2):",
        "      TASK TAGS: [fleetbench_job, profiler_ncu]",
        "ERROR! the playbook could not be found",
    ]
)
TEXT = st.lists(ANSIBLE_LINES | st.text(max_size=60), max_size=12).map("\n".join)
LISTINGS = st.dictionaries(
    st.sampled_from(["_meta", "all", "ungrouped", "gpu_nodes", "monitoring"]) | st.text(max_size=6),
    JSON_VALUES
    | st.fixed_dictionaries(
        {"hosts": st.lists(st.text(max_size=6) | st.integers(), max_size=3)},
        optional={"hostvars": st.dictionaries(st.text(max_size=6), st.dictionaries(st.text(max_size=14), JSON_VALUES))},
    ),
    max_size=5,
)
PORTS = st.one_of(JSON_VALUES, ODD_NUMBERS, st.integers(-10, 70000), st.sampled_from(["22", "{{ port }}", " 22 ", "²"]))


def _one_line_user_error(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except UserError as exc:
        assert "\n" not in str(exc)
        return None


@FUZZ
@given(
    stdout=st.one_of(TEXT, LISTINGS.map(lambda d: json.dumps(d, allow_nan=True))),
    stderr=TEXT,
    rc=st.sampled_from([0, 0, 1, 4, -9]),
    limit=st.none() | st.text(max_size=12) | st.sampled_from(["nosuch", "node1,nosuch", "all:!x", " "]),
    tags=st.none() | st.text(max_size=10) | st.sampled_from(["fleetbench_job", "nosuch", ",", "all"]),
    skip=st.none() | st.text(max_size=10) | st.sampled_from(["fleetbench_job", "profiler_torch"]),
    port=PORTS,
)
def test_what_ansible_prints_is_accepted_or_one_line(
    stdout: str, stderr: str, rc: int, limit: str | None, tags: str | None, skip: str | None, port: Any
) -> None:
    root = Path("/x")
    done = subprocess.CompletedProcess(["ansible-inventory"], rc, stdout, stderr)
    found = _one_line_user_error(inv.parse_listing, "inv", root, done)
    if found is not None:
        _one_line_user_error(inv.check_inventory, found)
        with_port = inv.Inventory("inv", {"node1": {"ansible_port": port}}, {"all": []})
        _one_line_user_error(inv.check_inventory, with_port)
        plays = inv.parse_plays(stdout)
        assert all(play.hosts >= 0 for play in plays)
        _one_line_user_error(inv.check_flags, limit, tags, skip)
        _one_line_user_error(inv.check_targets, found, "site", plays, done, limit)
        _one_line_user_error(inv.check_tags, "site", plays, tags, skip, {"fleetbench_job"})


INVENTORY_TEXTS = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    JSON_VALUES.map(lambda v: yaml.safe_dump(v, allow_unicode=True).encode()),
    st.sampled_from([b"$ANSIBLE_VAULT;1.1;AES256\n6162\n", b"node1\n", b"[g\nh\n", b"- a\n", b"all:\n  hosts: {}\n"]),
)


@FUZZ
@given(content=INVENTORY_TEXTS, name=st.sampled_from(["hosts.yml", "inv.yaml", "hosts.ini", "hosts", "i.json"]))
def test_inventory_files_before_ansible_reads_them(content: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), name, content)
        _one_line_user_error(resolve_inventory, path)


# A few inventories through the real ansible commands: each costs a second or two.
HOST_NAMES = st.sampled_from(["node1", "node2", "gpu-a01", "mon-01"])
INVENTORIES = st.fixed_dictionaries(
    {
        "all": st.fixed_dictionaries(
            {},
            optional={
                "hosts": st.dictionaries(HOST_NAMES, st.fixed_dictionaries({}, optional={"ansible_port": PORTS})),
                "children": st.dictionaries(
                    st.sampled_from(["gpu_nodes", "monitoring", "edge_vulkan", "misc"]),
                    st.fixed_dictionaries({"hosts": st.dictionaries(HOST_NAMES, st.just({}), max_size=2)}),
                    max_size=2,
                ),
            },
        )
    }
) | st.sampled_from([[], "node1", {"all": None}, {"all": {"hosts": ["node1"]}}])


@settings(FUZZ, max_examples=6)
@given(data=INVENTORIES, playbook=st.sampled_from(["site", "train", "monitoring"]), limit=st.none() | HOST_NAMES)
def test_generated_inventories_through_ansible(data: Any, playbook: str, limit: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), "inv.yml", yaml.safe_dump(data).encode())
        book = resolve_playbook(playbook, deploy_dir())
        try:
            validate(book, resolve_inventory(path), str(path), None, Selection(limit=limit))
        except UserError as exc:
            assert "\n" not in str(exc) and (str(path) in str(exc) or "--limit" in str(exc)), str(exc)
            return
        hosts = data["all"].get("hosts") or {}
        assert hosts or any(group.get("hosts") for group in (data["all"].get("children") or {}).values())
