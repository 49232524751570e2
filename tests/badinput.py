"""One check for every bad input the suite is tried with: one line, exit 2, no traceback, nothing written.

A case names the files to create in an empty folder, the CLI arguments (`{tmp}` is that folder), the
environment, and a fragment the one error line must contain. `check` runs the console entry point's
`main()` in this process, as a process would see it: the case's folder as working directory, only the
case's environment, HOME and the state folders inside a second temporary folder, and file descriptors
1 and 2 caught (so a child process's output counts too); then it asserts the property. A case whose
input could take the interpreter down with it (a runtime that aborts) runs in a subprocess
(`own_process`); tests/test_cli_safety_net.py runs the installed entry point itself. In-process, each
case costs what its command does rather than an interpreter and torch's import (about 10x less).
Every test module under tests/bad_input/ lists its cases in `CASES`; tests/bad_input/test_count.py
counts them.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from conftest import fleetbench_logger_kept


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
    own_process: bool = False  # run in a subprocess: the input could end the interpreter itself


def immutable(*names: str) -> Callable[[Path], None]:
    """A prepare step: the paths `names` (under the case's folder) get the immutable attribute (`chattr +i`),
    which refuses writes, renames and removals even to root, as a read-only file system would. The case is
    skipped, saying why, where chattr is missing or the file system has no such attribute; `check` takes
    the attribute off again so the folder can be removed."""

    def prepare(tmp: Path) -> None:
        import pytest

        if shutil.which("chattr") is None:
            pytest.skip("chattr is not installed: the immutable attribute cannot be set")
        for name in names:
            done = subprocess.run(["chattr", "+i", str(tmp / name)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i {name} failed here ({done.stderr.strip()[:120]})")

    prepare.__name__ = f"immutable({', '.join(names)})"
    prepare.undo = _mutable  # type: ignore[attr-defined]
    return prepare


def _mutable(tmp: Path) -> None:
    """Take the immutable attribute off everything under tmp (what `immutable` set)."""
    subprocess.run(["chattr", "-R", "-i", str(tmp)], capture_output=True, check=False)


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


def case_environment(case: BadInput, tmp: Path, home: Path) -> dict[str, str]:
    """The environment a case runs in: this one without the developer's FLEETBENCH_* settings (an
    unknown one adds a warning line), HOME and the state folders under `home`, then the case's own."""
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("FLEETBENCH_")},
        "FLEETBENCH_PUSHGATEWAY": "",
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    env.update({key: value.replace("{tmp}", str(tmp)) for key, value in case.env.items()})
    return env


def run(case: BadInput, tmp: Path, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the case's command in tmp as a user would: in this process, or in its own (`own_process`)."""
    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    env = case_environment(case, tmp, home)
    if case.own_process:
        return subprocess.run(
            [sys.executable, "-m", "fleetbench", *args],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    return run_in_process(args, tmp, env)


def run_in_process(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`main(args)` with `cwd` and exactly `env`, stdin empty, fds 1 and 2 caught; all put back after."""
    from fleetbench.cli.main import main

    with _process_state(cwd, env), _caught_output() as caught:
        try:
            code = main(args)
        except SystemExit as exc:  # argparse's own exit (--help, a usage error)
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
    return subprocess.CompletedProcess(args, code, caught["stdout"], caught["stderr"])


@contextlib.contextmanager
def _process_state(cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """What a process starts with and a command may change: the environment, the working directory,
    stdin, and the fleetbench logger main() sets up."""
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.StringIO("")
    try:
        with fleetbench_logger_kept():
            yield
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def _caught_output() -> Iterator[dict[str, str]]:
    """File descriptors 1 and 2 (and sys.stdout/stderr on them) into files; their text afterwards."""
    caught: dict[str, str] = {}
    saved_streams = sys.stdout, sys.stderr
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        for stream in saved_streams:
            stream.flush()
        saved_fds = os.dup(1), os.dup(2)
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        try:
            yield caught
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            for fd in saved_fds:
                os.close(fd)
            for name, file in (("stdout", out_file), ("stderr", err_file)):
                file.seek(0)
                caught[name] = file.read().decode("utf-8", errors="backslashreplace")


def check(case: BadInput, tmp: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Create the case's files, run it, and assert the property: exit `case.code`, exactly one stderr line
    `fleetbench: error: ...` containing `case.fragment`, no traceback, and nothing written under tmp
    (sizes and times unchanged, no new path) except the paths in `case.may_change`."""
    tmp.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    undo = getattr(case.prepare, "undo", None)
    try:
        _create(case, tmp)
        before = snapshot(tmp)
        result = run(case, tmp, home)
        after = snapshot(tmp)
    finally:
        if undo is not None:
            undo(tmp)
    said = result.stderr.strip().splitlines()
    context = f"{case.id}: rc {result.returncode}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
    assert result.returncode == case.code, context
    assert len(said) == 1, context
    assert said[0].startswith("fleetbench: error: "), context
    assert case.fragment in said[0], context
    assert "Traceback" not in result.stderr + result.stdout, context
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
