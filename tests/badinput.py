"""One check for every bad input the suite is tried with: one line, exit 2, no traceback, nothing written.

A case names the files to create in an empty folder, the CLI arguments (`{tmp}` is that folder), the
environment, and a fragment the one error line must contain. `check` runs the real console entry
point in a subprocess (as a user would) with HOME and the state folders inside a second temporary
folder, then asserts the property. Every test module under tests/bad_input/ lists its cases in
`CASES`; tests/bad_input/test_count.py counts them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class BadInput:
    """A bad input and what the one line must say about it."""

    id: str
    args: tuple[str, ...]
    fragment: str
    files: dict[str, str | bytes] = field(default_factory=dict)  # name -> content ("/" makes folders)
    env: dict[str, str] = field(default_factory=dict)  # {tmp} is replaced here too
    code: int = 2
    prepare: Callable[[Path], None] | None = None  # extra setup (permissions, a socket held open, ...)
    # paths (relative to the folder) that existed before and may change: e.g. a spool the command consumes
    may_change: tuple[str, ...] = ()


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and mtime: what 'nothing written' compares."""
    out: dict[str, tuple[int, int]] = {}
    for path in sorted(root.rglob("*")):
        try:
            stat = path.lstat()
        except OSError:
            continue
        out[str(path.relative_to(root))] = (stat.st_size if path.is_file() else -1, stat.st_mtime_ns)
    return out


def _create(case: BadInput, tmp: Path) -> None:
    for name, content in case.files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if case.prepare is not None:
        case.prepare(tmp)


def run(case: BadInput, tmp: Path, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `python -m fleetbench ARGS` in tmp as a user would, HOME and state folders under `home`."""
    # the developer's own FLEETBENCH_* settings must not leak into the case (an unknown one adds a warning line)
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("FLEETBENCH_")},
        "FLEETBENCH_PUSHGATEWAY": "",
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    env.update({key: value.replace("{tmp}", str(tmp)) for key, value in case.env.items()})
    return subprocess.run(
        [sys.executable, "-m", "fleetbench", *(a.replace("{tmp}", str(tmp)) for a in case.args)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(case: BadInput, tmp: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Create the case's files, run it, and assert the property: exit `case.code`, exactly one stderr line
    `fleetbench: error: ...` containing `case.fragment`, no traceback, and nothing written under tmp
    (sizes and times unchanged, no new path) except the paths in `case.may_change`."""
    tmp.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    _create(case, tmp)
    before = snapshot(tmp)
    result = run(case, tmp, home)
    said = result.stderr.strip().splitlines()
    context = f"{case.id}: rc {result.returncode}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
    assert result.returncode == case.code, context
    assert len(said) == 1, context
    assert said[0].startswith("fleetbench: error: "), context
    assert case.fragment in said[0], context
    assert "Traceback" not in result.stderr + result.stdout, context
    after = snapshot(tmp)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    allowed = {k for k in changed if any(k == p or k.startswith(p.rstrip("/") + "/") for p in case.may_change)}
    assert changed == allowed, f"{case.id}: the command wrote {sorted(changed - allowed)}"
    return result


def record_line(run_id: str) -> str:
    """One valid line of a run's records.jsonl: the smallest run folder the commands accept."""
    from fleetbench.results.record import ResultRecord

    start = datetime(2026, 1, 1, tzinfo=UTC)
    record = ResultRecord(
        run_id=run_id,
        benchmark="probe",
        host="h",
        device="cpu",
        backend="cpu",
        status="ok",
        start=start,
        end=start,
        duration_s=1.0,
        git_revision="unknown",
        packages={},
    )
    return record.model_dump_json() + "\n"
