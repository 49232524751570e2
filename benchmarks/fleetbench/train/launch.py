"""`fleetbench train` as the launcher: check everything that can be checked, then torchrun the ranks.

Bad input fails here, before any rank starts, as one line (unknown preset, sizes that cannot work,
more ranks than devices, a rendezvous endpoint that does not answer within `rdzv_timeout_s`).
torchrun's elastic agent runs in this process (torch.distributed.run), launching
`python -m fleetbench train` per rank with c10d rendezvous; ranks report their one-line errors
through files, so a failed rank surfaces here as that line and an exit status, not as a traceback.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import yaml

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.config.train import TrainConfig
from fleetbench.envvars import TRAIN_ERROR_DIR_ENV as ERROR_DIR_ENV
from fleetbench.errors import Terminated, UserError
from fleetbench.fsutil import check_writable_dir
from fleetbench.job import JobResult, RunContext
from fleetbench.train.checkpoint import check_resume, resume_run_id
from fleetbench.train.handoff import agreed_run_id, failure_from_ranks, node_record
from fleetbench.train.loop import TrainOutcome, run_worker
from fleetbench.train.plan import check_launch, check_profile_device, resolve_plan

# Each rank is `python -m fleetbench train --config FILE`: the same command the user ran.
WORKER_MODULE = "fleetbench"
WORKER_COMMAND = "train"

log = logging.getLogger(__name__)

_PROBE = """
import sys
from datetime import timedelta
from torch.distributed import TCPStore
store = TCPStore(sys.argv[1], int(sys.argv[2]), is_master=False, timeout=timedelta(seconds=float(sys.argv[3])))
store.check(["fleetbench-rendezvous-probe"])
"""


def probe_rendezvous(endpoint: str, timeout_s: float) -> None:
    """Prove node 0's c10d store answers, in a child process we can kill: a peer that accepts the
    connection but never replies would otherwise hang the store client, and torchrun with it."""
    host, port = endpoint.rsplit(":", 1)
    host = host.strip("[]")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, host, port, str(timeout_s)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout_s + 10,
        )
    except subprocess.TimeoutExpired:
        done = None
    if done is None or done.returncode != 0:
        raise UserError(
            f"rendezvous endpoint {endpoint} did not answer within {timeout_s:g} s; start node 0 "
            "(NODE_RANK=0) first and check RDZV_ENDPOINT=HOST:PORT and the firewall, or raise "
            "train.rdzv_timeout_s"
        )


def worker_threads(cfg: TrainConfig, nproc: int) -> int:
    """OMP threads per rank: `train.threads`, else the usable cores shared by the `nproc` ranks."""
    from fleetbench.train.parallel import usable_cpu_cores

    return cfg.threads or max(1, usable_cpu_cores() // nproc)


def preflight(config: FleetbenchConfig) -> tuple[int, int]:
    """Validate before launching; returns (ranks per node, world size)."""
    from fleetbench.devices import resolve_device
    from fleetbench.train.data import text_corpus
    from fleetbench.train.float8 import check_float8
    from fleetbench.train.memory import check_fits
    from fleetbench.train.parallel import check_ranks_fit, default_local_ranks, usable_cpu_cores, uses_cuda

    cfg = config.train
    nproc = cfg.nproc or default_local_ranks(cfg.device)
    world = nproc * cfg.nnodes
    check_ranks_fit(cfg.device, nproc)
    cuda = uses_cuda(cfg.device)
    device = resolve_device("cuda" if cuda else "cpu")  # what this node's first rank trains on
    plan = resolve_plan(cfg, world, device)
    check_launch(cfg, plan)
    check_profile_device(cfg, cuda)
    if cfg.node_rank >= cfg.nnodes:
        raise UserError(f"NODE_RANK={cfg.node_rank} is not below NNODES={cfg.nnodes}; accepted: 0 .. {cfg.nnodes - 1}")
    if cfg.nnodes > 1 and not cfg.rdzv_endpoint:
        raise UserError(
            f"NNODES={cfg.nnodes} needs RDZV_ENDPOINT=HOST:PORT, the address of node 0 (NODE_RANK=0) "
            "that every node can reach"
        )
    if plan.data == "text":
        corpus = text_corpus()
        if len(corpus.tokens) <= plan.seq_len + 1:
            raise UserError(
                f"train.seq_len={plan.seq_len} is longer than the text corpus ({len(corpus.tokens)} "
                f"bytes); accepted: seq_len < {len(corpus.tokens) - 1}, or data=random"
            )
    check_float8(cfg.float8, device, plan.precision.bf16)
    check_fits(plan, cfg, device.torch_device, nproc)
    if not cuda and nproc > usable_cpu_cores():
        log.warning(
            "%d ranks share %d CPU core(s): the run is correct but slower, and its tokens/s and MFU are not "
            "this machine's",
            nproc,
            usable_cpu_cores(),
        )
    # Checked, not made: a launch refused later (--resume without a checkpoint) leaves nothing behind.
    check_writable_dir(config.run.results_dir, "results dir", "--results-dir")
    if cfg.checkpoint_dir is not None and (cfg.checkpoint_every or cfg.checkpoint_final):
        check_writable_dir(cfg.checkpoint_dir, "checkpoint dir", "--set train.checkpoint_dir=DIR")
    return nproc, world


@contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    """Set `values` in os.environ for the block (torchrun's ranks inherit it), then restore it."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def torchrun_args(cfg: TrainConfig, nproc: int, rdzv_id: str, config_path: Path) -> list[str]:
    """torchrun's command line: c10d rendezvous, restarts, and `python -m fleetbench train --config FILE` per rank."""
    single_node = cfg.nnodes == 1
    endpoint = cfg.rdzv_endpoint or "127.0.0.1:0"
    rdzv_conf = f"join_timeout={int(cfg.rdzv_timeout_s)},read_timeout={int(cfg.rdzv_timeout_s)}"
    rdzv_conf += f",is_host={'true' if cfg.node_rank == 0 else 'false'}"
    args = [
        "--nproc-per-node",
        str(nproc),
        "--nnodes",
        str(cfg.nnodes),
        "--max-restarts",
        str(cfg.max_restarts),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        rdzv_id,
        "--rdzv-conf",
        rdzv_conf,
        "--monitor-interval",
        "0.2",
    ]
    if single_node:
        args += ["--local-addr", "127.0.0.1"]
    return [*args, "--module", WORKER_MODULE, WORKER_COMMAND, "--config", str(config_path)]


def run_torchrun(args: object) -> None:
    """torch.distributed.run.run(args). Its agent puts in its own SIGTERM and SIGINT handler, which stops the
    ranks and then raises SignalException: here that is the interrupt it is (exit 130), not a crash."""
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException

    try:
        torchrun.run(args)  # type: ignore[no-untyped-call]
    except SignalException as exc:
        if exc.sigval == signal.SIGTERM:
            raise Terminated(f"interrupted by signal {int(exc.sigval)} (SIGTERM)") from None
        raise KeyboardInterrupt from None


def describe_child_failure(exc: BaseException) -> str:
    """How each failed rank ended (exit status or signal, with the OOM killer's hint for SIGKILL)."""
    failures = getattr(exc, "failures", {}) or {}
    parts = []
    for rank, failure in sorted(failures.items()):
        code = getattr(failure, "exitcode", None)
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            hint = " (unasked, SIGKILL is usually the kernel's OOM killer: see dmesg)" if name == "SIGKILL" else ""
            parts.append(f"rank {rank} killed by {name}{hint}")
        else:
            parts.append(f"rank {rank} exited with status {code}")
    return "training failed: " + ("; ".join(parts) or str(exc).strip().splitlines()[0])


def note_nccl_transport(scratch: Path, run_dir: Path) -> None:
    """Which network NCCL chose on this node's ranks (from their INFO logs), kept in the run folder as
    nccl-transport.json; a warning when it fell back to sockets on a node with InfiniBand."""
    from fleetbench import jsonio
    from fleetbench.train.nccl_transport import infiniband_present, read_logs, warning

    if not any(scratch.glob("nccl.*")) or not run_dir.is_dir():
        return
    transport = read_logs(scratch)
    has_ib = infiniband_present()
    said = warning(transport, has_ib)
    document = {"networks": transport.networks, "devices": transport.devices, "infiniband": has_ib, "warning": said}
    (run_dir / "nccl-transport.json").write_text(jsonio.dumps(document) + "\n", encoding="utf-8")
    log.info("NCCL network: %s", ", ".join(transport.networks) or "not named in its log")
    if said:
        log.warning("%s", said)


def launch(config: FleetbenchConfig, context: RunContext) -> JobResult[TrainOutcome]:
    """Run the training job from this node; returns rank 0's record, or this node's first rank's.

    The run is the one `train.resume` continues (or the one --run-id names), else `context`'s; its
    ranks take it from the config file this launcher writes for them.
    """
    cfg = config.train
    nproc, world = preflight(config)
    named = resume_run_id(config)
    if cfg.node_rank == 0:  # the other nodes may not see the folder until the job runs
        check_resume(config, named)
    # Nodes meet under one rendezvous id: the run id when the user named it (every node then has the
    # same), else a fixed name; rank 0's run id then wins in every rank (parallel.broadcast_object).
    context = replace(context, run_id=named or context.run_id)
    rdzv_id = context.run_id if (named or cfg.nnodes == 1) else "fleetbench-train"
    config = context.pinned(config)
    if world == 1 and cfg.max_restarts == 0:
        return run_worker(config, context)
    if cfg.nnodes > 1 and cfg.node_rank > 0:
        assert cfg.rdzv_endpoint is not None
        log.info("waiting for node 0's rendezvous at %s (up to %g s)", cfg.rdzv_endpoint, cfg.rdzv_timeout_s)
        probe_rendezvous(cfg.rdzv_endpoint, cfg.rdzv_timeout_s)
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError

    with tempfile.TemporaryDirectory(prefix="fleetbench-train-") as scratch:
        config_path = Path(scratch) / "config.yaml"
        config_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
        error_dir = Path(scratch) / "errors"
        error_dir.mkdir()
        env = {ERROR_DIR_ENV: str(error_dir), "OMP_NUM_THREADS": str(worker_threads(cfg, nproc))}
        if os.environ.get("NCCL_DEBUG", "").upper() == "INFO" and "NCCL_DEBUG_FILE" not in os.environ:
            env["NCCL_DEBUG_FILE"] = str(Path(scratch) / "nccl.%h.%p.log")  # read back below: NCCL's transport
        # torch.distributed.run has no annotations: its two entry points are untyped calls.
        args = torchrun.parse_args(torchrun_args(cfg, nproc, rdzv_id, config_path))  # type: ignore[no-untyped-call]
        try:
            with patched_environ(env):
                run_torchrun(args)
        except ChildFailedError as exc:
            raise failure_from_ranks(error_dir, describe_child_failure(exc)) from None
        except RendezvousError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(
                f"rendezvous at {cfg.rdzv_endpoint or 'this node'} failed within "
                f"{cfg.rdzv_timeout_s:g} s ({type(exc).__name__}: {first[:200]}); check NNODES, "
                "RDZV_ENDPOINT and that every node was started"
            ) from None
        # Rank 0 names the run for every rank; on another node that is not the id made up here.
        run_id = agreed_run_id(error_dir) or context.run_id
        note_nccl_transport(Path(scratch), context.results_dir / run_id)
    # The ranks showed what they had to show (their closing lines went to the inherited stdout).
    return JobResult([node_record(context.results_dir / run_id)], TrainOutcome([]))
