"""`fleetbench stack`: the local Prometheus and Pushgateway (real binaries, loopback only)."""

from __future__ import annotations

import argparse

from rich.console import Console

from fleetbench.services.stack import default_stack


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `stack up`, `stack down` and `stack status`."""
    parser = commands.add_parser("stack", help="start/stop the local Prometheus and Pushgateway on 127.0.0.1")
    sub = parser.add_subparsers(dest="stack_command", required=True, metavar="{up,down,status}")
    sub.add_parser("up", help="start both (no-op when running)").set_defaults(handler=handle_up)
    sub.add_parser("down", help="stop both").set_defaults(handler=handle_down)
    sub.add_parser("status", help="say what runs where").set_defaults(handler=handle_status)


def handle_up(args: argparse.Namespace, console: Console) -> int:
    """Start both services (or reuse running ones) and print their URLs."""
    stack = default_stack().up()
    console.print(
        f"Prometheus  {stack.prometheus_url}\nPushgateway {stack.pushgateway_url}\nstate and logs in {stack.state_dir}"
    )
    return 0


def handle_down(args: argparse.Namespace, console: Console) -> int:
    """Stop the services this stack started and say which."""
    stopped = default_stack().down()
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def handle_status(args: argparse.Namespace, console: Console) -> int:
    """Print each service, whether it is up, and its URL."""
    stack = default_stack()
    for service, url in (("prometheus", stack.prometheus_url), ("pushgateway", stack.pushgateway_url)):
        console.print(f"{service:12} {'up' if stack.running(service) else 'down':5} {url}")
    return 0
