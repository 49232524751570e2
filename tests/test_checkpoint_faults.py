"""Checkpoint faults lose nothing: a save that fails for lack of space, a damaged checkpoint.

A save writes `step_N.partial/` and becomes `step_N/` only once complete; a save that fails (here a
file-size limit, RLIMIT_FSIZE, as a full disk would) is one line naming the cause and the newest
complete checkpoint, its partial folder is removed, and `--resume` continues from that checkpoint.
Resume checks the checkpoint it picks (metadata readable, every shard there and long enough) and
refuses a damaged one in one line.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint import state_dict_saver
from torch.distributed.checkpoint.api import CheckpointException

from fleetbench.errors import UserError
from fleetbench.results.store import read_records
from fleetbench.train.checkpoint import check_checkpoint, complete_checkpoints, save_failure_reason

# The smallest run the trainer takes: one rank, one block, short sequences; a checkpoint is ~3 MB.
TRAIN = (
    "train",
    "--device",
    "cpu",
    "--nproc",
    "1",
    "--run-id",
    "r1",
    "--set",
    "train.layers=1",
    "--set",
    "train.seq_len=32",
    "--set",
    "train.batch_size=2",
    "--set",
    "train.plot=false",
    "--set",
    "train.peak_flops=1e12",  # no peak measurement
)
FILE_LIMIT = 1 << 20  # 1 MiB: records and history fit, a checkpoint shard does not


def _limit_file_size() -> None:
    """In the child: writes beyond FILE_LIMIT fail with EFBIG (SIGXFSZ ignored, or it would kill the process)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def train(cwd: Path, *args: str, limited: bool = False) -> subprocess.CompletedProcess[str]:
    """`fleetbench train` in a fresh process in `cwd` (with the file-size limit when `limited`)."""
    return subprocess.run(
        [sys.executable, "-m", "fleetbench", *TRAIN, *args],
        cwd=cwd,
        env={**os.environ, "FLEETBENCH_PUSHGATEWAY": ""},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size if limited else None,
    )


@pytest.mark.slow  # three real runs: 17-22 s on 2 cores
def test_a_save_that_runs_out_of_space_keeps_the_previous_checkpoint_and_resume_continues(tmp_path: Path) -> None:
    checkpoints = tmp_path / "results" / "r1" / "checkpoints"
    first = train(tmp_path, "--steps", "2", "--set", "train.checkpoint_every=2")
    assert first.returncode == 0, first.stderr
    assert [p.name for _, p in complete_checkpoints(checkpoints)] == ["step_00000002"]

    failed = train(tmp_path, "--steps", "4", "--resume", "--set", "train.checkpoint_every=1", limited=True)
    assert failed.returncode == 2, failed.stderr
    assert "Traceback" not in failed.stderr + failed.stdout
    line = failed.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f"fleetbench: error: checkpoint after step 3 could not be written to results/r1/checkpoints "
        f"({os.strerror(errno.EFBIG)}); nothing of it was kept and step_00000002 (after step 2) is still the "
        "newest complete checkpoint"
    ), line
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step_00000002"]  # no step_00000003.partial

    resumed = train(tmp_path, "--steps", "4", "--resume", "--set", "train.checkpoint_every=1")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {Path('results/r1/checkpoints/step_00000002')} at step 2" in resumed.stderr
    assert [p.name for _, p in complete_checkpoints(checkpoints)] == ["step_00000003", "step_00000004"]
    records = read_records(tmp_path / "results" / "r1")
    assert [r.status for r in records] == ["ok", "failed", "ok"]
    assert records[-1].summary["resumed_from_step"] == 2
    assert records[-1].summary["final_step"] == 4


def _save(folder: Path, size: int = 4096) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        state_dict_saver.save({"model": {"w": torch.arange(size, dtype=torch.float32)}}, checkpoint_id=str(folder))


def test_an_intact_checkpoint_passes(tmp_path: Path) -> None:
    _save(tmp_path / "step_00000002")
    check_checkpoint(tmp_path / "step_00000002")


def test_a_shard_cut_short_is_refused_and_the_older_checkpoint_named(tmp_path: Path) -> None:
    _save(tmp_path / "step_00000001")
    _save(tmp_path / "step_00000002")
    shard = next((tmp_path / "step_00000002").glob("*.distcp"))
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(UserError) as caught:
        check_checkpoint(tmp_path / "step_00000002")
    said = str(caught.value)
    assert f"is damaged: shard {shard.name} has 100 bytes, its metadata needs {size}" in said
    assert said.endswith("move it aside to resume from step_00000001, or run without --resume")


def test_a_missing_shard_or_unreadable_metadata_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "step_00000003"
    _save(folder)
    shard = next(folder.glob("*.distcp"))
    shard.unlink()
    with pytest.raises(UserError, match=rf"shard {shard.name} is missing; move it aside, or run without --resume$"):
        check_checkpoint(folder)
    (folder / ".metadata").write_bytes(b"\x80\x04garbage")
    with pytest.raises(UserError, match=r"is damaged: its \.metadata does not read \("):
        check_checkpoint(folder)


def test_the_reason_of_a_failed_save_is_the_os_error_behind_it() -> None:
    def wrapped(exc: BaseException) -> tuple[BaseException, traceback.StackSummary]:
        return exc, traceback.StackSummary()

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert save_failure_reason(full) == os.strerror(errno.ENOSPC)
    try:  # torch's zip writer reports a failed write as a RuntimeError raised while handling the OSError
        try:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598") from None
    except RuntimeError as exc:
        zip_error = exc
    zip_error.__suppress_context__ = False
    assert save_failure_reason(CheckpointException("save", {0: wrapped(zip_error)})) == os.strerror(errno.EFBIG)
    assert save_failure_reason(CheckpointException("save", {1: wrapped(ValueError("odd"))})).startswith(
        "CheckpointException ranks:"
    )
