"""The exit-status table of docs/exit-status.md and the code that has to match it: partial results (3),
interrupts (130, SIGTERM included, leaving no temporary file and a complete record), files a command did
not write (kept without --force)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from badinput import record_line, run_in_process
from conftest import REPO

DOC = REPO / "docs" / "exit-status.md"
FLOPS = "fleetbench_probe_achieved_flop_per_second"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETBENCH_")}
    env.update(FLEETBENCH_PUSHGATEWAY="", HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "home" / "state"))
    return env


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_in_process(list(args), tmp_path, _env(tmp_path))


def _figures(run_id: str, **figures: float) -> str:
    """A probe record whose headline holds one figure per label value given."""
    body = json.loads(record_line(run_id))
    body["headline"] = [
        {"metric": FLOPS, "labels": {"probe": "matmul", "size": size}, "value": value, "samples": [value] * 3}
        for size, value in figures.items()
    ]
    return json.dumps(body) + "\n"


def test_the_table_lists_every_status_the_code_uses() -> None:
    from fleetbench.cli import compare_cmd, main, report_cmd

    rows = {int(code) for code in re.findall(r"^\| (\d+) \|", DOC.read_text(encoding="utf-8"), re.MULTILINE)}
    used = {0, 1, 2, main.CRASH_EXIT, main.INTERRUPTED_EXIT, compare_cmd.PARTIAL_EXIT, report_cmd.PARTIAL_EXIT}
    assert rows == used == {0, 1, 2, 3, 70, 130}


def test_a_listing_with_a_damaged_baseline_exits_3_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "results" / "baselines").mkdir(parents=True)
    (tmp_path / "results" / "baselines" / "cut.json").write_text('{"name": "cut", "rec')
    done = _run(tmp_path, "baseline", "--results-dir", "results", "list")
    assert done.returncode == 3, done.stderr
    assert "cut.json: not a baseline file" in done.stderr and "cut" in done.stdout


def test_a_listing_of_sound_baselines_exits_0(tmp_path: Path) -> None:
    (tmp_path / "results" / "a").mkdir(parents=True)
    (tmp_path / "results" / "a" / "records.jsonl").write_text(_figures("a", **{"64": 1e9}))
    assert _run(tmp_path, "baseline", "--results-dir", "results", "set", "main", "a").returncode == 0
    done = _run(tmp_path, "baseline", "--results-dir", "results", "list")
    assert done.returncode == 0, done.stderr


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    """Run a with sizes 64 and 128, run b with 64 only: the 128 figure is left out of a comparison."""
    for run_id, figures in (("a", {"64": 1e9, "128": 2e9}), ("b", {"64": 1e9})):
        (tmp_path / "results" / run_id).mkdir(parents=True)
        (tmp_path / "results" / run_id / "records.jsonl").write_text(_figures(run_id, **figures))
    return tmp_path


def test_report_strict_exits_3_when_the_comparison_left_a_figure_out(two_runs: Path) -> None:
    pytest.importorskip("scipy")
    args = ("report", "b", "--results-dir", "results", "--offline", "--compare", "a")
    loose = _run(two_runs, *args)
    assert loose.returncode == 0, loose.stderr
    assert (
        "left out: probe fleetbench_probe_achieved_flop_per_second {'probe': 'matmul', 'size': '128'}: only in base"
        in loose.stdout + loose.stderr
    )
    strict = _run(two_runs, *args, "--strict")
    assert strict.returncode == 3, strict.stderr


def test_report_strict_exits_0_when_nothing_is_left_out(two_runs: Path) -> None:
    pytest.importorskip("scipy")
    done = _run(two_runs, "report", "b", "--results-dir", "results", "--offline", "--compare", "b", "--strict")
    assert done.returncode == 0, done.stderr + done.stdout


def test_a_command_replaces_its_own_plot_but_not_a_users_file(tmp_path: Path) -> None:
    from fleetbench.errors import UserError
    from fleetbench.fsutil import refuse_foreign_file
    from fleetbench.report.history_plot import PNG_MARK

    mine, theirs = tmp_path / "h.png", tmp_path / "notes.csv"
    import matplotlib.pyplot as plt

    fig = plt.figure()
    fig.savefig(mine, format="png", metadata={"Software": PNG_MARK.decode()})
    plt.close(fig)
    theirs.write_text("a,b\n")
    refuse_foreign_file(mine, "--png", False, PNG_MARK)  # its own plot: replaced without a word
    refuse_foreign_file(tmp_path / "new.png", "--png", False, PNG_MARK)  # a new file
    refuse_foreign_file(theirs, "--png", True, PNG_MARK)  # --force
    with pytest.raises(UserError, match=r"notes\.csv: the file exists and was not written by this command"):
        refuse_foreign_file(theirs, "--png", False, PNG_MARK)


def test_sigterm_mid_run_leaves_a_complete_record_no_temp_file_and_exit_130(tmp_path: Path) -> None:
    """A probe run stopped by SIGTERM while it measures: exit 130 and one line, its record a complete
    failed one that says so, no temporary file anywhere (the run's folder, the temp folder), no process
    left that carries this run's mark."""
    results, scratch = tmp_path / "results", tmp_path / "tmp"
    scratch.mkdir()
    mark = f"fleetbench-sigterm-{os.getpid()}-{time.monotonic_ns()}"
    env = {**_env(tmp_path), "TMPDIR": str(scratch), "SIGTERM_TEST_MARK": mark}  # children inherit the mark
    process = subprocess.Popen(
        [sys.executable, "-m", "fleetbench", "probe", "--results-dir", str(results), "--run-id", "s",
         "--set", "probe.matmul_sizes=[256]", "--set", "probe.min_run_time_s=30", "--set", "probe.copy_mib=[]"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (results / "s").is_dir() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process.poll() is None, process.communicate()
        time.sleep(1.0)  # inside the measurement
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "fleetbench: interrupted (SIGTERM)"
    assert "Traceback" not in err + out
    left = [p for p in [*results.rglob("*"), *scratch.rglob("*")] if ".tmp" in p.name or ".write-test" in p.name]
    assert not left, left
    assert not list(scratch.iterdir()), list(scratch.iterdir())
    lines = (results / "s" / "records.jsonl").read_bytes().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["status"] == "failed" and "SIGTERM" in record["error"]
    assert not (marked := marked_processes(mark)), f"processes left behind: {marked}"


def test_an_export_that_the_reader_would_refuse_is_never_written(tmp_path: Path) -> None:
    """What `edge export` stores passes the check `edge run --pte` applies later: a buffer without the
    program identifier (a planted wrong export) is refused and leaves no file, no temporary file."""
    from fleetbench.edge.pte import write_program
    from fleetbench.errors import UserError

    target = tmp_path / "m.pte"
    with pytest.raises(UserError, match="is one `edge run --pte` would refuse, so it was not written"):
        write_program(target, b"\x1c\x00\x00\x00XX12" + bytes(64))
    assert list(tmp_path.iterdir()) == []
    write_program(target, (28).to_bytes(4, "little") + b"ET12" + bytes(64))  # what the reader accepts is kept
    assert target.read_bytes()[4:8] == b"ET12" and len(list(tmp_path.iterdir())) == 1


def marked_processes(mark: str) -> list[str]:
    """The processes whose environment carries `mark` (children inherit it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark.encode() in (proc / "environ").read_bytes():
                    found.append(proc.name)
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_sigterm_to_a_torchrun_launch_stops_every_rank_and_is_an_interrupt(tmp_path: Path) -> None:
    """`train --nproc 2` stopped by SIGTERM while its ranks step: torchrun's agent stops them and raises its
    own SignalException, which is the interrupt (exit 130, one line), not a crash; each rank's record is
    a complete failed one that says SIGTERM, and no rank is left running."""
    results = tmp_path / "results"
    mark = f"fleetbench-sigterm-ranks-{os.getpid()}-{time.monotonic_ns()}"
    env = {**_env(tmp_path), "SIGTERM_TEST_MARK": mark}
    process = subprocess.Popen(
        [sys.executable, "-m", "fleetbench", "train", "--device", "cpu", "--nproc", "2", "--steps", "100000",
         "--results-dir", str(results), "--run-id", "t", "--set", "train.plot=false", "--set", "train.threads=1"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        steps = results / "t" / "train_steps.jsonl"
        deadline = time.monotonic() + 240
        while not (steps.is_file() and steps.stat().st_size) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == "fleetbench: interrupted (SIGTERM)"
    assert "Traceback" not in err + out and "a bug" not in err
    records = [json.loads(line) for line in (results / "t" / "records.jsonl").read_text().splitlines()]
    assert sorted(r["rank"] for r in records) == [0, 1]
    assert all(r["status"] == "failed" and "SIGTERM" in r["error"] for r in records)
    assert not marked_processes(mark), "ranks left behind"
