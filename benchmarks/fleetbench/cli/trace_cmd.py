"""`fleetbench trace summarize PATH...`: the summary of any PyTorch profiler trace, one rank or many;
`trace diff A B`: what changed between two; `trace critical-path PATH`: the critical path of one step."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from fleetbench.cli.flags import Flag, add_flags
from fleetbench.cli.options import add_run_options, config_from_args, print_record_path, run_context
from fleetbench.fsutil import check_writable_dir

if TYPE_CHECKING:
    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.profile.trace.comm import CommRules

FORMATS = ("table", "md", "json")


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`, else one line saying which."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    return whole


_positive = _at_least(1)
_whole = _at_least(0)


SUMMARIZE_FLAGS = (
    Flag(
        "--comm",
        "trace.comm",
        "which kernels are communication: fleetbench (default; config trace.comm): by what they do, "
        "NCCL/RCCL, DeepEP, all-to-all, NVSHMEM/multimem, custom all-reduce (docs/trace.md); hta: HTA's rule, "
        "`nccl` in the name",
        example="hta",
        choices=("fleetbench", "hta"),
    ),
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `trace summarize`."""
    trace = commands.add_parser("trace", help="summarise PyTorch profiler traces: breakdown, overlap, straggler")
    sub = trace.add_subparsers(dest="trace_command", required=True, metavar="{summarize,diff,critical-path}")
    summarize = sub.add_parser(
        "summarize",
        help="per rank and step: compute/communication/memory/idle, overlap, top kernels and ops, launch gaps; "
        "across ranks: the straggler and a PNG",
    )
    summarize.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a trace (.json or .json.gz), several, or a folder of rank traces "
        "(rank-<N>.*.json[.gz], *.pt.trace.json[.gz], trace.json[.gz])",
    )
    summarize.add_argument(
        "--window",
        choices=("steps", "trace"),
        default="steps",
        help="steps (default, as HTA): the ProfilerStep windows without the last step when there are 2 or more; "
        "trace: every event",
    )
    add_flags(summarize, SUMMARIZE_FLAGS)
    summarize.add_argument("--format", choices=FORMATS, default="table", help="table (default), md or json")
    summarize.add_argument("--json", action="store_true", help="the same as --format json: strict JSON on stdout")
    summarize.add_argument("--top", type=_positive, default=10, help="kernels and ops listed per rank (default 10)")
    summarize.add_argument(
        "--out-dir", type=Path, help="where the PNG goes (default: the folder given, else the first trace's folder)"
    )
    summarize.add_argument("--no-chart", action="store_true", help="do not draw the per-rank PNG")
    summarize.add_argument("--record", action="store_true", help="also write a result record and metrics per rank")
    add_run_options(summarize)
    summarize.set_defaults(handler=handle_summarize)
    diff = sub.add_parser(
        "diff",
        help="kernels and CPU ops added, removed or changed in count and time from trace A to trace B (HTA's TraceDiff)",
    )
    for side in ("A", "B"):
        diff.add_argument(
            side.lower(),
            type=Path,
            metavar=side,
            help=f"side {side}: a trace (.json or .json.gz), a folder of rank traces, or a run folder with profile/",
        )
    diff.add_argument(
        "--window", choices=("steps", "trace"), default="steps", help="steps (default, as HTA) or trace: every event"
    )
    diff.add_argument("--top", type=_positive, default=20, help="rows listed (default 20), largest time change first")
    diff.add_argument("--format", choices=FORMATS, default="table", help="table (default), md or json")
    diff.add_argument("--json", action="store_true", help="the same as --format json")
    diff.set_defaults(handler=handle_diff)
    critical = sub.add_parser(
        "critical-path",
        help="the critical path of one step (HTA's critical path analysis): its length, its time by kind "
        "(CPU op, runtime, launch delay, kernel, communication, gaps, syncs), the ops and kernels on it",
    )
    critical.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a trace (.json or .json.gz), or a folder of rank traces with --rank",
    )
    critical.add_argument("--rank", type=_whole, help="the rank whose trace to read (needed when several are given)")
    critical.add_argument(
        "--step", type=_whole, help="K of ProfilerStep#K (default: the first step; a trace without steps: all of it)"
    )
    critical.add_argument(
        "--comm",
        choices=("fleetbench", "hta"),
        default="fleetbench",
        help="which kernels are communication: fleetbench (default): by what they do (docs/trace.md); "
        "hta: HTA's rule, `nccl` in the name",
    )
    critical.add_argument("--top", type=_positive, default=15, help="ops and kernels listed (default 15)")
    critical.add_argument("--format", choices=FORMATS, default="table", help="table (default), md or json")
    critical.add_argument("--json", action="store_true", help="the same as --format json")
    critical.add_argument("--png", type=Path, help="also draw the step's timeline with the path on it to this PNG")
    critical.set_defaults(handler=handle_critical_path)


def handle_critical_path(args: argparse.Namespace, console: Console) -> int:
    """Print the critical path of one step of one rank's trace; --png draws it on the step's timeline."""
    from fleetbench.cli.views.trace import print_critical_path
    from fleetbench.profile.trace.comm import CommRules
    from fleetbench.profile.trace.critical import critical_path, trace_of_rank

    if args.png is not None:
        check_writable_dir(args.png.parent, "--png folder", "--png")
    result = critical_path(trace_of_rank(list(args.paths), args.rank), args.step, CommRules(args.comm))
    if args.png is not None:
        from fleetbench.profile.trace.critical_chart import draw_critical_path

        draw_critical_path(result, args.png)
    if args.json or args.format == "json":
        print(result.to_json())
    else:
        print_critical_path(Console(width=None if sys.stdout.isatty() else 160), result, args.format, args.top)
    return 0


def handle_diff(args: argparse.Namespace, console: Console) -> int:
    """Print what changed from A to B: every changed name in JSON, the `--top` largest in tables."""
    from fleetbench.cli.views.trace import print_diff
    from fleetbench.profile.trace.diff import diff_traces

    result = diff_traces(args.a, args.b, args.window)
    if args.json or args.format == "json":
        print(result.to_json())
    else:
        print_diff(Console(width=None if sys.stdout.isatty() else 160), result, args.format, args.top)
    return 0


def comm_rules(config: FleetbenchConfig) -> CommRules:
    """The communication rules the config's `trace` section asks for."""
    from fleetbench.profile.trace.comm import CommRules

    return CommRules(config.trace.comm, config.trace.comm_patterns)


def handle_summarize(args: argparse.Namespace, console: Console) -> int:
    """Summarise the traces on stdout (tables, Markdown or JSON); --record makes it a run with records."""
    from fleetbench.cli.views.trace import print_report  # matplotlib loads only when a handler runs
    from fleetbench.profile.trace.report import build_report

    fmt = "json" if args.json else args.format
    config = config_from_args(args)  # a bad config fails before any output
    context = run_context(config, console) if args.record else None
    if context is not None:  # a results folder that cannot be written is refused before the work
        check_writable_dir(context.run_dir, "results dir", "--results-dir")
    report = build_report(
        list(args.paths),
        args.window,
        args.top,
        args.out_dir,
        chart=not args.no_chart,
        one_trace_per_rank=args.record,
        rules=comm_rules(config),
    )
    records = []
    if context is not None:
        from fleetbench.profile.jobs.trace import TraceSettings, record_job

        settings = TraceSettings(
            paths=[str(p) for p in args.paths], window=args.window, top=args.top, comm=config.trace.comm
        )
        records = record_job(report, settings)(config, context).records
    if fmt == "json":
        print(report.to_json())
    else:
        print_report(Console(width=None if sys.stdout.isatty() else 160), report, fmt)
    for record in records:
        assert context is not None
        print_record_path(console, record, context.results_dir)
    return 0
