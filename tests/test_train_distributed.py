"""The trainer as users run it: `python -m fleetbench train` (= `fleetbench train`) launching torchrun
with real gloo ranks on 127.0.0.1. Parity with an unsharded process, resume, kill -9 recovery, OOM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import psutil
import pytest
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from fleetbench.results.store import read_records
from fleetbench.runinfo import host_name
from fleetbench.train.checkpoint import complete_checkpoints
from fleetbench.train.decoder import Decoder, init_weights
from fleetbench.train.energy import OTHER_CPU_RANK
from fleetbench.train.history import read_history
from fleetbench.train.plan import ModelShape

# A small model keeps every launch to a few seconds on two cores; all ranks run 1 thread.
MODEL = (
    "dim=64",
    "layers=2",
    "heads=4",
    "ffn_dim=256",
    "seq_len=64",
    "lr=1e-3",
    "warmup_steps=2",
    "log_every=1",
    "threads=1",
    "peak_flops=1e11",
)
PER_RANK_BATCH = 4


def train(
    results: Path, run_id: str, *sets: str, nproc: int = 2, flags: tuple[str, ...] = (), timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "fleetbench",
        "train",
        "--results-dir",
        str(results),
        "--run-id",
        run_id,
        "--nproc",
        str(nproc),
        *flags,
        *(f"--set=train.{item}" for item in sets),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def losses(run_dir: Path) -> list[float]:
    return [row.loss for row in read_history(run_dir)]


def load_checkpoint(folder: Path, scratch: Path) -> dict[str, Any]:
    target = scratch / f"{folder.parent.parent.name}-{folder.name}.pt"
    dcp_to_torch_save(folder, target)
    state: dict[str, Any] = torch.load(target, weights_only=False)
    return state


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def assert_states_equal(a: Any, b: Any, where: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_states_equal(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_states_equal(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


class PushCapture(BaseHTTPRequestHandler):
    """Stands in for a Pushgateway: accepts every push and keeps (path, body)."""

    pushes: ClassVar[list[tuple[str, str]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.pushes.append((self.path, body))
        self.send_response(200)
        self.end_headers()

    do_POST = do_PUT

    def log_message(self, format: str, *args: Any) -> None:
        return


def grouping(path: str) -> dict[str, str]:
    parts = path.removeprefix("/metrics/").split("/")
    return dict(zip(parts[::2], parts[1::2], strict=True))


@pytest.fixture(scope="module")
def pushgateway() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), PushCapture)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


# --- parity: FSDP2 on 2 ranks == one unsharded process on the same global batch ---------------------------
@pytest.fixture(scope="module")
def parity_runs(tmp_path_factory: pytest.TempPathFactory, pushgateway: str) -> Path:
    results = tmp_path_factory.mktemp("parity")
    common = (*MODEL, "steps=5", "checkpoint_final=true")
    ok(train(results, "single", *common, f"batch_size={2 * PER_RANK_BATCH}", "fsdp=false", "threads=2", nproc=1))
    ok(
        train(
            results,
            "fsdp2",
            *common,
            f"batch_size={PER_RANK_BATCH}",
            "peak_flops=null",
            "plot=true",
            flags=("--pushgateway", pushgateway),
        )
    )
    ok(
        train(
            results,
            "variants",
            *common,
            f"batch_size={PER_RANK_BATCH}",
            "hsdp=true",
            "hsdp_shard_size=1",
            "reshard_after_forward=false",
            "activation_checkpointing=true",
            "meta_init=false",
            "compile=true",
        )
    )
    return results


@pytest.mark.slow
@pytest.mark.parametrize("run", ["fsdp2", "variants"])
def test_sharded_losses_and_weights_equal_unsharded(parity_runs: Path, tmp_path: Path, run: str) -> None:
    single, sharded = losses(parity_runs / "single"), losses(parity_runs / run)
    assert len(single) == len(sharded) == 5
    assert sharded == pytest.approx(single, rel=1e-5, abs=1e-6)
    assert single[-1] < single[0]
    final = "checkpoints/step_00000005"
    single_w = load_checkpoint(parity_runs / "single" / final, tmp_path)["model"]
    sharded_w = load_checkpoint(parity_runs / run / final, tmp_path)["model"]
    assert max_difference(single_w, sharded_w) < 2e-5
    # The weights moved far more than that tolerance (lr 1e-3 for 5 steps): the match is not trivial.
    initial = Decoder(ModelShape(dim=64, layers=2, heads=4, ffn_dim=256, vocab_size=256))
    init_weights(initial, seed=0)
    assert max_difference({k: v.detach() for k, v in initial.state_dict().items()}, single_w) > 1e-3


@pytest.mark.slow
def test_a_run_leaves_records_metrics_and_a_plot(parity_runs: Path) -> None:
    run_dir = parity_runs / "fsdp2"
    records = read_records(run_dir)
    assert sorted(r.rank for r in records) == [0, 1]
    assert {r.run_id for r in records} == {"fsdp2"} and {r.status for r in records} == {"ok"}
    for record in records:
        assert (run_dir / f"fleetbench_train_rank{record.rank}.prom").is_file()
        assert record.metric("fleetbench_train_loss") == pytest.approx(losses(run_dir)[-1])
        assert record.metric("fleetbench_steps_total") == 5
        assert record.metric("fleetbench_train_tokens_total") == 5 * PER_RANK_BATCH * 64
        assert 0 < (record.metric("fleetbench_train_mfu_ratio") or 0) < 1
        assert record.summary["peak_source"].startswith("measured")
        assert record.summary["flop_per_token"] > 0 and record.summary["tokens_per_s"] > 0
        assert record.summary["telemetry_overhead_ratio"] is not None
    rank0 = next(r for r in records if r.rank == 0)
    assert "train_loss_throughput.png" in rank0.artifacts
    # Energy: the node's first rank reads the CPU packages (or says why it cannot); the other rank defers to it.
    energy = {r.rank: r.summary["energy"] for r in records}
    assert energy[1] == {"source": None, "joules": None, "reason": OTHER_CPU_RANK}
    assert (energy[0]["joules"] is None) == (energy[0]["reason"] is not None)
    if energy[0]["joules"] is not None:
        assert energy[0]["joules_per_token"] == pytest.approx(energy[0]["joules"] / (5 * 2 * PER_RANK_BATCH * 64))
    assert (run_dir / "train_loss_throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each rank pushed its own group (job, benchmark, run_id, instance, rank), the last push complete.
    for rank in (0, 1):
        bodies = [
            body
            for path, body in PushCapture.pushes
            if grouping(path)
            == {
                "job": "fleetbench",
                "benchmark": "train",
                "run_id": "fsdp2",
                "instance": host_name(),
                "rank": str(rank),
            }
        ]
        assert bodies, PushCapture.pushes[:3]
        assert "fleetbench_train_loss{" in bodies[-1] and "fleetbench_run_success{" in bodies[-1]


@pytest.mark.slow
def test_plain_torchrun_ranks_share_one_run(tmp_path: Path) -> None:
    """`torchrun ... -m fleetbench train` without the launcher: rank 0 names the run for every rank."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "127.0.0.1:0",
            "--local-addr",
            "127.0.0.1",
            "-m",
            "fleetbench",
            "train",
            "--results-dir",
            str(tmp_path),
            *(f"--set=train.{item}" for item in (*MODEL, "steps=2", "batch_size=2")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 1
    records = read_records(runs[0])
    assert sorted(r.rank for r in records) == [0, 1] and {r.run_id for r in records} == {runs[0].name}


@pytest.mark.slow
def test_two_nodes_on_loopback_meet_through_c10d_rendezvous(tmp_path: Path) -> None:
    """NNODES=2 as two launchers on this machine: node 0 hosts the rendezvous, node 1 joins; HSDP mesh 2 x 1."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    common = [sys.executable, "-m", "fleetbench", "train", "--results-dir", str(tmp_path), "--nproc", "1",
              "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
              *(f"--set=train.{item}" for item in (*MODEL, "steps=2", "batch_size=2", "hsdp=true", "rdzv_timeout_s=120"))]  # fmt: skip
    node0 = subprocess.Popen([*common, "--node-rank", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        node1 = subprocess.run([*common, "--node-rank", "1"], capture_output=True, text=True, timeout=300)
        _out, err0 = node0.communicate(timeout=120)
    finally:
        if node0.poll() is None:
            node0.kill()
    assert node0.returncode == 0, err0[-2000:]
    assert node1.returncode == 0, node1.stderr[-2000:]
    runs = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 1  # node 0's run id reached every rank
    # Node 1's launcher learns that id from its rank, and (the results folder being shared here, as on
    # a cluster file system) answers with rank 0's record.
    assert "waiting for node 0's rendezvous" in node1.stderr
    assert f"result record: {runs[0] / 'records.jsonl'}" in node1.stderr
    records = read_records(runs[0])
    assert sorted(r.rank for r in records) == [0, 1]
    assert all(r.summary["mesh"] == [2, 1] and r.status == "ok" for r in records)


@pytest.mark.slow
def test_a_node_without_rank_zero_answers_with_its_own_ranks_record(tmp_path: Path) -> None:
    """Nodes that do not share a results folder: node 1 has only rank 1's record, and says so."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    common = [sys.executable, "-m", "fleetbench", "train", "--nproc", "1", "--nnodes", "2",
              "--rdzv-endpoint", f"127.0.0.1:{port}",
              *(f"--set=train.{item}" for item in (*MODEL, "steps=2", "batch_size=2", "rdzv_timeout_s=120"))]  # fmt: skip
    node0 = subprocess.Popen(
        [*common, "--node-rank", "0", "--results-dir", str(tmp_path / "node0")], stderr=subprocess.PIPE, text=True
    )
    try:
        node1 = subprocess.run(
            [*common, "--node-rank", "1", "--results-dir", str(tmp_path / "node1")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        _out, err0 = node0.communicate(timeout=120)
    finally:
        if node0.poll() is None:
            node0.kill()
    assert node0.returncode == 0 and node1.returncode == 0, (err0[-1000:], node1.stderr[-1000:])
    (run0,) = (tmp_path / "node0").iterdir()
    (run1,) = (p for p in (tmp_path / "node1").iterdir() if not p.name.startswith("."))
    assert run0.name == run1.name  # rank 0's run id, on both nodes
    assert [r.rank for r in read_records(run1)] == [1]
    assert "rank 0 ran on another node; this is rank 1's record" in node1.stderr


@pytest.mark.slow
def test_demo_stage_returns_rank_zero_record(tmp_path: Path) -> None:
    from fleetbench.config.loader import load_config
    from fleetbench.job import RunContext
    from fleetbench.train.stage import run_train_stage

    config = load_config(
        None, [f"run.results_dir={tmp_path}", "run.run_id=demo", "train.steps=3", "train.peak_flops=1e11"]
    )
    record = run_train_stage(config, RunContext.start(config)).record
    assert (record.benchmark, record.rank, record.status, record.run_id) == ("train", 0, "ok", "demo")
    assert record.config["preset"] == "tiny" and record.summary["world_size"] == 2
    assert record.summary["final_step"] == 3


# --- checkpoints: resume and kill -9 ------------------------------------------------------------------------
CKPT = (*MODEL, f"batch_size={PER_RANK_BATCH}", "checkpoint_every=3", "keep_checkpoints=0")


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted reference: 30 steps, a checkpoint every 3."""
    results = tmp_path_factory.mktemp("straight")
    ok(train(results, "straight", *CKPT, "steps=30"))
    return results / "straight"


@pytest.mark.slow
def test_resume_continues_exactly(straight: Path, tmp_path: Path) -> None:
    ok(train(tmp_path, "resumed", *CKPT, "steps=3"))
    assert [step for step, _ in complete_checkpoints(tmp_path / "resumed" / "checkpoints")] == [3]
    done = ok(train(tmp_path, "resumed", *CKPT, "steps=6", flags=("--resume",)))
    assert "resumed from" in done.stderr and "at step 3" in done.stderr
    assert losses(tmp_path / "resumed") == losses(straight)[:6]
    rows = read_history(tmp_path / "resumed")
    assert [row.step for row in rows] == [1, 2, 3, 4, 5, 6]
    resumed = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "step_00000006", tmp_path)
    reference = load_checkpoint(straight / "checkpoints" / "step_00000006", tmp_path)
    assert_states_equal(resumed["model"], reference["model"], "model")
    assert_states_equal(resumed["optim"], reference["optim"], "optim")
    record = [r for r in read_records(tmp_path / "resumed") if r.rank == 0][-1]
    assert record.summary["resumed_from_step"] == 3 and record.summary["steps_run"] == 3


def rank_process(launcher: subprocess.Popen[str], rank: int) -> psutil.Process | None:
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if child.environ().get("RANK") == str(rank):
                return child
        except psutil.Error:
            continue
    return None


@pytest.mark.slow
def test_kill_9_of_a_rank_costs_only_the_steps_since_the_checkpoint(straight: Path, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "fleetbench",
        "train",
        "--results-dir",
        str(tmp_path),
        "--run-id",
        "fault",
        "--nproc",
        "2",
        "--max-restarts",
        "1",
        *(f"--set=train.{item}" for item in (*CKPT, "steps=30")),
    ]
    launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = tmp_path / "fault" / "checkpoints" / "step_00000006"
        deadline = time.monotonic() + 240
        while not first.is_dir() and launcher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        victim = rank_process(launcher, 1)
        assert victim is not None and launcher.poll() is None, "the run ended before it could be interrupted"
        victim.send_signal(signal.SIGKILL)
        _out, err = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 0, err[-3000:]
    rows = read_history(tmp_path / "fault")
    assert [row.step for row in rows] == list(range(1, 31))
    first_attempt = max(row.step for row in rows if row.attempt == 0)
    resumed_at = min(row.step for row in rows if row.attempt == 1) - 1
    assert 6 <= resumed_at < 30 and resumed_at % 3 == 0
    assert first_attempt - resumed_at < 3 + 1  # at most the steps since the last checkpoint were redone
    assert losses(tmp_path / "fault") == losses(straight)
    final = load_checkpoint(tmp_path / "fault" / "checkpoints" / "step_00000030", tmp_path)
    reference = load_checkpoint(straight / "checkpoints" / "step_00000030", tmp_path)
    assert_states_equal(final["model"], reference["model"], "model")
    assert_states_equal(final["optim"], reference["optim"], "optim")
    records = read_records(tmp_path / "fault")
    done = [r for r in records if r.status == "ok"]
    assert sorted(r.rank for r in done) == [0, 1]
    assert all(r.summary["attempt"] == 1 and r.summary["resumed_from_step"] == resumed_at for r in done)


# --- a genuine out-of-memory step ----------------------------------------------------------------------------
@pytest.mark.slow
def test_out_of_memory_step_names_the_knobs(tmp_path: Path) -> None:
    done = train(
        tmp_path,
        "oom",
        "max_memory_gb=1.5",
        "batch_size=256",
        "seq_len=512",
        "threads=1",
        "reshard_after_forward=false",
        "activation_checkpointing=false",
        "peak_flops=1e11",
        "steps=2",
    )
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("fleetbench: error: out of memory on rank "), last
    assert "cap 1.5 GiB" in last and "in step 1" in last and "Cannot allocate memory" in last
    for knob in (
        "train.batch_size (now 256)",
        "train.seq_len (now 512)",
        "train.activation_checkpointing=true",
        "train.reshard_after_forward=true",
        "more ranks to shard over (NPROC",
    ):
        assert knob in last
    assert "Traceback" not in done.stderr
    failed = [r for r in read_records(tmp_path / "oom") if r.error and "out of memory" in r.error]
    assert failed and all(r.status == "failed" for r in failed)
    assert all(r.metric("fleetbench_train_ooms_total") == 1 for r in failed)
