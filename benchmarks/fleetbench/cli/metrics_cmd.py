"""`fleetbench metrics`: the catalogue, and flushing the spool of pushes that did not get through."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fleetbench import jsonio
from fleetbench.config.schema import validate_pushgateway_url
from fleetbench.errors import UserError
from fleetbench.results.store import DEFAULT_RESULTS_DIR, SPOOL_FOLDER, default_spool_dir
from fleetbench.telemetry.catalogue import CATALOGUE
from fleetbench.telemetry.push import PushPolicy, flush_spool
from fleetbench.telemetry.spool import Spool

log = logging.getLogger(__name__)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `metrics catalogue` and `metrics flush`."""
    parser = commands.add_parser("metrics", help="metric catalogue; flush spooled pushes")
    sub = parser.add_subparsers(dest="metrics_command", required=True, metavar="{catalogue,flush}")
    catalogue = sub.add_parser("catalogue", help="list every metric the suite exports")
    catalogue.add_argument("--json", action="store_true", help="machine-readable output")
    catalogue.set_defaults(handler=handle_catalogue)
    flush = sub.add_parser("flush", help="push spooled metrics; remove only what the Pushgateway accepted")
    flush.add_argument(
        "--results-dir", type=Path, default=DEFAULT_RESULTS_DIR, help=f"results root (spool in {SPOOL_FOLDER})"
    )
    flush.add_argument("--spool-dir", type=Path, help=f"spool folder (default: RESULTS_DIR/{SPOOL_FOLDER})")
    flush.add_argument(
        "--pushgateway", metavar="URL", help="push to this gateway instead of the one each entry was meant for"
    )
    flush.add_argument("--timeout", type=float, default=5.0, help="seconds per attempt (default 5)")
    flush.set_defaults(handler=handle_flush)


def handle_catalogue(args: argparse.Namespace, console: Console) -> int:
    """Print every catalogue metric on stdout, as a table or (--json) a list of objects."""
    if args.json:
        print(
            jsonio.dumps(
                [
                    {"name": s.name, "type": s.kind, "unit": s.unit, "help": s.help, "labels": list(s.label_names)}
                    for s in CATALOGUE.values()
                ],
                indent=2,
            )
        )
        return 0
    table = Table(title=f"{len(CATALOGUE)} metrics")
    table.add_column("name", no_wrap=True)
    for column in ("type", "unit", "labels (after the common ones)", "help"):
        table.add_column(column)
    for s in CATALOGUE.values():
        table.add_row(s.name, s.kind, s.unit, ", ".join(s.labels), s.help)
    Console().print(table)  # a listing: stdout, so it pipes
    return 0


def handle_flush(args: argparse.Namespace, console: Console) -> int:
    """Push the spooled entries; exit 1 while any remain spooled."""
    gateway = args.pushgateway
    if gateway:
        try:
            gateway = validate_pushgateway_url(gateway)
        except ValueError as exc:
            raise UserError(f"--pushgateway {gateway!r} {exc}") from None
    if not 0 < args.timeout <= 120:
        raise UserError(f"--timeout {args.timeout} is not accepted; use seconds in (0, 120]")
    spool_dir = args.spool_dir or default_spool_dir(args.results_dir)
    if args.spool_dir is not None and not spool_dir.is_dir():
        raise UserError(f"spool dir {spool_dir} does not exist")
    report = flush_spool(Spool(spool_dir), PushPolicy(timeout_s=args.timeout, retries=2, backoff_s=0.5), gateway)
    console.print(f"spool {spool_dir}: delivered {report.delivered}, still spooled {report.failed}")
    for error in report.errors or []:
        log.warning("not delivered: %s", error)
    return 1 if report.failed else 0
