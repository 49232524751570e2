"""`fleetbench report`: the offline report of one run (HTML + PNG panels), optionally compared with another.

fleetbench report RUN                        the run's dashboards, headline figures and plots
fleetbench report RUN --offline              panels from the result records (no Prometheus)
fleetbench report RUN --compare BASE         plus `fleetbench compare BASE RUN` as tables and overlaid plots
                                             (BASE: a run id, a run folder or a baseline name)
Exit status: 0 the report is written; 2 bad input; 3 with --strict, written but the comparison left
figures out (benchmarks not compared, figures on one side only or not judged), each named on stderr.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from fleetbench.cli.options import add_results_dir
from fleetbench.envvars import PROMETHEUS_URL_ENV
from fleetbench.errors import UserError
from fleetbench.results.store import find_run, list_runs
from fleetbench.services.stack import default_stack
from fleetbench.urls import url_from

if TYPE_CHECKING:  # the report and compare packages load matplotlib and scipy: only when a report is built
    from fleetbench.report.comparison import CompareTo


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `report [RUN_ID] [--compare BASE]`."""
    parser = commands.add_parser(
        "report",
        help="render a run's dashboards to PNG and one HTML page",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_id", nargs="?", help="run to report (default: the newest in --results-dir)")
    add_results_dir(parser)
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help=f"Prometheus to query (default: ${PROMETHEUS_URL_ENV} or the local stack)",
    )
    parser.add_argument("--offline", action="store_true", help="render from the result records only")
    group = parser.add_argument_group("comparison")
    group.add_argument(
        "--compare", metavar="BASE", help="add a comparison with BASE: a run id, run folder or baseline name"
    )
    group.add_argument(
        "--allow-mismatch", action="store_true", help="compare runs of other devices or world sizes anyway (marked)"
    )
    group.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 (a partial result) when the comparison leaves figures out, each named on stderr",
    )
    group.add_argument("--config", type=Path, metavar="FILE", help="config whose compare section sets the test")
    group.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="e.g. compare.alpha=0.01"
    )
    parser.set_defaults(handler=handle)


def _run_dir(args: argparse.Namespace) -> Path:
    if args.run_id is not None:  # '' is refused by find_run's rule, never read as "the newest"
        return find_run(args.results_dir, args.run_id)
    runs = list_runs(args.results_dir)
    if not runs:
        raise UserError(f"no runs under {args.results_dir}; run `make demo` first or pass --results-dir")
    return runs[0]


def _compare_to(args: argparse.Namespace, run_dir: Path) -> CompareTo | None:
    """BASE loaded and compared with the run, before anything is written; None without --compare."""
    if args.compare is None:
        if args.config or args.overrides or args.allow_mismatch or args.strict:
            raise UserError(
                "--config, --set, --allow-mismatch and --strict apply to --compare BASE; pass it or drop them"
            )
        return None
    from fleetbench.cli.compare_cmd import require_scipy

    require_scipy()
    from fleetbench.compare.statistics import settings_from
    from fleetbench.config.loader import load_config
    from fleetbench.report.comparison import prepare

    config = load_config(args.config, args.overrides)
    cfg = config.compare
    return prepare(args.compare, run_dir, args.results_dir, settings_from(cfg), args.allow_mismatch, cfg.noise_factor)


def prometheus_url(args: argparse.Namespace) -> str | None:
    """The Prometheus to query, checked where it entered: --prometheus, $FLEETBENCH_PROMETHEUS_URL, else the
    local stack's; None with --offline (a --prometheus given too is still checked)."""
    example = "http://127.0.0.1:9090"
    flag = None if args.prometheus is None else url_from(args.prometheus, "--prometheus", example)
    if args.offline or flag is not None:
        return None if args.offline else flag
    if os.environ.get(PROMETHEUS_URL_ENV):
        return url_from(os.environ[PROMETHEUS_URL_ENV], f"${PROMETHEUS_URL_ENV}", example)
    return default_stack().prometheus_url


def handle(args: argparse.Namespace, console: Console) -> int:
    """Build the report of the run (default: the newest) and print the page's path."""
    url = prometheus_url(args)
    run_dir = _run_dir(args)
    compare_to = _compare_to(args, run_dir)
    from fleetbench.report.build import build_report

    page = build_report(run_dir, url, compare_to)
    console.print(f"report: {page}", markup=False, soft_wrap=True)
    missing = left_out(compare_to) if compare_to is not None else []
    for line in missing:
        console.print(f"warning: left out: {line}", markup=False, highlight=False, soft_wrap=True)
    return PARTIAL_EXIT if missing and args.strict else 0


PARTIAL_EXIT = 3  # docs/exit-status.md: the command finished, but its result leaves something out


def left_out(compare_to: CompareTo) -> list[str]:
    """What the comparison shows but does not judge: benchmarks not compared, figures on one side only
    or excluded, notes of figures left out; one line each."""
    comparison = compare_to.comparison
    lines = [f"benchmark {name} only in base" for name in comparison.only_base]
    lines += [f"benchmark {name} only in new" for name in comparison.only_new]
    for bench in comparison.benchmarks:
        if not bench.compared:
            lines.append(f"benchmark {bench.benchmark} not compared (the runs differ in {', '.join(bench.mismatch)})")
            continue
        lines += [f"{bench.benchmark}: {note}" for note in bench.notes if note.startswith("left out")]
        for row in bench.rows:
            side = "only in new" if row.base is None else "only in base" if row.new is None else row.excluded
            if side:
                lines.append(f"{bench.benchmark} {row.metric} {row.labels}: {side}")
    return lines
