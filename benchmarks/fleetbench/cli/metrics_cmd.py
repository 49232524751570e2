"""`fleetbench metrics`: the catalogue, and flushing the spool of pushes that did not get through."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fleetbench import jsonio
from fleetbench.catalogue import CATALOGUE
from fleetbench.cli.options import add_results_dir
from fleetbench.errors import UserError
from fleetbench.results.store import DEFAULT_RESULTS_DIR, SPOOL_FOLDER, default_spool_dir
from fleetbench.telemetry.push import PushPolicy, flush_spool
from fleetbench.telemetry.spool import REJECTED_FOLDER, RejectedEntry, Spool
from fleetbench.urls import url_from

log = logging.getLogger(__name__)

FLUSH_DESCRIPTION = (
    "Push every spooled entry to the Pushgateway it was meant for (or --pushgateway) and remove the "
    "ones it accepted. Each entry file is checked first (JSON fields and types, grouping key, the "
    "exposition through prometheus_client's parser); one that fails is reported in a warning line "
    f"naming the file and what is wrong, and moved to SPOOL/{REJECTED_FOLDER}/, never deleted. "
    "Exit status: 0 when every entry was delivered (or none was spooled); 1 when some entries stay "
    "spooled (the gateway did not take them: flush again later) or were rejected (they need a look, "
    "so a script or `make flush` must not read the flush as clean, even when only bad entries were "
    "there); 2 for bad arguments or a spool that cannot be read."
)


def _folder_arg(text: str) -> Path:
    """A folder argument; an empty one is refused, not read as the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not a folder; name the folder")
    return Path(text)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `metrics catalogue` and `metrics flush`."""
    parser = commands.add_parser("metrics", help="metric catalogue; flush spooled pushes")
    sub = parser.add_subparsers(dest="metrics_command", required=True, metavar="{catalogue,flush}")
    catalogue = sub.add_parser("catalogue", help="list every metric the suite exports")
    catalogue.add_argument("--json", action="store_true", help="machine-readable output")
    catalogue.set_defaults(handler=handle_catalogue)
    flush = sub.add_parser(
        "flush",
        help="push spooled metrics; remove only what the Pushgateway accepted",
        description=FLUSH_DESCRIPTION,
    )
    add_results_dir(flush, f"results root, its spool in {SPOOL_FOLDER}", default=None, kind=_folder_arg)
    flush.add_argument("--spool-dir", type=_folder_arg, help=f"spool folder (default: RESULTS_DIR/{SPOOL_FOLDER})")
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


def _flush_gateway(url: str | None) -> str | None:
    return None if url is None else url_from(url, "--pushgateway", "http://127.0.0.1:9091")


def _existing_folder(path: Path, flag: str) -> Path:
    if not path.exists():
        raise UserError(f"{flag} {path} does not exist; pass the folder the runs wrote to")
    if not path.is_dir():
        raise UserError(f"{flag} {path} is not a folder; pass the folder the runs wrote to")
    return path


def _spool_dir(args: argparse.Namespace) -> Path:
    """The spool to flush: --spool-dir, else RESULTS_DIR/.spool; a missing results root is an error only when named."""
    if args.spool_dir is not None:
        return _existing_folder(args.spool_dir, "spool dir")
    if args.results_dir is not None:
        _existing_folder(args.results_dir, "--results-dir")
    spool_dir = default_spool_dir(args.results_dir or DEFAULT_RESULTS_DIR)
    if spool_dir.exists() and not spool_dir.is_dir():
        raise UserError(f"spool dir {spool_dir} is not a folder; move it away (runs spool there)")
    return spool_dir


def _reject(spool: Spool, bad: list[RejectedEntry]) -> None:
    """Move each bad entry file into the spool's rejected/ folder, one warning line each."""
    if bad:
        spool.prepare_rejected()  # a UserError here moves nothing
    for rejected in bad:
        try:
            target = spool.reject(rejected.path)
        except OSError as exc:
            log.warning("rejected %s: %s; it stays in place (%s)", rejected.path, rejected.reason, exc.strerror or exc)
            continue
        if target is not None:
            log.warning("rejected %s: %s; moved to %s", rejected.path, rejected.reason, target)


def handle_flush(args: argparse.Namespace, console: Console) -> int:
    """Move bad entries aside, push the rest; exit 1 while any remain spooled or any were rejected."""
    gateway = _flush_gateway(args.pushgateway)
    if not 0 < args.timeout <= 120:
        raise UserError(f"--timeout {args.timeout} is not accepted; use seconds in (0, 120]")
    spool = Spool(_spool_dir(args))
    _good, bad = spool.scan()
    _reject(spool, bad)
    report = flush_spool(spool, PushPolicy(timeout_s=args.timeout, retries=2, backoff_s=0.5), gateway)
    summary = f"spool {spool.directory}: delivered {report.delivered}, still spooled {report.failed}"
    if bad:
        summary += f", rejected {len(bad)} (moved to {spool.rejected_dir})"
    console.print(summary, markup=False, soft_wrap=True)
    for error in report.errors or []:
        log.warning("not delivered: %s", error)
    return 1 if report.failed or bad else 0
