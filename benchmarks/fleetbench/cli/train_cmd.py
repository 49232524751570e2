"""`fleetbench train`: the FSDP2 trainer. Launches torchrun itself, or trains as one rank under torchrun.

fleetbench train --nproc 2                          # this node, 2 ranks (gloo on CPU, NCCL on GPUs)
fleetbench train --preset seed --nproc 4            # the reference workload on 4 GPUs
fleetbench train --nnodes 2 --node-rank 1 --rdzv-endpoint node0:29400
fleetbench train --profile-steps 3:5               # torch.profiler trace of steps 3..5 on every rank
fleetbench train --device cpu --dtype bf16          # the CUDA precision policy (bf16 params, fp32 reduce) on gloo
fleetbench train --nproc 4 --hsdp 2                 # HSDP: 2 replicas x shard groups of 2 ranks
torchrun --nproc-per-node 2 -m fleetbench train     # torchrun directly: each process is one rank
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from rich.console import Console

from fleetbench.cli.flags import Flag, add_flags, torchrun_flags
from fleetbench.cli.options import add_run_options, config_from_args, print_record_path, run_context
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError

log = logging.getLogger(__name__)


TRAIN_FLAGS = (
    Flag(
        "--preset",
        "train.preset",
        "tiny, small, seed (the reference workload), 1b, llama3-debug, llama3-8b (default: seed on CUDA, tiny on "
        "the CPU; with train.model=llama: llama3-8b on CUDA, llama3-debug on the CPU)",
        example="tiny",
    ),
    Flag("--steps", "train.steps", "steps to train (default: the preset's)", example="3", type=int),
    Flag("--device", "train.device", "auto, cpu or cuda (default: auto)", example="cpu"),
    Flag(
        "--dtype",
        "train.mixed_precision",
        "train.mixed_precision: bf16 params with fp32 reduce, fp32, or auto (bf16 on CUDA, fp32 on the CPU)",
        example="bf16",
        choices=("bf16", "fp32", "auto"),
    ),
    Flag(
        "--hsdp",
        "train.hsdp_shard_size",
        "HSDP: shard within groups of N ranks, replicate across them (train.hsdp=true, hsdp_shard_size=N)",
        example="2",
        type=int,
        metavar="N",
        also=(("train.hsdp", True),),
    ),
    Flag(
        "--resume",
        "train.resume",
        "continue from the newest checkpoint (of --run-id, else of the newest run)",
        switch=True,
    ),
    Flag(
        "--profile-steps",
        "train.profile_steps",
        "trace steps A..B with torch.profiler on every rank into <run>/profile/ (left out of tok/s and MFU)",
        example="3:5",
        metavar="A:B",
    ),
)
LAUNCH_FLAGS = (
    *torchrun_flags("train"),
    Flag(
        "--max-restarts", "train.max_restarts", "torchrun restarts after a failure", example="1", type=int, metavar="N"
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run options, the training shortcuts for --set train.KEY and the torchrun launch flags."""
    add_run_options(parser)
    add_flags(parser, TRAIN_FLAGS, "training (each flag is a shortcut for --set train.KEY=VALUE)")
    add_flags(parser, LAUNCH_FLAGS, "launch (torchrun, c10d rendezvous)")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `train`."""
    parser = commands.add_parser(
        "train",
        help="train a transformer with FSDP2 (torchrun; CPU gloo or GPU NCCL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Launch torchrun and train (or, inside torchrun, train as this rank) and print where the record is."""
    config = config_from_args(args)
    from fleetbench.train import run as train_job  # torch loads once the config is valid
    from fleetbench.train.parallel import DistEnv

    if DistEnv.from_environ().launched:
        return handle_rank(config, console)
    context = run_context(config, console, continues=config.train.resume)
    result = train_job.run(config, context)
    show_closing(console, result.view.closing)
    record = result.record
    if config.train.profile_steps is not None:
        show_rank_breakdown(console, context.results_dir / record.run_id / "profile")
    print_record_path(console, record, context.results_dir)
    if record.rank != 0:
        log.info("rank 0 ran on another node; this is rank %d's record", record.rank)
    return 0


def show_closing(console: Console, lines: list[str]) -> None:
    """Rank 0's closing lines: the run's summary, and where the profiled steps' traces are."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def show_rank_breakdown(console: Console, folder: Path) -> None:
    """Where each rank's profiled steps went (compute, FSDP2's communication, idle) and the straggler."""
    from fleetbench.cli.views.trace import print_report
    from fleetbench.profile.trace.report import build_report

    if not any(folder.glob("rank-*.pt.trace.json*")):
        log.warning("no rank traces under %s to summarise", folder)
        return
    # Wide tables in a log or pipe, where nothing would wrap them; the terminal's width otherwise.
    out = console if console.is_terminal else Console(stderr=True, width=160)
    print_report(out, build_report([folder], "steps", 10, None, chart=True), "table")


def handle_rank(config: FleetbenchConfig, console: Console) -> int:
    """One rank under torchrun: its one-line error goes where the launcher reads it, and is printed
    here only when torchrun was started by hand (the launcher prints it once for every rank)."""
    from fleetbench.envvars import TRAIN_ERROR_DIR_ENV
    from fleetbench.job import RunContext, SilentProgress
    from fleetbench.progress import ConsoleProgress
    from fleetbench.train import run as train_job
    from fleetbench.train.handoff import write_worker_error
    from fleetbench.train.loop import Terminated

    # Rank 0 shows the steps; the other ranks train in silence (their errors still reach the launcher).
    shown = os.environ.get("RANK", "0") == "0"
    context = RunContext.start(config, ConsoleProgress(console) if shown else SilentProgress())
    try:
        result = train_job.run(config, context)
    except UserError as exc:
        write_worker_error(exc, exc.exit_code)
        if os.environ.get(TRAIN_ERROR_DIR_ENV):
            return exc.exit_code
        raise
    except Terminated:
        return 143
    except Exception as exc:
        write_worker_error(exc, 1)
        if not peer_failed(exc):
            raise
        # Another rank died (killed, OOM, crashed): its own report is the one that matters; this
        # rank says so in one line instead of a traceback through the collective that noticed.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        log.error(
            "rank %s: a peer rank failed (%s); torchrun stops or restarts the job",
            os.environ.get("RANK", "?"),
            first[:160],
        )
        return 1
    show_closing(console, result.view.closing)
    return 0


PEER_FAILURE_MARKERS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "NCCL communicator was aborted",
)


def peer_failed(exc: BaseException) -> bool:
    """Whether `exc` is how a collective reports that another rank went away (not this rank's fault)."""
    return isinstance(exc, RuntimeError) and any(marker in str(exc) for marker in PEER_FAILURE_MARKERS)
