"""Diagnostics through the real CLI: the level comes from --log-level, else $FLEETBENCH_LOG_LEVEL; warnings say so.

`fleetbench report` against a Prometheus that is not up is the probe: it warns that it falls back to
the records, logs each dashboard at debug level, and prints the page's path as its answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import fleetbench_logger_kept
from fleetbench.cli.main import main
from fleetbench.logs import LOG_LEVEL_ENV
from fleetbench.results.record import MetricSample, ResultRecord
from fleetbench.results.store import append_record

DOWN = "http://127.0.0.1:9"  # the discard port: nothing answers HTTP there
WARNING = f"warning: Prometheus at {DOWN} is not up: rendering panels from the records"
DEBUG_PREFIX = "debug: fleetbench.report.build: "


@pytest.fixture(autouse=True)
def isolated_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() exports the level and installs a handler on the captured stderr: undo both afterwards."""
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    with fleetbench_logger_kept():
        yield


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    """A results root holding one run, `logs-1`, with one probe record."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    record = ResultRecord(
        run_id="logs-1",
        benchmark="probe",
        host="h",
        device="cpu-model",
        backend="cpu",
        status="ok",
        metrics=[MetricSample(name="fleetbench_run_success", value=1.0)],
        start=start,
        end=start + timedelta(seconds=1),
        duration_s=1.0,
        git_revision="unknown",
        packages={},
    )
    (tmp_path / "logs-1").mkdir()
    append_record(tmp_path / "logs-1", record)
    return tmp_path


def report(capsys: pytest.CaptureFixture[str], results_dir: Path, *global_flags: str) -> list[str]:
    """Run `fleetbench [FLAGS] report logs-1` in this process; return its stderr lines."""
    code = main([*global_flags, "report", "logs-1", "--results-dir", str(results_dir), "--prometheus", DOWN])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = err.splitlines()
    assert any(line.startswith("report: ") for line in lines), err  # the answer shows at every level
    return lines


def debug_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("debug:")]


def test_warnings_are_prefixed_and_debug_is_hidden_at_the_default_level(
    capsys: pytest.CaptureFixture[str], results_dir: Path
) -> None:
    lines = report(capsys, results_dir)
    assert WARNING in lines
    assert debug_lines(lines) == []


def test_log_level_flag_shows_debug_lines_and_is_exported_to_child_processes(
    capsys: pytest.CaptureFixture[str], results_dir: Path
) -> None:
    lines = report(capsys, results_dir, "--log-level", "debug")
    assert WARNING in lines
    assert any(line.startswith(DEBUG_PREFIX + "fleetbench-overview: ") for line in lines), lines
    assert os.environ[LOG_LEVEL_ENV] == "debug"


def test_log_level_flag_error_hides_warnings(capsys: pytest.CaptureFixture[str], results_dir: Path) -> None:
    lines = report(capsys, results_dir, "--log-level", "error")
    assert not [line for line in lines if line.startswith("warning:")], lines


@pytest.mark.parametrize(
    ("env_level", "flags", "warned", "debugged"),
    [
        ("debug", (), True, True),
        ("error", (), False, False),
        ("ERROR", (), False, False),  # the variable is read case-insensitively
        ("error", ("--log-level", "warning"), True, False),  # the flag wins over the environment
        ("loud", ("--log-level", "info"), True, False),  # ... and the variable is not read then
    ],
)
def test_log_level_from_the_environment(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    results_dir: Path,
    env_level: str,
    flags: tuple[str, ...],
    warned: bool,
    debugged: bool,
) -> None:
    monkeypatch.setenv(LOG_LEVEL_ENV, env_level)
    lines = report(capsys, results_dir, *flags)
    assert (WARNING in lines) == warned, lines
    assert bool(debug_lines(lines)) == debugged, lines


def test_an_invalid_level_in_the_environment_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, results_dir: Path
) -> None:
    monkeypatch.setenv(LOG_LEVEL_ENV, "loud")
    code = main(["report", "logs-1", "--results-dir", str(results_dir), "--prometheus", DOWN])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        "fleetbench: error: FLEETBENCH_LOG_LEVEL='loud' is not accepted; use one of debug, info, warning, error"
        " (or unset it)"
    ]
    assert not (results_dir / "logs-1" / "report").exists()


def test_an_invalid_level_is_refused_in_one_line(capsys: pytest.CaptureFixture[str], results_dir: Path) -> None:
    code = main(["--log-level", "loud", "report", "logs-1", "--results-dir", str(results_dir)])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("fleetbench: error: ") and "--log-level" in lines[0] and "'loud'" in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert not (results_dir / "logs-1" / "report").exists()
