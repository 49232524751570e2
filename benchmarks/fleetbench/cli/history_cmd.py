"""`fleetbench history METRIC`: a headline metric over the stored runs and baselines, and its steps.

fleetbench history probe_achieved_flop_per_second                     every series of the metric
fleetbench history fleetbench_step_seconds --benchmark train --png h.png
fleetbench history probe_achieved_flop_per_second --label size=256 --format json
Prints one table per series (benchmark, labels and machine class: CPU model, cores, GPU, driver): the
points in commit order (git rev-list --topo-order of the runs' commits in --repo, each commit's
processes together), each step found (change-point detection, PELT with an L1 cost on the log values,
as asv's step detection, moved to a commit boundary), the run and commit where it happened, the
medians before and after and the change; writes the series with the steps marked to a PNG
(default results/history/<metric>.png). Runs whose commit --repo does not hold are left out, said in a
warning. Exit status: 0; 2 bad input or no run holds the metric.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from fleetbench.cli.options import add_results_dir
from fleetbench.envvars import PUSHGATEWAY_ENV
from fleetbench.errors import UserError
from fleetbench.fsutil import check_output_file, refuse_foreign_file

if TYPE_CHECKING:
    from fleetbench.compare.history import Series, Step

FORMATS = ("table", "json")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `history`."""
    history = commands.add_parser(
        "history",
        help="a headline metric over the stored runs, with its steps (change points) named by run and commit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    history.add_argument("metric", metavar="METRIC", help="a headline metric, with or without the fleetbench_ prefix")
    history.add_argument("--benchmark", metavar="NAME", help="only this benchmark's records")
    history.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="only figures with it")
    history.add_argument("--penalty", type=float, default=3.0, metavar="K", help="per step, x sigma x ln n (3)")
    history.add_argument("--png", type=Path, metavar="FILE", help="the plot (default results/history/METRIC.png)")
    history.add_argument(
        "--force", action="store_true", help="replace the --png file even when this command did not write it"
    )
    history.add_argument(
        "--repo",
        type=Path,
        default=None,
        metavar="DIR",
        help="git checkout whose commit graph orders the runs (default: ., by record time where it is none)",
    )
    history.add_argument("--format", default="table", help="table or json (default: table)")
    history.add_argument(
        "--pushgateway", metavar="URL", help=f"push the steps for Grafana (default: ${PUSHGATEWAY_ENV})"
    )
    add_results_dir(history)
    history.set_defaults(handler=handle_history)


def parse_labels(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE pairs; a pair without `=` is a UserError naming it."""
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--label {pair!r} is not accepted; accepted: KEY=VALUE, e.g. --label size=256")
        labels[key] = value
    return labels


def metric_name(name: str) -> str:
    """The catalogue name of a headline metric; a UserError naming the accepted ones otherwise."""
    from fleetbench.catalogue import HEADLINES

    full = name if name.startswith("fleetbench_") else f"fleetbench_{name}"
    known = sorted({m for names in HEADLINES.values() for m in names})
    if full not in known:
        raise UserError(f"metric {name!r} is not a headline metric; accepted: {', '.join(known)}")
    return full


def gateway(args: argparse.Namespace) -> str | None:
    """--pushgateway, else $FLEETBENCH_PUSHGATEWAY (empty: none), checked as a URL where it entered."""
    import os

    from fleetbench.urls import url_from

    value = args.pushgateway or os.environ.get(PUSHGATEWAY_ENV) or None
    if value is None:
        return None
    return url_from(value, "--pushgateway" if args.pushgateway else PUSHGATEWAY_ENV, "http://127.0.0.1:9091")


def _check(args: argparse.Namespace) -> tuple[str, dict[str, str], str | None]:
    if args.format not in FORMATS:
        raise UserError(f"--format {args.format!r} is not accepted; accepted: {', '.join(FORMATS)}")
    if not (args.penalty > 0 and args.penalty < 1e6):
        raise UserError(f"--penalty {args.penalty} is not accepted; accepted: a number above 0")
    if args.png is not None:
        check_output_file(args.png, "--png")
        from fleetbench.report.history_plot import PNG_MARK

        refuse_foreign_file(args.png, "--png", args.force, PNG_MARK)
    if args.repo is None:
        args.repo = Path(".")  # not given: a folder that is no checkout orders by record time, in a warning
    else:
        _check_repo(args.repo)
    return metric_name(args.metric), parse_labels(args.label), gateway(args)


def _check_repo(repo: Path) -> None:
    """A --repo given on the command line must be a git checkout: its commit graph is what was asked for."""
    import subprocess

    if not repo.is_dir():
        why = "does not exist" if not repo.exists() and not repo.is_symlink() else "is not a folder"
        raise UserError(
            f"--repo {repo} {why}; accepted: a git checkout (the folder of the commits the runs were made at)"
        )
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is None or done.returncode != 0:
        raise UserError(
            f"--repo {repo} is no git checkout; accepted: a git checkout (the folder of the commits the runs were made at)"
        )


def step_table(series: Series, found: list[Step]) -> Table:
    """One series' points and steps."""
    from fleetbench.catalogue import spec
    from fleetbench.compare.formats import human, labels_text

    unit = spec(series.metric).unit
    title = (
        f"{series.benchmark} {series.metric} {labels_text(series.labels)} on {series.machine}: "
        f"{len(series.points)} runs, {len({p.commit for p in series.points})} commits"
    )
    table = Table(title=title)
    for column in ("step at run", "commit", "time", "before", "after", "change"):
        table.add_column(column, justify="right" if column in ("before", "after", "change") else "left")
    for step in found:
        table.add_row(step.run_id, step.commit[:12], step.time.isoformat()[:19], human(step.before, unit),
                      human(step.after, unit), f"{step.change_pct:+.1f}%")  # fmt: skip
    if not found:
        table.add_row("no step found", "-", "-", "-", "-", "-")
    return table


def _point(p: Any) -> dict[str, Any]:
    return {"run_id": p.run_id, "commit": p.commit, "time": p.time.isoformat(), "value": p.value, "source": p.source,
            "machine": p.machine}  # fmt: skip


def _step(f: Step) -> dict[str, Any]:
    return {"run_id": f.run_id, "commit": f.commit, "time": f.time.isoformat(), "before": f.before,
            "after": f.after, "change_pct": f.change_pct}  # fmt: skip


def as_json(panels: list[tuple[Series, list[Step]]], png: Path) -> str:
    """The series, their points and steps, as strict JSON."""
    from fleetbench import jsonio

    payload = [
        {
            "benchmark": s.benchmark,
            "metric": s.metric,
            "labels": s.labels,
            "machine": s.machine,
            "points": [_point(p) for p in s.points],
            "steps": [_step(f) for f in found],
        }
        for s, found in panels
    ]
    return jsonio.dumps({"series": payload, "png": str(png)}, indent=1) + "\n"


def handle_history(args: argparse.Namespace, console: Console) -> int:
    """Read the series, find the steps, print the tables (or JSON), write the PNG."""
    import sys

    from fleetbench.cli.compare_cmd import require_scipy
    from fleetbench.compare import history
    from fleetbench.report.history_plot import history_png
    from fleetbench.results.store import check_results_root

    metric, labels, url = _check(args)
    require_scipy()
    root = check_results_root(Path(args.results_dir))  # a file, a loop or no folder is said as such
    found = history.collect(root, metric, args.benchmark, labels, args.repo)
    if not found.series:
        narrowed = f" for {args.benchmark}" if args.benchmark else ""
        raise UserError(f"no successful run under {root} holds {metric}{narrowed} {labels or ''}".rstrip())
    panels = [(series, history.steps(series, args.penalty)) for series in found.series]
    png = args.png or root / "history" / f"{metric.removeprefix('fleetbench_')}.png"
    history_png(panels, png)  # a plot that cannot be written is one error line, before any warning
    for warning in found.warnings:
        console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if args.format == "json":
        sys.stdout.write(as_json(panels, png))
    else:
        out = Console(width=None if sys.stdout.isatty() else 200)  # piped: whole run ids and commits
        for series, steps in panels:
            out.print(step_table(series, steps))
    console.print(f"plot: {png}", markup=False)
    if url:
        from fleetbench.compare import publish
        from fleetbench.results.store import default_spool_dir

        problem = publish.push(publish.steps_found(metric, panels), url, default_spool_dir(root))
        if problem:
            console.print(f"warning: {problem}", markup=False, highlight=False, soft_wrap=True)
    return 0
