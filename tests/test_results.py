"""Result records: written once per rank, read back by the one reader, errors pinpointed."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import fleetbench_logger_kept
from fleetbench.cli.main import main
from fleetbench.errors import UserError
from fleetbench.logs import DEBUG_ENV, LOG_LEVEL_ENV
from fleetbench.results.record import MetricSample, ResultRecord
from fleetbench.results.store import append_record, find_run, list_runs, prepare_run_dir, read_records
from fleetbench.runinfo import new_run_id, validate_run_id


def make_record(run_id: str, rank: int = 0) -> ResultRecord:
    now = datetime.now(UTC)
    return ResultRecord(
        run_id=run_id,
        benchmark="probe",
        host="h",
        device="d",
        backend="cpu",
        rank=rank,
        status="ok",
        metrics=[MetricSample(name="fleetbench_step_seconds", value=0.5)],
        start=now,
        end=now,
        duration_s=0.0,
        git_revision="abc",
        packages={"python": "3.11"},
    )


def test_records_round_trip_one_line_per_rank(tmp_path: Path) -> None:
    run_dir = prepare_run_dir(tmp_path, "r-1")
    written = [make_record("r-1", rank) for rank in range(3)]
    for record in written:
        append_record(run_dir, record)
    assert read_records(run_dir) == written
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 3
    assert written[0].metric("fleetbench_step_seconds") == 0.5
    assert written[0].metric("fleetbench_missing_seconds") is None
    assert list_runs(tmp_path) == [run_dir]
    assert find_run(tmp_path, "r-1") == run_dir


def test_a_damaged_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    run_dir = prepare_run_dir(tmp_path, "r-2")
    append_record(run_dir, make_record("r-2"))
    line = json.loads((run_dir / "records.jsonl").read_text())
    del line["host"]
    with (run_dir / "records.jsonl").open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    with pytest.raises(UserError, match=r"records.jsonl:2: not a valid result record: host: Field required"):
        read_records(run_dir)


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../x", "-lead", "x" * 65, "sp ace", "tab\t"])
def test_run_ids_that_could_escape_or_break_labels_are_refused(bad: str) -> None:
    with pytest.raises(UserError, match="is not accepted"):
        validate_run_id(bad)


def test_generated_run_ids_are_valid_and_sort_by_time() -> None:
    first = new_run_id(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert first.startswith("20260102-030405-")
    assert validate_run_id(new_run_id()) and first < new_run_id()


# Appends `records.jsonl` a record with a large summary under a file size limit just past what the
# file holds: the write is cut short (Python ignores SIGXFSZ, so it fails with EFBIG instead).
APPEND_UNDER_A_LIMIT = """
import resource, sys
from pathlib import Path
from fleetbench.errors import UserError
from fleetbench.results.store import append_record, read_records
run_dir = Path(sys.argv[1])
record = read_records(run_dir)[0].model_copy(update={"summary": {"padding": "x" * 20000}})
size = (run_dir / "records.jsonl").stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, size + 100))
try:
    append_record(run_dir, record)
except UserError as exc:
    print(exc)
"""


def test_a_record_the_disk_cuts_short_is_taken_back(tmp_path: Path) -> None:
    run_dir = prepare_run_dir(tmp_path, "r-3")
    append_record(run_dir, make_record("r-3"))
    before = (run_dir / "records.jsonl").read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", APPEND_UNDER_A_LIMIT, str(run_dir)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == (
        f"{run_dir}: the result record could not be written to records.jsonl (File too large); the file holds "
        "what it held before: free space (or raise the file size limit) and run again"
    )
    assert (run_dir / "records.jsonl").read_bytes() == before
    assert len(read_records(run_dir)) == 1


def test_a_run_on_a_full_disk_fails_in_one_line_and_keeps_the_records(tmp_path: Path) -> None:
    """The whole command under a file size limit that the run's record line crosses."""
    run_dir = prepare_run_dir(tmp_path, "full")
    append_record(run_dir, make_record("full").model_copy(update={"summary": {"padding": "x" * 30000}}))
    before = (run_dir / "records.jsonl").read_bytes()
    limit = len(before) + 200  # the .prom files (a few KiB) fit; the new record line does not

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # the run exists: this process continues it, as a process a run starts does (run.continues)
    args = [
        "probe",
        "--run-id",
        "full",
        "--results-dir",
        str(tmp_path),
        "--device",
        "cpu",
        "--set",
        "run.continues=true",
    ]
    tiny = ["--set", "probe.matmul_sizes=[64]", "--set", "probe.copy_mib=[1]", "--set", "probe.min_run_time_s=0.01"]
    done = subprocess.run(
        [sys.executable, "-m", "fleetbench", *args, *tiny],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "FLEETBENCH_PUSHGATEWAY": "", "XDG_STATE_HOME": str(tmp_path / "state")},
        preexec_fn=limited,
        check=False,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("fleetbench: error: ")]
    assert done.returncode == 2, done.stderr
    assert errors == [
        f"fleetbench: error: {run_dir}: the result record could not be written to records.jsonl (File too large); "
        "the file holds what it held before: free space (or raise the file size limit) and run again"
    ], done.stderr
    assert "Traceback" not in done.stderr
    assert (run_dir / "records.jsonl").read_bytes() == before


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() in this process sets up logging and exports its level: undo both afterwards."""
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    with fleetbench_logger_kept():
        yield
    for name in (LOG_LEVEL_ENV, DEBUG_ENV):  # exported by main(); monkeypatch restores what was there before
        os.environ.pop(name, None)


def results_root(tmp_path: Path) -> Path:
    """A results folder with two good runs and one of each kind of unreadable records file."""
    for run_id in ("good-1", "good-2"):
        append_record(prepare_run_dir(tmp_path, run_id), make_record(run_id))
    damaged = {"cut": None, "empty": b"", "binary": b"\xff\xfe\x00\n"}
    for run_id, content in damaged.items():
        run_dir = prepare_run_dir(tmp_path, run_id)
        append_record(run_dir, make_record(run_id))
        path = run_dir / "records.jsonl"
        path.write_bytes(path.read_bytes()[:-40] + b"\n" if content is None else content)
    return tmp_path


@pytest.mark.usefixtures("cli")
def test_results_list_shows_the_readable_runs_and_warns_once_per_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = results_root(tmp_path)
    code = main(["--log-level", "warning", "results", "--results-dir", str(root), "list"])
    err = capsys.readouterr().err
    assert code == 0, err
    warnings = sorted(line for line in err.splitlines() if line.startswith("warning: "))
    assert len(warnings) == 3, err
    assert warnings[0] == (
        f"warning: run binary left out: {root}/binary/records.jsonl:1: not a valid result record: "
        "Invalid JSON: expected value at line 1 column 1"
    )
    assert warnings[1].startswith(
        f"warning: run cut left out: {root}/cut/records.jsonl:1: not a valid result record: Invalid JSON: EOF"
    )
    assert warnings[2] == f"warning: run empty left out: {root}/empty/records.jsonl holds no records"
    assert "good-1" in err and "good-2" in err


@pytest.mark.usefixtures("cli")
def test_records_with_markup_or_without_a_time_zone_are_shown_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = prepare_run_dir(tmp_path, "odd")
    record = make_record("odd").model_copy(update={"benchmark": "[/]probe", "summary": {"note": "[bold]x[/"}})
    append_record(run_dir, record)
    naive = json.loads(record.model_dump_json()) | {"start": "2026-01-01T00:00:00", "rank": 1}
    with (run_dir / "records.jsonl").open("a") as handle:
        handle.write(json.dumps(naive) + "\n")
    assert main(["results", "--results-dir", str(tmp_path), "list"]) == 0
    assert main(["results", "--results-dir", str(tmp_path), "show", "odd"]) == 0
    err = capsys.readouterr().err
    assert "[/]probe" in err and "[bold]x[/" in err and "2026-01-01T00:00:00+00:00" in err


def test_a_figure_that_was_no_number_reads_back_as_nan_and_text_or_booleans_are_refused(tmp_path: Path) -> None:
    import math

    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.errors import UserError
    from fleetbench.job import RunContext
    from fleetbench.telemetry.session import open_run

    config = FleetbenchConfig.model_validate({"run": {"results_dir": str(tmp_path), "run_id": "n"}})
    labels = {"probe": "matmul", "dtype": "float32", "size": "1"}
    with open_run(config, RunContext.start(config), "probe", config.probe, "d", "cpu") as run:
        run.metrics.set("fleetbench_probe_op_seconds", math.nan, **labels)  # a diverged figure
        run.add_headline("fleetbench_probe_achieved_flop_per_second", math.inf, [1.0, math.nan], **labels)
    path = tmp_path / "n" / "records.jsonl"
    assert '"value":null' in path.read_text()  # strict JSON on disk
    (record,) = read_records(tmp_path / "n")  # and the run still reads
    assert math.isnan(record.metric("fleetbench_probe_op_seconds", **labels) or 0.0)
    assert math.isnan(record.headline[0].value) and record.headline[0].samples[0] == 1.0
    text = path.read_text()
    for bad, shown in (('"3.5"', "'3.5'"), ("true", "True")):
        path.write_text(text.replace('"value":null', f'"value":{bad}', 1))
        with pytest.raises(
            UserError, match=rf"records.jsonl:1: .*value: Input should be a valid number \(got {shown}\)"
        ):
            read_records(tmp_path / "n")
