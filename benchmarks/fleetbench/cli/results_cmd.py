"""`fleetbench results`: read result records back (the one reader everything else uses too)."""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleetbench import jsonio
from fleetbench.cli.options import add_results_dir, also_after
from fleetbench.compare.validity import ACCEPTED, bad_value, figure_name
from fleetbench.errors import UserError
from fleetbench.results.store import (
    RECORDS_FILE,
    check_results_root,
    find_run,
    list_runs,
    read_records,
)

log = logging.getLogger(__name__)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `results list` and `results show RUN_ID`."""
    parser = commands.add_parser("results", help="list runs and show their result records")
    add_results_dir(parser)
    sub = parser.add_subparsers(dest="results_command", required=True, metavar="{list,show}")
    listing = sub.add_parser("list", help="runs, newest first")
    listing.set_defaults(handler=handle_list)
    show = sub.add_parser("show", help="one run's records")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="print the records as JSON Lines")
    show.set_defaults(handler=handle_show)
    also_after(parser, listing, show)


def handle_list(args: argparse.Namespace, console: Console) -> int:
    """Print one table row per run: benchmarks, overall status, devices, start.

    A run whose records cannot be read is left out with one warning naming the file and line; the
    others are listed (exit 0). A results folder that does not exist is a UserError.
    """
    check_results_root(args.results_dir)
    table = Table(title=f"runs in {args.results_dir}")
    for column in ("run_id", "benchmarks", "status", "device", "start"):
        table.add_column(column)
    for run_dir in list_runs(args.results_dir):
        try:
            records = read_records(run_dir)
        except UserError as exc:
            log.warning("run %s left out: %s", run_dir.name, exc)
            continue
        if not records:
            log.warning("run %s left out: %s holds no records", run_dir.name, run_dir / RECORDS_FILE)
            continue
        table.add_row(
            escape(run_dir.name),
            escape(", ".join(sorted({r.benchmark for r in records}))),
            "ok" if all(r.status == "ok" for r in records) else "failed",
            escape(", ".join(sorted({r.device for r in records}))),
            min(_utc(r.start) for r in records).isoformat(),
        )
    console.print(table)
    return 0


def _utc(moment: datetime) -> datetime:
    """A record's time as UTC (a hand-written record may carry no zone: it is taken as UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def handle_show(args: argparse.Namespace, console: Console) -> int:
    """Print a run's records: a line and the summary of each, or (--json) the records as JSON Lines."""
    run_dir = find_run(args.results_dir, args.run_id)
    records = read_records(run_dir)
    if not records:
        raise UserError(f"run {args.run_id!r} holds no records: {run_dir / RECORDS_FILE} is empty")
    if args.json:
        for record in records:
            print(record.model_dump_json())
        return 0
    for record in records:
        console.print(
            f"[bold]{escape(record.benchmark)}[/] rank {record.rank} on {escape(record.host)} "
            f"({escape(record.device)}, {escape(record.backend)}): {record.status} in {record.duration_s:.1f} s"
        )
        console.print(jsonio.dumps(record.summary, indent=2), markup=False)
        for figure in record.headline:  # shown as stored, flagged: compare refuses such a figure
            bad = bad_value(figure)
            if bad is not None:
                console.print(
                    f"warning: {figure_name(record.benchmark, figure)} has the value {bad[0]!r}{bad[1]}, no "
                    f"measurement (accepted: {ACCEPTED}); compare and baseline set refuse this run",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
    return 0
