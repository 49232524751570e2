"""Result records: written once per rank, read back by the one reader, errors pinpointed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetbench.errors import UserError
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
