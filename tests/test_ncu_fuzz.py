"""Damaged Nsight Compute inputs through `fleetbench ncu summarize`: a summary or one clean error, never a traceback.

Each reader's real inputs (tests/data/ncu-console, ncu-csv, ncu-rep) are damaged the ways files get
damaged: cut off, bytes flipped, lines deleted, bytes that are not UTF-8 spliced in, emptied, numbers
blown past the float range. The property: the command exits 0 with a result of the right shape, or
exits 2 with exactly one line on stderr, `fleetbench: error: report PATH ...`; nothing else reaches
stderr (no traceback, no native library messages on file descriptor 2). The CLI runs in process;
examples are derandomized, so a run is repeatable.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path

import pytest

from testdata import get_test_data_dir, listed

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.realdata

DATA = get_test_data_dir()
CONSOLE = listed("ncu-console", ".txt")
CSVS = listed("ncu-csv", ".csv")
QUICK_REPS = ("gh200_elementwise", "gtx1660s_naive_gemm", "rtx2080ti_kernelA_kernelC", "t4_matrix_addition2d")
REPS = [DATA / "ncu-rep" / f"{name}.ncu-rep" for name in QUICK_REPS]  # under 700 kB each: the quick ones
FORMATS = {"console", "csv-details", "csv-raw", "ncu-rep"}
NUMBER = re.compile(rb"\d[\d,]*(?:\.\d+)?")
HUGE = (b"9" * 400, b"1e999", b"-1e999", b"1" + b"0" * 4000, b"1e-999", b"18446744073709551617")
FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@cache
def content(path: Path) -> bytes:
    return path.read_bytes()


def cut(draw: st.DrawFn, data: bytes) -> bytes:
    return data[: len(data) - draw(st.integers(1, len(data)))]  # small cuts are drawn (and shrunk to) first


def flip(draw: st.DrawFn, data: bytes) -> bytes:
    changed = bytearray(data)
    for at, byte in draw(
        st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), min_size=1, max_size=30)
    ):
        changed[at] = byte
    return bytes(changed)


def delete_lines(draw: st.DrawFn, data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    gone = set(draw(st.lists(st.integers(0, len(lines) - 1), min_size=1, max_size=40)))
    return b"".join(line for index, line in enumerate(lines) if index not in gone)


def delete_span(draw: st.DrawFn, data: bytes) -> bytes:
    start = draw(st.integers(0, len(data) - 1))
    return data[:start] + data[start + draw(st.integers(1, 20_000)) :]


def not_utf8(draw: st.DrawFn, data: bytes) -> bytes:
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8).map(lambda b: bytes(x | 0x80 for x in b))) + data[at:]
    return data


def huge_number(draw: st.DrawFn, data: bytes) -> bytes:
    numbers = list(NUMBER.finditer(data))
    if not numbers:
        return data
    for match in draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=5, unique_by=lambda m: m.start())):
        data = data.replace(match[0], draw(st.sampled_from(HUGE)), 1)
    return data


TEXT_DAMAGE = (cut, flip, delete_lines, delete_span, not_utf8, huge_number)
BINARY_DAMAGE = (cut, flip, delete_span, not_utf8)


@st.composite
def damaged(draw: st.DrawFn, sources: list[Path], damage: tuple[Callable[[st.DrawFn, bytes], bytes], ...]) -> bytes:
    """One source file, emptied or damaged one to three times."""
    data = content(draw(st.sampled_from(sources)))
    if draw(st.integers(0, 19)) == 0:
        return b""
    for harm in draw(st.lists(st.sampled_from(damage), min_size=1, max_size=3)):
        if data:
            data = harm(draw, data)
    return data


@contextmanager
def native_stderr() -> Iterator[list[str]]:
    """What anything writes to file descriptor 2 meanwhile (the end of the block fills the list)."""
    written: list[str] = []
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield written
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            written.append(sink.read().decode("utf-8", errors="replace"))


@pytest.fixture(scope="module")
def summarize(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[bytes, str, bool], None]]:
    """Writes the bytes to a file, runs `fleetbench ncu summarize FILE [--json]` in process and checks the property."""
    from fleetbench.cli import main as cli_main

    folder = tmp_path_factory.mktemp("fuzz")

    def run(data: bytes, suffix: str, as_json: bool) -> None:
        path = folder / f"damaged{suffix}"
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with native_stderr() as native, redirect_stdout(out), redirect_stderr(err):
            code = cli_main.main(["ncu", "summarize", str(path), *(["--json"] if as_json else [])])
        assert native == [""], native  # ncu_report's C++ messages are held back, not printed
        check(path, code, out.getvalue(), err.getvalue(), as_json)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("FLEETBENCH_PUSHGATEWAY", "")
        yield run


def check(path: Path, code: int, out: str, err: str, as_json: bool) -> None:
    """Exit 0 with a summary of the right shape, or exit 2 with one stderr line naming the file."""
    assert "Traceback" not in err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"fleetbench: error: report {path} "), lines[0]
        assert out == ""
        return
    assert code == 0, (code, err)
    if not as_json:
        assert "Nsight Compute:" in out and "class" in out
        return
    data = json.loads(out)
    assert data["format"] in FORMATS and data["path"] == str(path) and data["kernels"]
    for kernel in data["kernels"]:
        assert isinstance(kernel["name"], str) and isinstance(kernel["cls"], str) and kernel["cls"]
        assert kernel["duration_s"] is None or kernel["duration_s"] >= 0
    assert {group["label"] for group in data["groups"]} == {kernel["label"] for kernel in data["kernels"]}
    assert data["overview"]["launches"] == len(data["kernels"])
    assert all(isinstance(note, str) for note in data["notes"])


@FUZZ
@given(data=damaged(CONSOLE, TEXT_DAMAGE), as_json=st.booleans())
def test_damaged_console_logs(summarize: Callable[[bytes, str, bool], None], data: bytes, as_json: bool) -> None:
    summarize(data, ".txt", as_json)


@FUZZ
@given(data=damaged(CSVS, TEXT_DAMAGE), as_json=st.booleans())
def test_damaged_csv_exports(summarize: Callable[[bytes, str, bool], None], data: bytes, as_json: bool) -> None:
    summarize(data, ".csv", as_json)


@FUZZ
@given(data=damaged(REPS, BINARY_DAMAGE), as_json=st.booleans())
def test_damaged_ncu_reps(summarize: Callable[[bytes, str, bool], None], data: bytes, as_json: bool) -> None:
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    summarize(data, ".ncu-rep", as_json)


def test_a_report_cut_in_the_middle_keeps_its_whole_launches(tmp_path: Path) -> None:
    """The launch a cut leaves without a name is left out with a warning; the ones before it are kept."""
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    from fleetbench.profile.ncu.readers import read_report

    source = content(DATA / "ncu-rep" / "a10_inference_105_kernels.ncu-rep")
    path = tmp_path / "half.ncu-rep"
    path.write_bytes(source[: len(source) // 2])
    report = read_report(path)
    assert 0 < len(report.kernels) < 105 and all(k.name for k in report.kernels)
    assert any("is damaged (cut off?)" in note and "has no kernel name" in note for note in report.notes)


def test_a_cut_off_csv_row_and_a_text_for_a_number_are_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.cli import main as cli_main
    from fleetbench.profile.ncu.readers import read_report

    source = content(DATA / "ncu-csv" / "rtx5070_details_saxpy.csv").decode("utf-8-sig").replace("\r\n", "\n")
    changed = source.replace('"ns","292,928"', '"ns","fast"')
    assert changed != source
    path = tmp_path / "cut.csv"
    path.write_text(changed.rstrip("\n")[:-7], encoding="utf-8")  # the last row loses its closing cells
    report = read_report(path)
    warnings = [note for note in report.notes if note.startswith("warning:")]
    assert len(warnings) == 2
    assert "last row is cut off" in warnings[0]
    assert "gpu__time_duration.sum" in warnings[1] and "'fast'" in warnings[1]
    assert "gpu__time_duration.sum" not in report.kernels[0].metrics
    monkeypatch.setenv("FLEETBENCH_PUSHGATEWAY", "")
    assert cli_main.main(["ncu", "summarize", str(path)]) == 0
    shown = capsys.readouterr().err.splitlines()  # the notes go to the log, under the tables
    assert warnings[0] in shown and warnings[1] in shown
