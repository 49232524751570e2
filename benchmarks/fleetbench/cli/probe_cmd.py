"""`fleetbench probe`: the timed matmul/copy probe on the local device."""

from __future__ import annotations

import argparse

from rich.console import Console

from fleetbench.cli.flags import Flag, add_flags
from fleetbench.cli.options import add_run_options, config_from_args, print_record_path, run_context

FLAGS = (Flag("--device", "probe.device", "auto, cpu, cuda or mps (default: auto)", example="cpu"),)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `probe` with the run options and --device."""
    parser = commands.add_parser("probe", help="time matmul and copy on this device (achieved FLOP/s, bytes/s)")
    add_run_options(parser)
    add_flags(parser, FLAGS)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Run the probe job, show its table and where its record is."""
    config = config_from_args(args)
    from fleetbench.cli.views.probe import probe_table
    from fleetbench.probe import run as probe_job  # torch loads only when a probe really runs

    context = run_context(config, console)
    result = probe_job.run(config, context)
    console.print(probe_table(result.view))
    print_record_path(console, result.record, context.results_dir)
    return 0
