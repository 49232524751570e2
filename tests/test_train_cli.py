"""`fleetbench train` rejects bad input before any rank starts: one line, exit 2, no traceback, bounded time."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetbench.cli import main as cli_main
from fleetbench.train.parallel import MIN_CPU_RANKS, max_cpu_ranks, usable_cpu_cores


def fail_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], status_lines: int = 0) -> str:
    """Exit 2 with one error line (after `status_lines` progress lines), no traceback."""
    code = cli_main.main(["train", *argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, lines
    assert len(lines) == status_lines + 1, lines
    assert lines[-1].startswith("fleetbench: error: "), lines
    assert not any("Traceback" in line for line in lines)
    return lines[-1]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--preset", "huge"],
            "train.preset: Input should be 'tiny', 'small', 'seed', '1b', 'llama3-debug' or 'llama3-8b' (got 'huge')",
        ),
        (["--set", "train.batch_size=0"], "train.batch_size: Input should be greater than or equal to 1"),
        (["--set", "train.seq_len=1"], "train.seq_len: Input should be greater than or equal to 2"),
        (["--set", "train.seq_len=100000"], "train.batch_size=16 x train.seq_len=100000 cannot work here"),
        (["--preset", "1b", "--device", "cpu"], "cannot work here: one rank needs at least"),
        (["--set", "train.heads=5"], "train.heads=5 does not divide train.dim=128"),
        (["--set", "train.batch_size=two"], "train.batch_size: Input should be a valid integer"),
        (["--nnodes", "2"], "NNODES=2 needs RDZV_ENDPOINT=HOST:PORT"),
        (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "127.0.0.1:1"], "NODE_RANK=2 is not below NNODES=2"),
        (["--rdzv-endpoint", "no-port"], "train.rdzv_endpoint: Value error, expected HOST:PORT"),
        (["--nproc", "2", "--set", "train.fsdp=false"], "train.fsdp=false trains one unsharded process"),
        (
            ["--nproc", "1", "--set", "train.fsdp=false", "--set", "train.mixed_precision=true"],
            "train.mixed_precision=true needs train.fsdp=true",
        ),
        (["--nproc", "2", "--set", "train.hsdp=true", "--set", "train.hsdp_shard_size=3"], "hsdp_shard_size=3"),
        (["--set", "train.unknown=1"], "train.unknown: unknown key; accepted:"),
        (["--profile-steps", "3-5"], "--profile-steps: train.profile_steps: Value error, expected A:B, the first"),
        (["--profile-steps", "0:2"], "with 1 <= A <= B <= train.steps (e.g. 3:5) (got '0:2')"),
        (["--profile-steps", "5:3"], "with 1 <= A <= B <= train.steps (e.g. 3:5) (got '5:3')"),
        (
            ["--steps", "6", "--profile-steps", "5:7"],
            "train.profile_steps=5:7 goes past the run's last step, train.steps=6",
        ),
        (["--set", "train.profile_steps=3:5"], "quote it ('3:5') or write a list ([3, 5]) (got 185)"),
        (
            ["--device", "cpu", "--profile-steps", "1:2", "--set", "train.profile_memory_snapshot=true"],
            "train.profile_memory_snapshot=true needs CUDA",
        ),
        (["--set", "train.profile_memory_snapshot=true"], "needs train.profile_steps=A:B"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], expected: str
) -> None:
    err = fail_with_one_line(capsys, ["--results-dir", str(tmp_path), *argv])
    assert expected in err


def test_more_ranks_than_cores_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One rank per core, or up to MIN_CPU_RANKS (the smallest 2 x 2 HSDP mesh) sharing fewer cores."""
    too_many = max_cpu_ranks() + 1
    err = fail_with_one_line(capsys, ["--results-dir", str(tmp_path), "--device", "cpu", "--nproc", str(too_many)])
    assert f"NPROC={too_many} ranks per node but this machine has {usable_cpu_cores()} usable CPU core(s)" in err
    assert f"(one per rank, or up to {MIN_CPU_RANKS} sharing fewer cores); accepted: NPROC <= {too_many - 1}" in err


def test_resume_without_a_checkpoint(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = fail_with_one_line(capsys, ["--results-dir", str(tmp_path), "--resume"])
    assert "--resume: no run under" in err and "has a complete checkpoint" in err


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts TCP connections (kernel backlog) and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


@pytest.mark.parametrize("kind", ["silent", "closed"])
def test_rendezvous_that_never_answers_fails_in_bounded_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, silent_listener: int, kind: str
) -> None:
    port = silent_listener if kind == "silent" else closed_port()
    started = time.monotonic()
    err = fail_with_one_line(
        capsys,
        [
            "--results-dir",
            str(tmp_path),
            "--nproc",
            "1",
            "--nnodes",
            "2",
            "--node-rank",
            "1",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--set",
            "train.rdzv_timeout_s=3",
        ],
        status_lines=1,
    )
    assert time.monotonic() - started < 60
    assert f"rendezvous endpoint 127.0.0.1:{port} did not answer within 3 s" in err


def test_node_zero_waiting_for_a_missing_node_gives_up(tmp_path: Path) -> None:
    """Node 0 hosts the rendezvous; the second node never comes: torchrun's join timeout ends it."""
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetbench",
            "train",
            "--results-dir",
            str(tmp_path),
            "--nproc",
            "1",
            "--nnodes",
            "2",
            "--node-rank",
            "0",
            "--rdzv-endpoint",
            f"127.0.0.1:{closed_port()}",
            "--set",
            "train.rdzv_timeout_s=4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 90
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("fleetbench: error: rendezvous at 127.0.0.1:") and "failed within 4 s" in last
    assert "Traceback" not in done.stderr
