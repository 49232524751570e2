"""`fleetbench dashboards`: generate grafana/dashboards/*.json from the dashboard model."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from fleetbench.errors import UserError


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `dashboards [--out DIR] [--check]`."""
    parser = commands.add_parser("dashboards", help="generate the Grafana dashboards JSON (or --check it)")
    parser.add_argument("--out", type=Path, default=Path("grafana/dashboards"), help="output folder")
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is not a fresh generation")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Write every dashboard's JSON, or with --check fail (exit 1) when the committed files differ."""
    from fleetbench.dashboards.build import stale, write_all
    from fleetbench.dashboards.registry import DASHBOARDS

    if args.check:
        problems = stale(DASHBOARDS, args.out)
        if problems:
            raise UserError(f"{args.out}: out of date: {', '.join(problems)}; run `make dashboards`", exit_code=1)
        console.print(f"{args.out}: {len(DASHBOARDS)} dashboards up to date")
        return 0
    for path in write_all(DASHBOARDS, args.out):
        console.print(f"wrote {path}")
    return 0
