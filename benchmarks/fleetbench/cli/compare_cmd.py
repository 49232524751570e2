"""`fleetbench compare` and `fleetbench baseline`: runs side by side, significance, the CI gate.

fleetbench compare BASE NEW [NEW ...]               run ids, run folders or baseline names
fleetbench compare --baseline main NEW              against a named baseline
fleetbench compare A B --fail-on-regression 5       exit 1 when a figure is significantly >5 % worse
fleetbench compare A B --format md --out cmp.md     a pull-request comment (also csv, json)
fleetbench baseline set main RUN | list | rm main
Exit status: 0 no regression, 1 regression (each named), 2 bad input or nothing comparable.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fleetbench.cli.options import add_results_dir
from fleetbench.config.loader import load_config
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError

if TYPE_CHECKING:  # the compare package loads scipy: only when a comparison runs
    from fleetbench.compare.gate import Regression
    from fleetbench.compare.matching import Comparison

FORMATS = ("table", "md", "csv", "json")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `compare` and `baseline set|list|rm`."""
    compare = commands.add_parser(
        "compare",
        help="compare runs: headline figures, change with CI, verdict; a CI gate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("runs", nargs="+", metavar="RUN", help="BASE NEW [NEW ...], or NEW ... with --baseline")
    compare.add_argument("--baseline", metavar="NAME", help="compare against this baseline")
    compare.add_argument("--format", default="table", help=f"output: {', '.join(FORMATS)} (default: table)")
    compare.add_argument("--out", type=Path, metavar="FILE", help="write the output here instead of stdout")
    compare.add_argument(
        "--fail-on-regression",
        type=float,
        metavar="PCT",
        help="exit 1 when a matched figure is significantly worse by more than PCT percent",
    )
    compare.add_argument(
        "--allow-mismatch", action="store_true", help="compare runs of other devices or world sizes anyway (marked)"
    )
    compare.add_argument("--config", type=Path, metavar="FILE", help="config with a compare section")
    compare.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="e.g. compare.alpha=0.01"
    )
    add_results_dir(compare)
    compare.set_defaults(handler=handle_compare)

    baseline = commands.add_parser("baseline", help="named baselines: set, list, rm")
    add_results_dir(baseline)
    sub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="{set,list,rm}")
    set_ = sub.add_parser("set", help="keep a run's records as baseline NAME (replaces an older one)")
    set_.add_argument("name")
    set_.add_argument("run", metavar="RUN", help="run id or run folder")
    set_.set_defaults(handler=handle_baseline_set)
    sub.add_parser("list", help="baselines and the runs they came from").set_defaults(handler=handle_baseline_list)
    rm = sub.add_parser("rm", help="delete baseline NAME")
    rm.add_argument("name")
    rm.set_defaults(handler=handle_baseline_rm)


def require_scipy() -> None:
    """The statistics of a comparison need scipy, the `compare` extra; say so in one line without it."""
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise UserError(
            "comparing runs needs scipy: pip install 'fleetbench[compare]' (make setup installs it)"
        ) from None


def _config(args: argparse.Namespace) -> FleetbenchConfig:
    flags = {
        "run.results_dir": (str(args.results_dir) if args.results_dir else None, "--results-dir"),
        "compare.fail_on_regression_pct": (args.fail_on_regression, "--fail-on-regression"),
    }
    config: FleetbenchConfig = load_config(args.config, args.overrides, flags)
    return config


def write_output(text: str, out: Path | None) -> None:
    """To stdout, or atomically to `out` (a reader never sees half a file)."""
    if out is None:
        sys.stdout.write(text)
        return
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; pass a file path")
    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent if str(out.parent) else ".", prefix=f".{out.name}-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, out)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write ({exc.strerror or exc})") from None


def render_table_text(comparisons: list[Comparison], failures: list[Regression], width: int = 160) -> str:
    """The terminal tables as plain text, for --out with the table format."""
    from fleetbench.compare import display

    console = Console(record=True, width=width, file=io.StringIO())
    display.show(console, comparisons, failures)
    return console.export_text()


def handle_compare(args: argparse.Namespace, console: Console) -> int:
    """Compare BASE with each NEW; print or write the tables; exit 1 on a regression beyond the gate."""
    from fleetbench.compare import display, formats
    from fleetbench.compare.gate import regressions
    from fleetbench.compare.matching import compare_runs, load_baseline, load_run
    from fleetbench.compare.statistics import settings_from

    if args.format not in FORMATS:
        raise UserError(f"--format {args.format!r} is not accepted; accepted: {', '.join(FORMATS)}")
    require_scipy()
    config = _config(args)
    cfg = config.compare
    root = config.run.results_dir
    if args.baseline is not None:
        base, news = load_baseline(args.baseline, root), [load_run(r, root) for r in args.runs]
    elif len(args.runs) < 2:
        raise UserError("compare needs BASE and at least one NEW run (or --baseline NAME and a NEW run)")
    else:
        base, news = load_run(args.runs[0], root), [load_run(r, root) for r in args.runs[1:]]
    settings = settings_from(cfg)
    comparisons = [compare_runs(base, new, settings, args.allow_mismatch) for new in news]
    if not any(b.compared for c in comparisons for b in c.benchmarks):
        mismatches = "; ".join(f"{b.benchmark}: {formats.mismatch_text(b)}" for c in comparisons for b in c.benchmarks)
        raise UserError(f"nothing comparable ({mismatches}); --allow-mismatch compares anyway, marked")
    failures = regressions(comparisons, cfg.fail_on_regression_pct, cfg.fail_thresholds_pct)
    if args.format == "table" and args.out is None:
        display.show(Console(width=None if sys.stdout.isatty() else 160), comparisons, failures)
    else:
        text = {
            "table": lambda: render_table_text(comparisons, failures),
            "md": lambda: formats.to_markdown(comparisons, failures),
            "csv": lambda: formats.to_csv(comparisons),
            "json": lambda: formats.to_json(comparisons, failures),
        }[args.format]()
        write_output(text, args.out)
    if failures:
        console.print(
            f"{len(failures)} regression(s) beyond the threshold: " + "; ".join(f.describe() for f in failures),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return 0


def _root(args: argparse.Namespace) -> Path:
    from fleetbench.results.store import DEFAULT_RESULTS_DIR

    return Path(args.results_dir) if args.results_dir is not None else DEFAULT_RESULTS_DIR


def handle_baseline_set(args: argparse.Namespace, console: Console) -> int:
    """Keep the records of RUN as baseline NAME."""
    from fleetbench.compare.baselines import check_name, set_baseline
    from fleetbench.compare.matching import load_run

    root = _root(args)
    check_name(args.name)
    run = load_run(args.run, root)
    if run.label.startswith("baseline "):
        raise UserError(f"{args.run!r} is a baseline, not a run; pass a run id or run folder")
    path = set_baseline(root, args.name, run.run_id, Path(args.run), run.records)
    console.print(f"baseline {args.name} -> run {run.run_id} ({len(run.records)} records): {path}", markup=False)
    return 0


def handle_baseline_list(args: argparse.Namespace, console: Console) -> int:
    """One row per baseline: the run, when it was set, its benchmarks."""
    from fleetbench.compare.baselines import list_baselines, read_baseline

    root = _root(args)
    table = Table(title=f"baselines in {root}")
    for column in ("name", "run_id", "set at", "benchmarks"):
        table.add_column(column)
    for name in list_baselines(root):
        baseline = read_baseline(root, name)
        benchmarks = ", ".join(sorted({r.benchmark for r in baseline.records}))
        table.add_row(name, baseline.run_id, baseline.set_at[:19], benchmarks)
    Console().print(table)  # a listing: stdout, so it pipes
    return 0


def handle_baseline_rm(args: argparse.Namespace, console: Console) -> int:
    """Delete baseline NAME."""
    from fleetbench.compare.baselines import remove_baseline

    path = remove_baseline(_root(args), args.name)
    console.print(f"removed {path}", markup=False)
    return 0
