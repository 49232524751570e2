"""A complete --print-summary log is not called cut; a cut report says so in its table header and exits
with its own status under --strict; ncu's ==PROF== progress lines stay off stderr unless --verbose.

The --print-summary layout is written here from what ncu prints (no capture is in the test data,
see test_ncu_classes.py), with the closing "Note:" paragraph ncu ends every per-kernel summary with.
The cut files are the test data's own exports and reports cut short at test time (in tmp_path).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fleetbench.cli.profile_cmd import EXIT_CUT
from fleetbench.profile.ncu.readers import read_report
from fleetbench.profile.ncu.summary import summarize_report
from testdata import get_test_data_dir, missing_reason

ENTRY = """\
  {name}(const float *, float *, int) (32, 32, 1)x(32, 32, 1), Device 0, CC 8.9, Invocations 14
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------ ------------ ------------
    Metric Name             Metric Unit      Minimum      Maximum      Average
    ----------------------- ----------- ------------ ------------ ------------
    Duration                         us       100.10       104.30       102.90
    Memory Throughput                 %        84.10        86.00        85.20
    DRAM Throughput                   %        84.10        86.00        85.20
    Compute (SM) Throughput           %        12.00        13.00        12.50
    ----------------------- ----------- ------------ ------------ ------------

"""
NOTE = """\
  Note: The shown averages are calculated as the arithmetic mean of the metric values after the evaluation of the
  metrics for each individual kernel launch.
  If aggregating across varying launch configurations (like shared memory, cache config settings), the arithmetic
  mean can be misleading and looking at the individual results is recommended.
"""
PER_KERNEL = (
    '==PROF== Connected to process 85848 (/bench)\n==PROF== Profiling "transposeNaive" - 0: 0%....50%....100%\n'
    "==PROF== Disconnected from process 85848\n[85848] bench@127.0.0.1\n"
    + ENTRY.format(name="transposeNaive")
    + ENTRY.format(name="transposeCoalesced")
    + NOTE
)


def test_a_complete_per_kernel_summary_reads_its_note_as_a_note(tmp_path: Path) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(PER_KERNEL, encoding="utf-8")
    report = read_report(path)
    assert [k.invocations for k in report.kernels] == [14, 14]
    assert report.cut is None and not [n for n in report.notes if "is cut" in n]
    assert any(n.startswith("note: ncu: The shown averages") for n in report.notes)
    assert all(k.metrics for k in report.kernels)  # the note's lines are no table rows


def test_a_summary_cut_inside_a_table_is_still_cut(tmp_path: Path) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(PER_KERNEL.split("    Compute (SM)")[0], encoding="utf-8")  # inside the first table
    report = read_report(path)
    assert report.cut is not None and report.cut_label == "cut: 14 kernels read, the rest lost"


@pytest.fixture
def cut_csv(tmp_path: Path) -> Path:
    """The L4 details export cut in the middle of its rows (the last one cut short)."""
    if (reason := missing_reason()) is not None:
        pytest.skip(reason)
    text = (get_test_data_dir() / "ncu-csv" / "l4_details_full_torch_fp16_matmul.csv").read_text(encoding="utf-8")
    path = tmp_path / "cut.csv"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    return path


@pytest.mark.realdata
def test_a_cut_csv_says_how_many_kernels_were_read_in_the_table_header(
    cut_csv: Path, fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    report = read_report(cut_csv)
    summary = summarize_report(report)
    assert report.cut is not None and summary.cut == f"cut: {report.cut.read} kernels read, the rest lost"
    assert fleetbench("ncu", "summarize", str(cut_csv)) == 0  # without --strict: the summary, status 0
    out = capsys.readouterr()
    title = " ".join(out.out.split("┏", 1)[0].split())  # the table's title, however it wraps
    assert title.endswith(f"; {summary.cut})")
    assert "cut off" in out.err
    assert fleetbench("ncu", "summarize", str(cut_csv), "--strict") == EXIT_CUT == 3
    assert fleetbench("ncu", "summarize", str(cut_csv), "--strict", "--json") == EXIT_CUT


@pytest.mark.realdata
def test_a_rep_with_nameless_launches_counts_them(tmp_path: Path) -> None:
    """A .ncu-rep cut short: ncu_report reads the launches before the cut; those it cannot name are counted."""
    if (reason := missing_reason()) is not None:
        pytest.skip(reason)
    pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    source = get_test_data_dir() / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"
    whole = read_report(source)
    assert whole.cut is None and len(whole.kernels) == 105
    data = source.read_bytes()
    path = tmp_path / "cut.ncu-rep"
    for fraction in (0.5, 0.7, 0.9):
        path.write_bytes(data[: int(len(data) * fraction)])
        try:
            report = read_report(path)
        except Exception:  # a cut that leaves nothing readable is refused (tested elsewhere)
            continue
        assert report.cut is not None and report.cut.read == len(report.kernels) < 105
        break
    else:
        pytest.skip("no cut of this report left a readable prefix")


def test_a_complete_file_exits_0_under_strict(
    tmp_path: Path, fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(PER_KERNEL, encoding="utf-8")
    assert fleetbench("ncu", "summarize", str(path), "--strict") == 0
    out = capsys.readouterr()
    assert "cut:" not in out.out and "is cut" not in out.err


def test_prof_lines_stay_off_stderr_unless_verbose(
    tmp_path: Path, fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(
        PER_KERNEL.replace(
            "==PROF== Disconnected", "==WARNING== Found outstanding GPU clock reset\n==PROF== Disconnected"
        ),
        encoding="utf-8",
    )
    assert fleetbench("ncu", "summarize", str(path)) == 0
    err = capsys.readouterr().err
    assert "==PROF==" not in err and "==WARNING== Found outstanding GPU clock reset" in err
    assert fleetbench("ncu", "summarize", str(path), "--verbose") == 0
    assert "==PROF== Profiling" in capsys.readouterr().err


def test_strict_is_documented_with_its_status(
    capsys: pytest.CaptureFixture[str], fleetbench: Callable[..., int]
) -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "profile.md").read_text(encoding="utf-8")
    assert "--strict" in docs and f"status **{EXIT_CUT}**" in docs
    with pytest.raises(SystemExit):
        fleetbench("ncu", "summarize", "--help")
    assert f"exit {EXIT_CUT} when the report is cut short" in capsys.readouterr().out
