"""Damaged spool entries through the reader: the entry comes back whole, or is rejected with a reason.

A real entry (a run's registry, spooled by `Spool.put`) is damaged the ways files get damaged: cut
off, bytes flipped, emptied, bytes that are not UTF-8, fields given the wrong JSON types or removed or
added, numbers and strings blown up, the exposition replaced by other text. The property:
`read_entry` returns a `SpoolEntry` whose fields have their types and whose exposition
prometheus_client reads, or raises `BadSpoolEntry` with a one-line reason; nothing else escapes.
In process; examples are derandomized, so a run is repeatable.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetbench.telemetry.recorder import MetricRecorder, RunIdentity
from fleetbench.telemetry.spool import ENTRY_FIELDS, BadSpoolEntry, Spool, SpoolEntry, parse_entry, read_entry

FUZZ = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
HUGE = (
    b"9" * 5000,
    b"1e999",
    b"-1e999",
    b"NaN",
    b"Infinity",
    b'"' + b"x" * 200_000 + b'"',
    b"[" * 3000 + b"]" * 3000,
    b'{"a": ' * 3000 + b"1" + b"}" * 3000,
)


@cache
def real_entry() -> bytes:
    """An entry file as a run with the gateway down writes it (through Spool.put), as bytes."""
    identity = RunIdentity("probe", "fuzz-1", "host-a", "cpu-model", "cpu", 0)
    recorder = MetricRecorder(identity)
    recorder.set("fleetbench_run_success", 1)
    recorder.inc("fleetbench_steps_total", 12)
    recorder.set("fleetbench_step_seconds", 0.25)
    entry = SpoolEntry(
        gateway="http://127.0.0.1:9091",
        job="fleetbench",
        grouping_key={"benchmark": "probe", "run_id": "fuzz-1", "instance": "host-a", "rank": "0"},
        exposition=recorder.exposition().decode(),
        spooled_at=1_700_000_000.5,
        reason="URLError: [Errno 111] Connection refused",
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Spool(Path(folder)).put(entry)
        assert path is not None
        return path.read_bytes()


def assert_read_or_rejected(data: bytes) -> None:
    """The property, on the bytes of one entry file."""
    try:
        entry = parse_entry(data)
    except BadSpoolEntry as exc:
        reason = str(exc)
        assert reason and "\n" not in reason and len(reason) <= 300, reason
        return
    assert isinstance(entry, SpoolEntry)
    assert all(isinstance(getattr(entry, name), str) for name in ("gateway", "job", "exposition", "reason"))
    assert entry.job
    assert isinstance(entry.spooled_at, float) and entry.spooled_at >= 0
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in entry.grouping_key.items())
    assert sum(len(family.samples) for family in text_string_to_metric_families(entry.exposition)) > 0


def test_the_real_entry_reads_back() -> None:
    entry = parse_entry(real_entry())
    assert entry.grouping_key["run_id"] == "fuzz-1"
    assert "fleetbench_steps_total" in entry.exposition


@FUZZ
@given(st.data())
def test_cut_off(data: st.DataObject) -> None:
    raw = real_entry()
    assert_read_or_rejected(raw[: data.draw(st.integers(0, len(raw) - 1))])


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(real_entry()) - 1), st.integers(0, 255)), min_size=1, max_size=20))
def test_bytes_flipped(flips: list[tuple[int, int]]) -> None:
    raw = bytearray(real_entry())
    for at, byte in flips:
        raw[at] = byte
    assert_read_or_rejected(bytes(raw))


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_and_not_utf8(noise: bytes) -> None:
    assert_read_or_rejected(noise)
    raw = real_entry()
    middle = len(raw) // 2
    assert_read_or_rejected(raw[:middle] + noise + b"\xff\xfe" + raw[middle:])


@FUZZ
@given(st.sampled_from(ENTRY_FIELDS), JSON_VALUES)
def test_a_field_of_the_wrong_json_type(name: str, value: Any) -> None:
    entry = json.loads(real_entry())
    entry[name] = value
    assert_read_or_rejected(json.dumps(entry).encode())


@FUZZ
@given(
    st.lists(st.sampled_from(ENTRY_FIELDS), unique=True), st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3)
)
def test_fields_missing_or_added(removed: list[str], added: dict[str, Any]) -> None:
    entry = json.loads(real_entry())
    for name in removed:
        del entry[name]
    assert_read_or_rejected(json.dumps({**entry, **added}).encode())


@FUZZ
@given(st.sampled_from(ENTRY_FIELDS), st.sampled_from(HUGE))
def test_huge_values(name: str, huge: bytes) -> None:
    entry = json.loads(real_entry())
    entry[name] = "PLACEHOLDER"
    assert_read_or_rejected(json.dumps(entry).encode().replace(b'"PLACEHOLDER"', huge))


@FUZZ
@given(
    st.dictionaries(st.text(max_size=12), st.one_of(st.text(max_size=12), JSON_VALUES), max_size=5),
    st.text(max_size=300),
)
def test_grouping_keys_and_expositions_of_any_text(key: dict[str, Any], exposition: str) -> None:
    entry = json.loads(real_entry())
    assert_read_or_rejected(json.dumps({**entry, "grouping_key": key}).encode())
    # Whole lines of the real exposition, shuffled into the random text: parseable or not, never a crash.
    lines = entry["exposition"].splitlines()
    at = len(exposition) % len(lines)
    mixed = "\n".join([*lines[:at], exposition, *lines[at:]])
    assert_read_or_rejected(json.dumps({**entry, "exposition": mixed}).encode())


@FUZZ
@given(st.data())
def test_exposition_damaged_inside_valid_json(data: st.DataObject) -> None:
    entry = json.loads(real_entry())
    text = entry["exposition"]
    how = data.draw(st.sampled_from(["cut", "flip", "drop_line", "number"]))
    if how == "cut":
        text = text[: data.draw(st.integers(0, len(text) - 1))]
    elif how == "flip":
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.characters(codec="utf-8")) + text[at + 1 :]
    elif how == "drop_line":
        lines = text.splitlines(keepends=True)
        del lines[data.draw(st.integers(0, len(lines) - 1))]
        text = "".join(lines)
    else:  # a sample value blown up, or not a number
        huge = data.draw(st.sampled_from(["1e999", "-1e999", "NaN", "+Inf", "9" * 400, "0x1p3", "1_0", "", "--1"]))
        lines = text.splitlines()
        samples = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
        i = data.draw(st.sampled_from(samples))
        lines[i] = lines[i].rsplit(" ", 1)[0] + " " + huge
        text = "\n".join(lines) + "\n"
    assert_read_or_rejected(json.dumps({**entry, "exposition": text}).encode())


def test_empty_and_odd_files(tmp_path: Path) -> None:
    for name, data in {"empty.json": b"", "blank.json": b" \n\t", "null.json": b"null", "list.json": b"[]"}.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(BadSpoolEntry):
            read_entry(tmp_path / name)
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(BadSpoolEntry, match="a folder"):
        read_entry(tmp_path / "folder.json")
    with pytest.raises(BadSpoolEntry, match="cannot be read"):
        read_entry(tmp_path / "gone.json")
