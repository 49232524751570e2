"""`fleetbench profile` of a script or module that fails: the user's own traceback, one line, nothing left behind.

The program runs under torch.profiler before the run folder exists; when it raises or exits non-zero,
its traceback (its frames only: none of fleetbench, runpy, the import system or torch.profiler) is
shown at the info level, then one `fleetbench: error:` line saying the capture did not happen, and
the exit status is 2 (or the status the program asked for). No run folder, no empty profile/ folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetbench.cli import main as cli_main
from fleetbench.config.schema import ProfileConfig
from fleetbench.errors import UserError
from fleetbench.profile import capture, workloads

SCRIPT = """\
import sys


def parse(text):
    return int(text)


def main():
    try:
        parse("seven")
    except ValueError as exc:
        raise RuntimeError(f"bad argument {sys.argv[1]!r}") from exc


main()
"""

INTERNAL = ("fleetbench/", "runpy", "importlib", "torch/profiler")


def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """`fleetbench profile ARGS` in this process, in `tmp_path`, with no Pushgateway."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEETBENCH_PUSHGATEWAY", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    return cli_main.main(["profile", "--results-dir", str(tmp_path / "results"), *args])


def test_a_script_that_raises_shows_its_own_frames_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.py").write_text(SCRIPT)
    code = profile(tmp_path, monkeypatch, "--script", "job.py", "--", "7x")
    _out, err = capfd.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1] == (
        "fleetbench: error: script job.py failed: RuntimeError: bad argument '7x' at job.py:12 in main; "
        "the profile capture did not happen and no run was recorded; accepted: a program that runs to its end"
    ), err
    traceback = "\n".join(lines[1:-1])
    # Both exceptions of the chain, each with the user's frames and nothing else.
    assert 'File "job.py", line 5, in parse' in traceback
    assert "ValueError: invalid literal for int() with base 10: 'seven'" in traceback
    assert "The above exception was the direct cause of the following exception:" in traceback
    assert 'File "job.py", line 15, in <module>' in traceback
    assert traceback.rstrip().endswith("RuntimeError: bad argument '7x'")
    frames = [line for line in traceback.splitlines() if line.lstrip().startswith('File "')]
    assert frames and not [f for f in frames if any(part in f for part in INTERNAL)], frames
    assert "USDT:" not in err and "profiler_start" not in err  # libkineto's chatter is left out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.py"]  # no results/, no profile/


def test_a_module_that_raises_shows_its_own_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / "failing_job.py").write_text("def run():\n    return {}['missing']\n\n\nrun()\n")
    code = profile(tmp_path, monkeypatch, "--module", "failing_job")
    _out, err = capfd.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("fleetbench: error: module failing_job failed: KeyError: 'missing' at "), err
    assert "failing_job.py:2 in run; the profile capture did not happen" in lines[-1]
    frames = [line for line in lines if line.lstrip().startswith('File "')]
    assert [f.split(", in ")[-1] for f in frames] == ["<module>", "run"], frames
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ("raise SystemExit('no input given')", 1, "exited with 'no input given' (status 1)"),
        ("import sys\nsys.exit(4)", 4, "exited with status 4"),
        ("raise SystemExit(300)", 2, "exited with status 300"),  # beyond what an exit status holds
    ],
    ids=["message", "status", "status-out-of-range"],
)
def test_system_exit_is_the_programs_status_and_leaves_nothing(
    body: str,
    status: int,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "job.py").write_text(body + "\n")
    code = profile(tmp_path, monkeypatch, "--run-id", "kept", "--script", "job.py")
    _out, err = capfd.readouterr()
    assert code == status, err
    assert said in err.strip().splitlines()[-1]
    assert "Traceback" not in err  # an exit is not an error of the code: no traceback
    assert not (tmp_path / "results").exists()


def test_a_failure_leaves_an_existing_run_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "results" / "shared"
    run_dir.mkdir(parents=True)
    (run_dir / "records.jsonl").write_text("{}\n")
    before = {p: p.stat().st_mtime_ns for p in [run_dir, *run_dir.rglob("*")]}
    (tmp_path / "job.py").write_text("raise OSError('disk on fire')\n")
    code = profile(tmp_path, monkeypatch, "--run-id", "shared", "--script", "job.py")
    capfd.readouterr()
    assert code == 2
    assert {p: p.stat().st_mtime_ns for p in [run_dir, *run_dir.rglob("*")]} == before


def test_exit_status_zero_or_none_is_success() -> None:
    for code in (None, 0, False):
        assert workloads._exit_failure("script s.py", SystemExit(code)) is None
    failure = workloads._exit_failure("script s.py", SystemExit(True))
    assert failure is not None and failure.exit_code == 1


def test_the_failure_is_a_user_error_for_every_caller(tmp_path: Path) -> None:
    """The ncu target catches UserError only: a failing program is one line there too."""
    script = tmp_path / "job.py"
    script.write_text("x = 1 / 0\n")
    workload = workloads.script_workload(ProfileConfig(script=script))
    assert workload.run_once is not None
    with pytest.raises(UserError) as caught:
        workload.run_once()
    assert isinstance(caught.value, workloads.UserCodeFailed)
    assert "ZeroDivisionError: division by zero" in str(caught.value)
    assert caught.value.traceback.startswith("Traceback (most recent call last):")
    assert f'File "{script}", line 1, in <module>' in caught.value.traceback
    assert "workloads.py" not in caught.value.traceback and "runpy" not in caught.value.traceback


def test_only_kinetos_start_and_stop_lines_are_left_out() -> None:
    chatter = [
        "USDT:2026-12-01 17:00:23 10197:10197 SyncActivityProfilerHandler.cpp:52] profiler_start",
        "STAGE:2026-12-01 17:02:08 11329:11329 SyncActivityProfilerHandler.cpp:51] Completed Stage: Warm Up",
    ]
    kept = ["USDT is a word a program may print", "WARNING: something the user should see"]
    assert all(capture._KINETO_CHATTER.match(line) for line in chatter)
    assert not any(capture._KINETO_CHATTER.match(line) for line in kept)


def test_the_programs_own_stderr_still_reaches_the_user(tmp_path: Path) -> None:
    """Only the profiler's transitions are filtered: what the program writes to stderr is shown as it runs."""
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('progress 50%', file=sys.stderr)\nraise SystemExit(5)\n")
    done = subprocess.run(
        [sys.executable, "-m", "fleetbench", "--log-level", "warning", "profile", "--script", str(script)],
        cwd=tmp_path,
        env={**os.environ, "FLEETBENCH_PUSHGATEWAY": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == ["progress 50%", lines[-1]] and lines[-1].startswith("fleetbench: error: script "), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.py"]
