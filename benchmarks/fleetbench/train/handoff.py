"""What the ranks of one node leave for that node's launcher: the run id they agreed on, their errors.

A rank (train/loop.py) writes here; the launcher (train/launch.py) reads after torchrun returns, through
a folder it names in `TRAIN_ERROR_DIR_ENV` for its ranks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleetbench import jsonio
from fleetbench.envvars import TRAIN_ERROR_DIR_ENV as ERROR_DIR_ENV
from fleetbench.errors import UserError
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import RECORDS_FILE, read_records


def write_worker_error(exc: BaseException, exit_code: int) -> None:
    """Called in a rank: leave the one-line reason where the launcher looks for it."""
    folder = os.environ.get(ERROR_DIR_ENV)
    if not folder:
        return
    rank = os.environ.get("RANK", "0")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
    path = Path(folder) / f"attempt{int(attempt):04d}-rank{int(rank):06d}.json"
    path.write_text(
        jsonio.dumps(
            {
                "rank": int(rank),
                "attempt": int(attempt),
                "exit_code": exit_code,
                "user_error": isinstance(exc, UserError),
                "message": " ".join(message.split()),
            }
        )
    )


def failure_from_ranks(error_dir: Path, described: str) -> UserError:
    """A rank's one-line user error (exit 2) when one reported it, else how the ranks ended (exit 1)."""
    reports = [json.loads(p.read_text()) for p in sorted(error_dir.glob("attempt*-rank*.json"))]
    if reports:
        last_attempt = max(r["attempt"] for r in reports)
        reports = [r for r in reports if r["attempt"] == last_attempt]
    user = [r for r in reports if r["user_error"]]
    if user:
        return UserError(user[0]["message"], exit_code=2)
    first = f"; rank {reports[0]['rank']} reported: {reports[0]['message'][:300]}" if reports else ""
    return UserError(described + first, exit_code=1)


RUN_ID_FILE = "run-id"


def report_run_id(run_id: str) -> None:
    """Called in a rank: tell the launcher of this node which run id the ranks agreed on."""
    folder = os.environ.get(ERROR_DIR_ENV)
    if folder:
        Path(folder, RUN_ID_FILE).write_text(run_id, encoding="utf-8")


def agreed_run_id(error_dir: Path) -> str | None:
    """The run id this node's ranks reported, if any did."""
    path = error_dir / RUN_ID_FILE
    return path.read_text(encoding="utf-8").strip() or None if path.is_file() else None


def node_record(run_dir: Path) -> ResultRecord:
    """The latest successful record of the lowest rank that wrote here: rank 0's on its node."""
    if not (run_dir / RECORDS_FILE).is_file():
        raise UserError(f"training finished but no rank on this node wrote a record under {run_dir}")
    records = [r for r in read_records(run_dir) if r.benchmark == "train" and r.status == "ok"]
    if not records:
        raise UserError(f"training finished but no rank wrote a successful record under {run_dir}")
    lowest = min(r.rank for r in records)
    return [r for r in records if r.rank == lowest][-1]
