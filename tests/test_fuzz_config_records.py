"""Damaged config files, `--set` values and result records through their readers: a correct result, or
one UserError line naming the file (or the override) and what is wrong; never another exception.

Config files start from the examples of docs/configuration.md (every section, YAML and TOML); records
from real record lines. They are damaged the ways files get damaged: cut off, bytes flipped, bytes
that are not UTF-8 spliced in, lines deleted, doubled or indented with a tab, values replaced by
values of the wrong type, numbers blown past every range, emptied. The readers run in process
(`load_config`, `read_records`); examples are derandomized, so a run is repeatable.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO
from fleetbench.config.loader import load_config
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError
from fleetbench.results.record import HeadlineFigure, MetricSample, ResultRecord
from fleetbench.results.store import RECORDS_FILE, read_records

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DOC_EXAMPLES: list[tuple[str, str]] = re.findall(
    r"^```(yaml|toml)\n(.*?)^```$",
    (REPO / "docs" / "configuration.md").read_text(encoding="utf-8"),
    re.MULTILINE | re.DOTALL,
)
NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
HUGE = (b"9" * 400, b"1" + b"0" * 5000, b"1.0e999", b"-1.0e999", b"1e-999", b"18446744073709551617", b".nan", b"nan")
WRONG = (b"true", b"false", b"null", b"[1, 2]", b"{a: 1}", b'"text"', b"1.5", b"-1", b"0", b"''", b"~", b"[]")
NOT_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80\x80", b"\xfe\xff")
MAX_LINE = 1500  # one line: a message that quotes a huge value quotes it cut short


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    """A folder for the damaged files (hypothesis runs many examples in one test call)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-config-") as path:
        yield Path(path)


def cut(draw: st.DrawFn, data: bytes) -> bytes:
    return data[: len(data) - draw(st.integers(1, max(1, len(data))))]


def flip(draw: st.DrawFn, data: bytes) -> bytes:
    changed = bytearray(data)
    for at, byte in draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), max_size=8)):
        changed[at] = byte
    return bytes(changed)


def splice(draw: st.DrawFn, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.sampled_from((*NOT_UTF8, b"\x00", b"\t", b"\r", "\ufeff".encode()))) + data[at:]


def lines(draw: st.DrawFn, data: bytes) -> bytes:
    rows = data.split(b"\n")
    at = draw(st.integers(0, len(rows) - 1))
    how = draw(st.sampled_from(["delete", "double", "tab", "swap"]))
    if how == "delete":
        del rows[at]
    elif how == "double":
        rows.insert(at, rows[at])
    elif how == "tab":
        rows[at] = b"\t" + rows[at].lstrip(b" ")
    else:
        rows[at], rows[-1] = rows[-1], rows[at]
    return b"\n".join(rows)


def numbers(draw: st.DrawFn, data: bytes, replacements: tuple[bytes, ...]) -> bytes:
    found = list(NUMBER.finditer(data))
    if not found:
        return data
    match = draw(st.sampled_from(found))
    return data[: match.start()] + draw(st.sampled_from(replacements)) + data[match.end() :]


def values(draw: st.DrawFn, data: bytes) -> bytes:
    """A value after a `key:` or `key =` replaced by one of the wrong type."""
    found = list(re.finditer(rb"(?m)(?<=[:=] )[^\n#]+$", data))
    if not found:
        return data
    match = draw(st.sampled_from(found))
    return data[: match.start()] + draw(st.sampled_from(WRONG + HUGE)) + data[match.end() :]


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> bytes:
    """`original` with one to three kinds of damage, or emptied."""
    if draw(st.integers(0, 30)) == 0:
        return draw(st.sampled_from([b"", b"\n", b"\xef\xbb\xbf", b"\x00" * 16]))
    data = original
    kinds = draw(
        st.lists(st.sampled_from(["cut", "flip", "splice", "lines", "numbers", "values"]), min_size=1, max_size=3)
    )
    for kind in kinds:
        if not data:
            break
        if kind == "cut":
            data = cut(draw, data)
        elif kind == "flip":
            data = flip(draw, data)
        elif kind == "splice":
            data = splice(draw, data)
        elif kind == "lines":
            data = lines(draw, data)
        elif kind == "numbers":
            data = numbers(draw, data, HUGE + WRONG)
        else:
            data = values(draw, data)
    return data


def assert_one_clear_line(exc: UserError, starts: tuple[str, ...]) -> None:
    message = str(exc)
    assert "\n" not in message and len(message) < MAX_LINE, message
    assert message.startswith(starts), message
    assert exc.exit_code == 2


@st.composite
def config_files(draw: st.DrawFn) -> tuple[str, bytes]:
    kind, body = draw(st.sampled_from(DOC_EXAMPLES))
    return kind, draw(damaged(body.encode()))


@FUZZ
@given(config_files())
def test_a_damaged_config_file_loads_or_is_one_line_naming_the_file(folder: Path, case: tuple[str, bytes]) -> None:
    kind, data = case
    path = folder / f"config.{kind}"
    path.write_bytes(data)
    try:
        config = load_config(path)
    except UserError as exc:
        assert_one_clear_line(exc, (f"{path}: ",))
        return
    assert isinstance(config, FleetbenchConfig)
    assert FleetbenchConfig.model_validate(config.model_dump()) == config  # what loaded is a valid config


def dotted_keys(model: type, prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        annotation = field.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            keys.extend(dotted_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append(f"{prefix}{name}")
    return keys


KEYS = dotted_keys(FleetbenchConfig)
SCALARS = st.one_of(
    st.integers(0, 64).map(str),  # values a key may well take
    st.sampled_from(["true", "false", "null", "auto", "cpu", "float32", "[256, 512]", "0.5", "http://127.0.0.1:9"]),
    st.sampled_from([v.decode() for v in WRONG + HUGE if len(v) < 500]),
    st.integers(-(2**80), 2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=20),
    st.lists(st.integers(-(2**70), 2**70), max_size=5).map(lambda items: f"[{', '.join(map(str, items))}]"),
    st.sampled_from(["[", "{", "]", "'", '"', "*a", "&a x", "!!python/none", "a: b", "- x", "{a: 1, a: 2}"]),
)


@st.composite
def overrides(draw: st.DrawFn) -> str:
    key = draw(
        st.one_of(
            st.sampled_from(KEYS), st.sampled_from(KEYS), st.text(max_size=12), st.sampled_from(["", ".", "a.b.c"])
        )
    )
    separator = draw(st.sampled_from(["=", "=", "=", "=", "", "=="]))
    return f"{key}{separator}{draw(SCALARS)}"


@FUZZ
@given(st.lists(overrides(), min_size=1, max_size=3))
def test_set_values_load_or_are_one_line_naming_the_override(texts: list[str]) -> None:
    try:
        config = load_config(None, texts)
    except UserError as exc:
        assert_one_clear_line(exc, ("override ", "--set "))
        return
    assert isinstance(config, FleetbenchConfig)


@cache
def record_lines() -> bytes:
    """Three real record lines: minimal, with metrics and headline figures, and a failed run's."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    base = {
        "run_id": "fuzz-1",
        "benchmark": "probe",
        "host": "h",
        "device": "cpu",
        "backend": "cpu",
        "start": start,
        "end": start,
        "duration_s": 1.5,
        "git_revision": "abc",
        "packages": {"python": "3.11"},
    }
    records = [
        ResultRecord(**base, status="ok"),
        ResultRecord(
            **base,
            status="ok",
            rank=1,
            metrics=[MetricSample(name="fleetbench_step_seconds", labels={"step": "3"}, value=0.25)],
            headline=[HeadlineFigure(metric="fleetbench_step_seconds", value=0.25, samples=[0.2, 0.3])],
            summary={"steps": 10, "nested": {"a": [1, 2.5, None, "x"]}},
            artifacts=["trace.json"],
        ),
        ResultRecord(**base, status="failed", error="out of memory"),
    ]
    return b"".join(record.model_dump_json().encode() + b"\n" for record in records)


@st.composite
def records_files(draw: st.DrawFn) -> bytes:
    data = draw(damaged(record_lines()))
    if draw(st.booleans()):  # a value of the wrong type in valid JSON
        rows = data.split(b"\n")
        try:
            row = json.loads(rows[0])
        except ValueError:
            return data
        if isinstance(row, dict) and row:
            field = draw(st.sampled_from(sorted(row)))
            row[field] = draw(
                st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.just([]), st.just({}))
            )
            rows[0] = json.dumps(row).encode()
        data = b"\n".join(rows)
    return data


@FUZZ
@given(records_files())
def test_damaged_records_read_or_are_one_line_naming_the_file_and_line(folder: Path, data: bytes) -> None:
    run_dir = folder / "run"
    run_dir.mkdir(exist_ok=True)
    path = run_dir / RECORDS_FILE
    path.write_bytes(data)
    try:
        records = read_records(run_dir)
    except UserError as exc:
        assert_one_clear_line(exc, (f"{path}:",))
        assert re.match(rf"{re.escape(str(path))}:\d+: not a valid result record: ", str(exc)), str(exc)
        return
    assert all(isinstance(record, ResultRecord) for record in records)
    assert len(records) <= sum(1 for row in data.split(b"\n") if row.strip())
