"""`fleetbench collectives`: nccl-tests' sweep (all-reduce, all-gather, reduce-scatter, all-to-all) by message size.

fleetbench collectives                               # this node: 2 gloo ranks on the CPU, or one rank per GPU (NCCL)
fleetbench collectives --nproc 4 --max-bytes 4096   # 4 ranks, 8 B .. 4 KiB
fleetbench collectives --nnodes 2 --node-rank 1 --rdzv-endpoint node0:29500
"""

from __future__ import annotations

import argparse
import logging
import os

from rich.console import Console

from fleetbench.cli.flags import Flag, add_flags, torchrun_flags
from fleetbench.cli.options import add_run_options, config_from_args, print_record_path, run_context
from fleetbench.config.collectives import COLLECTIVE_OPS
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError

log = logging.getLogger(__name__)


def _ops(text: str, shown: str) -> list[str]:
    """--ops a,b: the operations' names as the config spells them (all-reduce or all_reduce)."""
    return [op.strip().replace("-", "_") for op in text.split(",")]


SWEEP_FLAGS = (
    Flag(
        "--ops",
        "collectives.ops",
        f"comma-separated operations (default: {','.join(COLLECTIVE_OPS)})",
        example="all_reduce,all_gather",
        convert=_ops,
    ),
    Flag(
        "--min-bytes",
        "collectives.min_bytes",
        "smallest size (default 8; nccl-tests -b)",
        example="64",
        type=int,
        metavar="B",
    ),
    Flag(
        "--max-bytes",
        "collectives.max_bytes",
        "largest size (default 1 GiB on GPUs, 1 MiB on the CPU; -e)",
        example="4096",
        type=int,
        metavar="B",
    ),
    Flag(
        "--iters", "collectives.iters", "timed iterations per size (default 20; -n)", example="5", type=int, metavar="N"
    ),
    Flag("--device", "collectives.device", "auto, cpu (gloo) or cuda (NCCL) (default: auto)", example="cpu"),
)
LAUNCH_FLAGS = torchrun_flags("collectives")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `collectives` with the run options, the sweep's flags and torchrun's launch flags."""
    parser = commands.add_parser(
        "collectives",
        help="all-reduce, all-gather, reduce-scatter, all-to-all by message size: nccl-tests' algbw and busbw",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(parser)
    add_flags(parser, SWEEP_FLAGS, "the sweep (each flag is a shortcut for --set collectives.KEY=VALUE)")
    add_flags(parser, LAUNCH_FLAGS, "launch (torchrun, c10d rendezvous)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Launch the ranks (or, under torchrun, be one), then print the table, the averages and the chart."""
    config = config_from_args(args)
    from fleetbench.collectives import run as collectives_job  # torch loads once the config is valid
    from fleetbench.train.parallel import DistEnv

    if DistEnv.from_environ().launched:
        return handle_rank(config, console)
    from fleetbench.cli.views.collectives import average_lines, collectives_table

    context = run_context(config, console)
    result = collectives_job.run(config, context)
    console.print(collectives_table(result.view))
    for line in average_lines(result.view):
        console.print(line, markup=False, highlight=False)
    if result.view.chart is not None:
        console.print(f"bus bandwidth chart: {result.view.chart}", markup=False, soft_wrap=True)
    print_record_path(console, result.record, context.results_dir)
    return 0


def handle_rank(config: FleetbenchConfig, console: Console) -> int:
    """One rank under torchrun: its one-line error goes where the launcher reads it."""
    from fleetbench.collectives import run as collectives_job
    from fleetbench.envvars import TRAIN_ERROR_DIR_ENV
    from fleetbench.job import RunContext, SilentProgress
    from fleetbench.progress import ConsoleProgress
    from fleetbench.train.handoff import write_worker_error

    shown = os.environ.get("RANK", "0") == "0"
    context = RunContext.start(config, ConsoleProgress(console) if shown else SilentProgress())
    try:
        collectives_job.run(config, context)
    except UserError as exc:
        write_worker_error(exc, exc.exit_code)
        if os.environ.get(TRAIN_ERROR_DIR_ENV):
            return exc.exit_code
        raise
    except Exception as exc:
        write_worker_error(exc, 1)
        raise
    return 0
