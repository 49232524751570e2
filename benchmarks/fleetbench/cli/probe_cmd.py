"""`fleetbench probe`: the timed matmul/copy probe on the local device."""

from __future__ import annotations

import argparse

from rich.console import Console

from fleetbench.cli.options import add_run_options, config_from_args, print_record_path


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `probe` with the run options and --device."""
    parser = commands.add_parser("probe", help="time matmul and copy on this device (achieved FLOP/s, bytes/s)")
    add_run_options(parser)
    parser.add_argument("--device", help="auto, cpu, cuda or mps (default: auto)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Run the probe job and print where its record is."""
    config = config_from_args(args, {"probe.device": (args.device, "--device")})
    from fleetbench.probe import run as probe_job  # torch loads only when a probe really runs

    record = probe_job.run(config, console)
    print_record_path(console, config, record)
    return 0
