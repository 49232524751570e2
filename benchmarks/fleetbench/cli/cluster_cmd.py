"""`fleetbench cluster up|down`: the local cluster of SSH nodes (containers on 127.0.0.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

DEFAULT_STATE = Path(".fleetbench/cluster")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `cluster up` and `cluster down`."""
    parser = commands.add_parser("cluster", help="local cluster of real SSH nodes for deploy tests and demos")
    sub = parser.add_subparsers(dest="cluster_command", required=True, metavar="{up,down}")
    up = sub.add_parser("up", help="start N nodes and write their inventory")
    up.add_argument("--nodes", type=int, default=3, help="how many nodes (default 3)")
    up.add_argument("--state-dir", type=Path, default=DEFAULT_STATE, help="keys, node folders, inventory")
    up.add_argument(
        "--slurm",
        action="store_true",
        help="node1 the Slurm controller, the rest compute nodes (then `fleetbench deploy slurm`, as make does)",
    )
    up.set_defaults(handler=handle_up)
    down = sub.add_parser("down", help="remove the nodes")
    down.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    down.set_defaults(handler=handle_down)


def handle_up(args: argparse.Namespace, console: Console) -> int:
    """Start the nodes and print the deploy command that targets their inventory."""
    from fleetbench.deploy.cluster import cluster_up
    from fleetbench.progress import ConsoleProgress

    inventory = cluster_up(args.nodes, args.state_dir, slurm=args.slurm, progress=ConsoleProgress(console))
    playbook = "monitoring, then slurm," if args.slurm else "site"
    console.print(f"deploy to it: .venv/bin/fleetbench deploy {playbook} --inventory {inventory}")
    return 0


def handle_down(args: argparse.Namespace, console: Console) -> int:
    """Remove the nodes of the state folder."""
    from fleetbench.deploy.cluster import cluster_down

    removed = cluster_down(args.state_dir)
    console.print(f"cluster: removed {', '.join(sorted(removed)) or 'nothing (no nodes were up)'}")
    return 0
