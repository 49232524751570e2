"""`fleetbench results`: read result records back (the one reader everything else uses too)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fleetbench import jsonio
from fleetbench.results.store import DEFAULT_RESULTS_DIR, find_run, list_runs, read_records


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `results list` and `results show RUN_ID`."""
    parser = commands.add_parser("results", help="list runs and show their result records")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR, help="results root")
    sub = parser.add_subparsers(dest="results_command", required=True, metavar="{list,show}")
    sub.add_parser("list", help="runs, newest first").set_defaults(handler=handle_list)
    show = sub.add_parser("show", help="one run's records")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="print the records as JSON Lines")
    show.set_defaults(handler=handle_show)


def handle_list(args: argparse.Namespace, console: Console) -> int:
    """Print one table row per run: benchmarks, overall status, devices, start."""
    table = Table(title=f"runs in {args.results_dir}")
    for column in ("run_id", "benchmarks", "status", "device", "start"):
        table.add_column(column)
    for run_dir in list_runs(args.results_dir):
        records = read_records(run_dir)
        table.add_row(
            run_dir.name,
            ", ".join(sorted({r.benchmark for r in records})),
            "ok" if all(r.status == "ok" for r in records) else "failed",
            ", ".join(sorted({r.device for r in records})),
            min(r.start for r in records).isoformat(),
        )
    console.print(table)
    return 0


def handle_show(args: argparse.Namespace, console: Console) -> int:
    """Print a run's records: a line and the summary of each, or (--json) the records as JSON Lines."""
    records = read_records(find_run(args.results_dir, args.run_id))
    if args.json:
        for record in records:
            print(record.model_dump_json())
        return 0
    for record in records:
        console.print(
            f"[bold]{record.benchmark}[/] rank {record.rank} on {record.host} "
            f"({record.device}, {record.backend}): {record.status} in {record.duration_s:.1f} s"
        )
        console.print(jsonio.dumps(record.summary, indent=2))
    return 0
