"""`fleetbench report`: the offline report of one run (HTML + PNG panels)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console

from fleetbench.errors import UserError
from fleetbench.results.store import DEFAULT_RESULTS_DIR, find_run, list_runs
from fleetbench.services.stack import default_stack


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `report [RUN_ID]`."""
    parser = commands.add_parser("report", help="render a run's dashboards to PNG and one HTML page")
    parser.add_argument("run_id", nargs="?", help="run to report (default: the newest in --results-dir)")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR, help="results root")
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="Prometheus to query (default: $FLEETBENCH_PROMETHEUS_URL or the local stack)",
    )
    parser.add_argument("--offline", action="store_true", help="render from the result records only")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    """Build the report of the run (default: the newest) and print the page's path."""
    if args.run_id:
        run_dir = find_run(args.results_dir, args.run_id)
    else:
        runs = list_runs(args.results_dir)
        if not runs:
            raise UserError(f"no runs under {args.results_dir}; run `make demo` first or pass --results-dir")
        run_dir = runs[0]
    url = (
        None
        if args.offline
        else (args.prometheus or os.environ.get("FLEETBENCH_PROMETHEUS_URL") or default_stack().prometheus_url)
    )
    from fleetbench.report.build import build_report

    page = build_report(run_dir, url)
    console.print(f"report: {page}")
    return 0
