"""Named baselines: the records of one run, kept as a plain JSON file under the results root.

`results/baselines/NAME.json` holds the name, the run id, where the run was and when it was set,
and the run's result records (the figures and their samples; no traces, plots or checkpoints), so a
baseline survives the run folder's deletion, reads in any editor and can be committed beside the code.
A baseline of several processes (`fleetbench noise --baseline NAME`) keeps each process's records
and says how many (`processes`); a baseline set on a machine with a noise calibration keeps that
calibration (`noise`), so the gate's minimum change travels with it. One damaged file is named in
one line where it is read, and never stops the others from being listed or used.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetbench import jsonio
from fleetbench.compare.noise import Calibration, parse
from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file, write_text_atomic
from fleetbench.results.record import ResultRecord
from fleetbench.runinfo import utc_now

BASELINES_FOLDER = "baselines"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_PROCESSES = 10_000  # `noise --rounds` keeps one per process: more is no baseline fleetbench wrote
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


@dataclass(frozen=True)
class Baseline:
    """A baseline as stored: its name, the run it was taken from, and that run's records."""

    name: str
    run_id: str
    source: str
    set_at: str
    records: list[ResultRecord]
    processes: int = 1
    noise: Calibration | None = None


def baselines_dir(results_root: Path) -> Path:
    """Where the baselines of a results root live."""
    return results_root / BASELINES_FOLDER


def check_name(name: str) -> str:
    """A baseline name becomes a file name: the same safe alphabet as run ids."""
    if not NAME_PATTERN.fullmatch(name):
        from fleetbench.names import shown

        raise UserError(f"baseline name {shown(name)} is not accepted: use {NAME_RULE}")
    return name


def baseline_path(results_root: Path, name: str) -> Path:
    """The file of baseline `name`."""
    return baselines_dir(results_root) / f"{check_name(name)}.json"


def set_baseline(results_root: Path, baseline: Baseline) -> Path:
    """Write (or replace) a baseline atomically: a crash leaves the old file or the new, never half."""
    path = baseline_path(results_root, baseline.name)
    payload: dict[str, Any] = {
        "name": baseline.name,
        "run_id": baseline.run_id,
        "source": baseline.source,
        "set_at": baseline.set_at or utc_now().isoformat(),
        "processes": baseline.processes,
        "noise": baseline.noise.to_json() if baseline.noise else None,
        "records": [record.model_dump(mode="json") for record in baseline.records],
    }
    text = jsonio.dumps(payload, indent=1) + "\n"
    parse_baseline(text, f"baseline {baseline.name} (not written)")  # nothing read_baseline would refuse
    return write_text_atomic(path, text, f"baseline {baseline.name}")


def read_baseline(results_root: Path, name: str) -> Baseline:
    """Baseline `name`, validated; a missing or damaged file is one line naming it."""
    path = baseline_path(results_root, name)
    if not path.exists() and not path.is_symlink():
        known = ", ".join(list_baselines(results_root)) or "none yet"
        raise UserError(f"baseline {name!r} not found under {baselines_dir(results_root)}; baselines: {known}")
    # the file is there: whatever is wrong with it is said as damage, never as "not found"
    readable_file(path, f"baseline {name!r}: its file", "set it again with fleetbench baseline set")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path}: not a baseline file: it is damaged ({_first_problem(exc)[:160]}); set it again with fleetbench baseline set"
        ) from None
    return parse_baseline(text, str(path))


def parse_baseline(text: str, where: str) -> Baseline:
    """A baseline from its file's text; a UserError naming `where` and the first problem when it is none.

    The one rule for a baseline: `set_baseline` applies it to the text it is about to write, and
    `read_baseline` to what it finds."""
    try:
        data = json.loads(text)
        records = [ResultRecord.model_validate(r) for r in data["records"]]
        noise = parse(data["noise"]) if data.get("noise") else None
        processes = data.get("processes", 1)
        baseline = Baseline(
            str(data["name"]), str(data["run_id"]), str(data["source"]), str(data["set_at"]), records, 1, noise
        )
    except RecursionError:
        raise UserError(
            f"{where}: not a baseline file: it is damaged (nested too deeply); set it again with fleetbench baseline set"
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, ValidationError) as exc:
        first = _first_problem(exc)
        raise UserError(
            f"{where}: not a baseline file: it is damaged ({first[:160]}); set it again with fleetbench baseline set"
        ) from None
    if type(processes) is not int or not 1 <= processes <= MAX_PROCESSES:
        raise UserError(
            f"{where}: not a baseline file: it is damaged (processes is {processes!r}; accepted: a whole number "
            f"in 1-{MAX_PROCESSES}); set it again with fleetbench baseline set"
        )
    return replace(baseline, processes=processes)


def _first_problem(exc: Exception) -> str:
    """The first line of what was wrong; for a record, the field, what it should be and the value."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        got = "" if isinstance(first.get("input"), dict | list) else f" (got {str(repr(first.get('input')))[:60]})"
        return f"records: {where}: {first['msg']}{got}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def list_baselines(results_root: Path) -> list[str]:
    """The names of the baselines under a results root, sorted."""
    folder = baselines_dir(results_root)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def scan_baselines(results_root: Path) -> list[tuple[str, Baseline | str]]:
    """Every baseline by name: the baseline, or the one line that says why its file is damaged."""
    found: list[tuple[str, Baseline | str]] = []
    for name in list_baselines(results_root):
        try:
            found.append((name, read_baseline(results_root, name)))
        except UserError as exc:
            found.append((name, str(exc)))
    return found


def remove_baseline(results_root: Path, name: str) -> Path:
    """Delete baseline `name`; refuses a name that does not exist."""
    path = baseline_path(results_root, name)
    if not path.exists() and not path.is_symlink():
        known = ", ".join(list_baselines(results_root)) or "none yet"
        raise UserError(f"baseline {name!r} not found; baselines: {known}")
    if path.is_dir():
        raise UserError(f"baseline {name!r}: {path} is a folder, not a baseline file; remove it yourself")
    try:
        path.unlink()
    except OSError as exc:  # an immutable file (chattr +i) or folder, a read-only file system
        raise UserError(
            f"baseline {name!r}: cannot remove {path} ({exc.strerror or exc}); "
            "make it and its folder writable (chattr -i, chmod u+w) and run again"
        ) from None
    return path
