"""The collectives job: one entry, `run`. Started by a user it launches torchrun (as `fleetbench train`
does); started by torchrun it is one rank of the sweep. Rank 0 writes the record, the metrics and the chart.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from fleetbench.collectives.formulas import sweep
from fleetbench.collectives.measure import Measurement, Settings, plan, timed
from fleetbench.collectives.record import BENCHMARK
from fleetbench.config.collectives import CollectivesConfig
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.envvars import TRAIN_ERROR_DIR_ENV as ERROR_DIR_ENV
from fleetbench.errors import UserError
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.results.store import read_records

# The CPU's default range: seconds with gloo; GPUs sweep nccl-tests' whole 8 B .. 1 GiB.
CPU_MAX_BYTES = 1 << 20
GPU_MAX_BYTES = 1 << 30
MIN_BYTES = 8

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollectivesView:
    """What the CLI shows: every measurement, the ranks, the backend and where the chart is."""

    rows: list[Measurement]
    ranks: int
    backend: str
    device: str
    chart: Path | None


def size_range(cfg: CollectivesConfig, cuda: bool) -> tuple[int, int]:
    """(min, max) bytes: the configured ones, else the device's default."""
    low = cfg.min_bytes or MIN_BYTES
    high = cfg.max_bytes or (GPU_MAX_BYTES if cuda else max(CPU_MAX_BYTES, low))
    if low > high:
        raise UserError(f"collectives.min_bytes={low} is above collectives.max_bytes={high}; accepted: min <= max")
    return low, high


def uses_cuda(cfg: CollectivesConfig) -> bool:
    """Whether the ranks run on GPUs with NCCL (auto: when torch sees a GPU)."""
    import torch

    return cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())


def local_ranks(cfg: CollectivesConfig, cuda: bool) -> int:
    """Ranks on this node: collectives.nproc, else one per GPU, else 2 on the CPU; never more than GPUs."""
    import torch

    if cuda:
        gpus = torch.cuda.device_count()
        if gpus == 0:
            raise UserError("collectives.device=cuda but torch sees no GPU; accepted here: --device cpu (gloo)")
        nproc = cfg.nproc or gpus
        if nproc > gpus:
            raise UserError(f"--nproc {nproc} is more ranks than this node's {gpus} GPU(s); accepted: 1 .. {gpus}")
        return nproc
    return cfg.nproc or 2


def check(config: FleetbenchConfig) -> tuple[int, bool]:
    """Everything that can be refused before a rank starts; returns (ranks on this node, CUDA or not)."""
    cfg = config.collectives
    cuda = uses_cuda(cfg)
    nproc = local_ranks(cfg, cuda)
    size_range(cfg, cuda)
    if cfg.node_rank >= cfg.nnodes:
        raise UserError(
            f"--node-rank {cfg.node_rank} is not below --nnodes {cfg.nnodes}; accepted: 0 .. {cfg.nnodes - 1}"
        )
    if cfg.nnodes > 1 and not cfg.rdzv_endpoint:
        raise UserError(f"--nnodes {cfg.nnodes} needs --rdzv-endpoint HOST:PORT, the address of node 0")
    if nproc * cfg.nnodes < 2:
        raise UserError("a collective needs at least 2 ranks; accepted: --nproc 2 or more (or several nodes)")
    return nproc, cuda


def torchrun_args(cfg: CollectivesConfig, nproc: int, rdzv_id: str, config_path: Path) -> list[str]:
    """torchrun's command line: c10d rendezvous, `python -m fleetbench collectives --config FILE` per rank."""
    endpoint = cfg.rdzv_endpoint or "127.0.0.1:0"
    conf = f"join_timeout={int(cfg.rdzv_timeout_s)},read_timeout={int(cfg.rdzv_timeout_s)}"
    conf += f",is_host={'true' if cfg.node_rank == 0 else 'false'}"
    args = ["--nproc-per-node", str(nproc), "--nnodes", str(cfg.nnodes), "--max-restarts", "0"]
    args += ["--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id, "--rdzv-conf", conf]
    args += ["--monitor-interval", "0.2"]
    if cfg.nnodes == 1:
        args += ["--local-addr", "127.0.0.1"]
    return [*args, "--module", "fleetbench", BENCHMARK, "--config", str(config_path)]


def launch(config: FleetbenchConfig, context: RunContext) -> JobResult[CollectivesView]:
    """torchrun the ranks on this node; returns rank 0's record and what it measured."""
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from fleetbench.train.handoff import failure_from_ranks
    from fleetbench.train.launch import describe_child_failure, patched_environ, probe_rendezvous, run_torchrun
    from fleetbench.train.parallel import usable_cpu_cores

    cfg = config.collectives
    nproc, _cuda = check(config)
    config = context.pinned(config)
    if cfg.nnodes > 1 and cfg.node_rank > 0:
        assert cfg.rdzv_endpoint is not None
        probe_rendezvous(cfg.rdzv_endpoint, cfg.rdzv_timeout_s)
    with tempfile.TemporaryDirectory(prefix="fleetbench-collectives-") as scratch:
        config_path = Path(scratch) / "config.yaml"
        config_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
        error_dir = Path(scratch) / "errors"
        error_dir.mkdir()
        env = {ERROR_DIR_ENV: str(error_dir), "OMP_NUM_THREADS": str(max(1, usable_cpu_cores() // nproc))}
        args = torchrun.parse_args(torchrun_args(cfg, nproc, context.run_id, config_path))  # type: ignore[no-untyped-call]
        try:
            with patched_environ(env):
                run_torchrun(args)
        except ChildFailedError as exc:
            raise failure_from_ranks(error_dir, describe_child_failure(exc).replace("training", BENCHMARK)) from None
    return result_of(context)


def result_of(context: RunContext) -> JobResult[CollectivesView]:
    """This node's record of the run (its first rank's: rank 0 on the node that held it) and its view."""
    records = [r for r in read_records(context.run_dir) if r.benchmark == BENCHMARK] if context.run_dir.exists() else []
    if not records:
        raise UserError(
            f"the collectives ranks finished but this node's first rank wrote no record under {context.run_dir}"
        )
    record = min(records, key=lambda r: (r.rank, -r.end.timestamp()))
    rows = [Measurement.from_dict(row) for row in record.summary["rows"]]
    chart = context.run_dir / record.summary["chart"] if record.summary.get("chart") else None
    return JobResult([record], CollectivesView(rows, record.summary["ranks"], record.backend, record.device, chart))


def run_rank(config: FleetbenchConfig, context: RunContext) -> JobResult[CollectivesView]:
    """One rank under torchrun: the whole sweep; each node's first rank records what it timed (its global
    rank in the record; a node without its record would have nothing to show or collect), the others return
    no record."""
    import torch
    import torch.distributed as dist

    from fleetbench.collectives.record import record_sweep
    from fleetbench.devices import resolve_device
    from fleetbench.train.parallel import DistEnv

    cfg = config.collectives
    env = DistEnv.from_environ()
    cuda = uses_cuda(cfg)
    device = resolve_device("cuda" if cuda else "cpu", env.local_rank if cuda else 0)
    if cuda:
        torch.cuda.set_device(device.torch_device)
    dist.init_process_group("nccl" if cuda else "gloo", device_id=device.torch_device if cuda else None)
    try:
        low, high = size_range(cfg, cuda)
        dtype = getattr(torch, cfg.dtype)
        element = torch.empty((), dtype=dtype).element_size()
        settings = Settings(env.rank, env.world_size, device.torch_device, dtype, cfg.iters, cfg.warmup_iters)
        pairs = plan(list(cfg.ops), sweep(low, high, cfg.factor), element, env.world_size)
        if env.local_rank != 0:
            for op, count in pairs:
                timed(op, count, settings)
            return JobResult([], CollectivesView([], env.world_size, device.backend, device.name, None))
        rows = []
        with context.progress.task(BENCHMARK, total=len(pairs)) as task:
            for op, count in pairs:
                task.update(f"{op} {count * element} B")
                rows.append(timed(op, count, settings))
                task.advance()
        record = record_sweep(config, context, rows, device, rank=env.rank)
        return JobResult([record], CollectivesView(rows, env.world_size, device.backend, device.name, None))
    finally:
        dist.destroy_process_group()


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[CollectivesView]:
    """The sweep: as the launcher (torchrun the ranks) or, under torchrun, as one rank."""
    from fleetbench.train.parallel import DistEnv

    if DistEnv.from_environ().launched:
        return run_rank(config, context)
    return launch(config, context)


JOB: Job[CollectivesView] = run
