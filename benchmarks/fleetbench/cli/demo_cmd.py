"""`fleetbench demo`: the main job on the embedded default."""

from __future__ import annotations

import argparse

from rich.console import Console

from fleetbench.cli.options import add_run_options, config_from_args, run_context
from fleetbench.services.stack import default_stack


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo` with the run options."""
    parser = commands.add_parser("demo", help="run every benchmark on the CPU into a local Prometheus")
    add_run_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Run the demo against the local stack (started if needed)."""
    config = config_from_args(args)
    from fleetbench.cli.views.demo import StagesOnConsole, show_outcome
    from fleetbench.demo import run_demo  # torch loads only once the arguments are known good

    stack = default_stack()
    context = run_context(config, console)
    stack.check_ports()  # a port taken by another program is one line, before anything is printed or started
    console.rule("[bold]fleetbench demo[/]: the embedded default (CPU, local Prometheus)")
    console.print(f"Prometheus {stack.prometheus_url}, Pushgateway {stack.pushgateway_url} (loopback)")
    outcome = run_demo(config, stack, context, StagesOnConsole(console))
    show_outcome(console, outcome)
    return 0
