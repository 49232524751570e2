"""The `fleetbench` command: one CLI, one module per command group; every Make target calls it."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from fleetbench import __version__
from fleetbench.cli import (
    cluster_cmd,
    compare_cmd,
    dashboards_cmd,
    demo_cmd,
    deploy_cmd,
    edge_cmd,
    images_cmd,
    metrics_cmd,
    probe_cmd,
    profile_cmd,
    report_cmd,
    results_cmd,
    stack_cmd,
    trace_cmd,
    train_cmd,
)
from fleetbench.cli.parser import OneLineParser
from fleetbench.errors import UserError
from fleetbench.logs import DEFAULT_LEVEL, LEVELS, LOG_LEVEL_ENV, level_from_env, setup_logging

COMMAND_MODULES = (
    demo_cmd,
    train_cmd,
    probe_cmd,
    profile_cmd,
    trace_cmd,
    edge_cmd,
    report_cmd,
    metrics_cmd,
    results_cmd,
    compare_cmd,
    stack_cmd,
    dashboards_cmd,
    images_cmd,
    deploy_cmd,
    cluster_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global flags, then one subcommand per module of COMMAND_MODULES."""
    parser = OneLineParser(prog="fleetbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"fleetbench {__version__}")
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=level_from_env(),
        help=f"diagnostics shown on stderr (default: ${LOG_LEVEL_ENV}, else {DEFAULT_LEVEL})",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command (`argv`, default sys.argv[1:]) and return its exit status.

    A UserError becomes one `fleetbench: error: ...` line on stderr and its exit code; Ctrl-C 130.
    """
    console = Console(stderr=True)
    try:
        args = build_parser().parse_args(argv)
        setup_logging(args.log_level)
        return int(args.handler(args, console))
    except UserError as exc:
        print(f"fleetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fleetbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
