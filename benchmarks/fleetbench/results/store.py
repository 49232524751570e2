"""Run folders under the results root, and the one writer and reader of result records."""

from __future__ import annotations

import contextlib
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
    """Append one line with a single write on an O_APPEND descriptor, so concurrent ranks never interleave.

    A write the disk or a file size limit cuts short is taken back (the file is truncated to where the
    line began, when nothing was appended after it), and the run fails with a UserError naming the folder
    and the reason: records.jsonl never keeps half a line from this writer.
    """
    path = run_dir / RECORDS_FILE
    line = (record.model_dump_json() + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise UserError(f"{run_dir}: cannot write the result record to {RECORDS_FILE} ({_reason(exc)})") from None
    try:
        for attempt in (1, 2):
            reason = _append_line(fd, line)
            if reason is None:
                return path
            if reason != _SHORT or attempt == 2:
                break
    finally:
        os.close(fd)
    raise UserError(
        f"{run_dir}: the result record could not be written to {RECORDS_FILE} ({reason}); "
        "the file holds what it held before: free space (or raise the file size limit) and run again"
    )


_SHORT = "a short write: disk full or file size limit"


def _reason(exc: OSError) -> str:
    """An OSError in words: 'No space left on device', 'File too large', ..."""
    return exc.strerror or str(exc)


def _append_line(fd: int, line: bytes) -> str | None:
    """Write `line` whole and fsync it: None; else take back what was written and say why it failed."""
    written = 0
    try:
        written = os.write(fd, line)
        if written == len(line):
            os.fsync(fd)
            return None
        reason = _SHORT
        written += os.write(fd, line[written:])  # the rest: fails, and says why (EFBIG, ENOSPC)
    except OSError as exc:
        reason = _reason(exc)
    _take_back(fd, written)
    return reason


def _take_back(fd: int, written: int) -> None:
    """Truncate the `written` bytes this descriptor just appended, if nothing was appended after them."""
    if not written:
        return
    with contextlib.suppress(OSError):
        end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just past our bytes
        if os.fstat(fd).st_size == end:
            os.ftruncate(fd, end - written)


def _parse_line(path: Path, number: int, raw: bytes) -> ResultRecord:
    """One line of records.jsonl as a record; UserError naming the file, the line and what is wrong."""
    from pydantic import ValidationError

    from fleetbench.results.record import ResultRecord

    try:
        return ResultRecord.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = " ".join(str(first["msg"]).split())[:200]
        if where and not isinstance(first.get("input"), dict | list) and first["type"] != "missing":
            got = repr(first.get("input"))
            message += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
        raise UserError(
            f"{path}:{number}: not a valid result record: {f'{where}: ' if where else ''}{message}"
        ) from None


def read_records(run_dir: Path) -> list[ResultRecord]:
    """Every record of a run folder, in the order written; a missing file or bad line is a UserError."""
    path = run_dir / RECORDS_FILE
    if not path.is_file():
        raise UserError(f"{run_dir}: no result records ({RECORDS_FILE} missing); is this a run folder?")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({_reason(exc)})") from None
    records = [_parse_line(path, number, raw) for number, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()]
    return records


def list_runs(results_root: Path) -> list[Path]:
    """Run folders, newest first (by modification time, then name); [] when the root is not a folder."""
    if not results_root.is_dir():
        return []
    runs = []
    for path in results_root.iterdir():
        with contextlib.suppress(OSError):  # a folder removed or unreadable while listing is no run
            if (path / RECORDS_FILE).is_file():
                runs.append((path.stat().st_mtime, path.name, path))
    return [path for _, _, path in sorted(runs, reverse=True)]


def check_results_root(results_root: Path) -> Path:
    """`results_root` when it is a folder; else a UserError naming it (missing, or a file)."""
    if results_root.is_symlink() and not results_root.exists():
        raise UserError(
            f"results folder {results_root} is a symbolic link that leads nowhere (a loop or a missing target); "
            "pass the folder that holds the runs"
        )
    if not results_root.exists():
        raise UserError(f"results folder {results_root} does not exist; run a benchmark first or pass --results-dir")
    if not results_root.is_dir():
        raise UserError(f"results folder {results_root} is not a folder; pass the folder that holds the runs")
    return results_root


def find_run(results_root: Path, run_id: str) -> Path:
    """The folder of run `run_id`; UserError (naming recent runs) when it holds no records."""
    validate_run_id(run_id)
    check_results_root(results_root)
    run_dir = results_root / run_id
    if not (run_dir / RECORDS_FILE).is_file():
        known = ", ".join(p.name for p in list_runs(results_root)[:5]) or "none yet"
        raise UserError(f"run {run_id!r} not found under {results_root}; recent runs: {known}")
    return run_dir
