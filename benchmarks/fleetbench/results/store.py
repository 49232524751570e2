"""Run folders under the results root, and the one writer and reader of result records."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from fleetbench.errors import UserError
from fleetbench.fsutil import ensure_writable_dir
from fleetbench.runinfo import validate_run_id

if TYPE_CHECKING:  # the record model loads where records are read: the config only needs the folder names
    from fleetbench.results.record import ResultRecord

RECORDS_FILE = "records.jsonl"
# Where runs go when neither --results-dir nor run.results_dir says otherwise.
DEFAULT_RESULTS_DIR = Path("results")
SPOOL_FOLDER = ".spool"


def default_spool_dir(results_root: Path) -> Path:
    """Where pushes the Pushgateway did not take wait for `fleetbench metrics flush`."""
    return results_root / SPOOL_FOLDER


def prepare_run_dir(results_root: Path, run_id: str) -> Path:
    """Create results/<run_id>/ and prove it is writable before any work starts."""
    validate_run_id(run_id)
    return ensure_writable_dir(results_root / run_id, "results dir", "--results-dir")


def append_record(run_dir: Path, record: ResultRecord) -> Path:
    """Append one line with a single write on an O_APPEND descriptor, so concurrent ranks never interleave."""
    path = run_dir / RECORDS_FILE
    line = (record.model_dump_json() + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_records(run_dir: Path) -> list[ResultRecord]:
    """Every record of a run folder, in the order written; a missing file or bad line is a UserError."""
    from pydantic import ValidationError

    from fleetbench.results.record import ResultRecord

    path = run_dir / RECORDS_FILE
    if not path.is_file():
        raise UserError(f"{run_dir}: no result records ({RECORDS_FILE} missing); is this a run folder?")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(ResultRecord.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                raise UserError(f"{path}:{number}: not a valid result record: {where}: {first['msg']}") from None
    return records


def list_runs(results_root: Path) -> list[Path]:
    """Run folders, newest first (by name, which starts with a UTC timestamp for generated ids)."""
    if not results_root.is_dir():
        return []
    runs = [p for p in results_root.iterdir() if (p / RECORDS_FILE).is_file()]
    return sorted(runs, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def find_run(results_root: Path, run_id: str) -> Path:
    """The folder of run `run_id`; UserError (naming recent runs) when it holds no records."""
    validate_run_id(run_id)
    run_dir = results_root / run_id
    if not (run_dir / RECORDS_FILE).is_file():
        known = ", ".join(p.name for p in list_runs(results_root)[:5]) or "none yet"
        raise UserError(f"run {run_id!r} not found under {results_root}; recent runs: {known}")
    return run_dir
