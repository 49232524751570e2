"""Named baselines: the records of one run, kept as a plain JSON file under the results root.

`results/baselines/NAME.json` holds the name, the run id, where the run was and when it was set,
and the run's result records (the figures and their samples; no traces, plots or checkpoints), so a
baseline survives the run folder's deletion, reads in any editor and can be committed beside the code.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.results.record import ResultRecord
from fleetbench.runinfo import utc_now

BASELINES_FOLDER = "baselines"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


@dataclass(frozen=True)
class Baseline:
    """A baseline as stored: its name, the run it was taken from, and that run's records."""

    name: str
    run_id: str
    source: str
    set_at: str
    records: list[ResultRecord]


def baselines_dir(results_root: Path) -> Path:
    """Where the baselines of a results root live."""
    return results_root / BASELINES_FOLDER


def check_name(name: str) -> str:
    """A baseline name becomes a file name: the same safe alphabet as run ids."""
    if not NAME_PATTERN.fullmatch(name):
        raise UserError(f"baseline name {name!r} is not accepted: use {NAME_RULE}")
    return name


def baseline_path(results_root: Path, name: str) -> Path:
    """The file of baseline `name`."""
    return baselines_dir(results_root) / f"{check_name(name)}.json"


def set_baseline(results_root: Path, name: str, run_id: str, source: Path, records: list[ResultRecord]) -> Path:
    """Write (or replace) baseline `name` atomically: a crash leaves the old file or the new, never half."""
    path = baseline_path(results_root, name)
    payload: dict[str, Any] = {
        "name": name,
        "run_id": run_id,
        "source": str(source),
        "set_at": utc_now().isoformat(),
        "records": [record.model_dump(mode="json") for record in records],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            jsonio.dump(payload, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"baseline {name}: cannot write {path} ({exc.strerror or exc})") from None
    return path


def read_baseline(results_root: Path, name: str) -> Baseline:
    """Baseline `name`, validated; a missing or damaged file is one line naming it."""
    path = baseline_path(results_root, name)
    if not path.is_file():
        known = ", ".join(list_baselines(results_root)) or "none yet"
        raise UserError(f"baseline {name!r} not found under {baselines_dir(results_root)}; baselines: {known}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        records = [ResultRecord.model_validate(r) for r in data["records"]]
        return Baseline(str(data["name"]), str(data["run_id"]), str(data["source"]), str(data["set_at"]), records)
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"{path}: not a baseline file ({first[:160]}); set it again with fleetbench baseline set"
        ) from None


def list_baselines(results_root: Path) -> list[str]:
    """The names of the baselines under a results root, sorted."""
    folder = baselines_dir(results_root)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def remove_baseline(results_root: Path, name: str) -> Path:
    """Delete baseline `name`; refuses a name that does not exist."""
    path = baseline_path(results_root, name)
    if not path.is_file():
        known = ", ".join(list_baselines(results_root)) or "none yet"
        raise UserError(f"baseline {name!r} not found; baselines: {known}")
    path.unlink()
    return path
