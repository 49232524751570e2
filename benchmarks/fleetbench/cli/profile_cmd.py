"""`fleetbench profile`, `fleetbench ncu run|summarize|permissions`, `fleetbench roofline`: the profiling job."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from fleetbench import jsonio
from fleetbench.cli.flags import Flag, add_flags
from fleetbench.cli.options import add_run_options, config_from_args, print_record_path, run_context
from fleetbench.errors import UserError

if TYPE_CHECKING:
    from fleetbench.profile.classify import Thresholds

log = logging.getLogger(__name__)

# `ncu summarize` without --config or --set validates no config: it uses these, the config's defaults
# (profile.top; profile.thresholds.* are classify.Thresholds' defaults), which a test holds equal.
# Building the config's models would cost a report reader more than the rest of its start-up.
SUMMARY_TOP = 15
# `ncu summarize --strict` on a report cut short: its own status, apart from bad input (2) and failures (1).
EXIT_CUT = 3
PEAK_HELP = (
    "peaks of a GPU the datasheet table lacks: dram=GB/s,fp32=TFLOPS,tensor=TFLOPS "
    "(e.g. dram=864GB/s,fp32=91.6TFLOPS,tensor=366TFLOPS)"
)


def _program(values: list[str]) -> list[str]:
    return values[1:] if values[:1] == ["--"] else values


def _program_or_none(values: list[str], _flag: str) -> list[str] | None:
    return _program(values) or None


PROFILE_FLAGS = (
    Flag("--workload", "profile.workload", "auto, train, linear, script or module (default: auto)", example="linear"),
    Flag("--script", "profile.script", "profile this Python file (args after --)", example="train.py", type=Path),
    Flag("--module", "profile.module", "profile this module, like python -m (args after --)", example="json.tool"),
    Flag("--device", "profile.device", "auto, cpu or cuda (default: auto)", example="cpu"),
    Flag(
        "program_args",
        "profile.args",
        "arguments of the script or module",
        example="--steps=2",
        metavar="-- ARGS",
        convert=_program_or_none,
    ),
)
NCU_RUN_FLAGS = (
    Flag(
        "--report",
        "profile.ncu.report",
        "report path (default: RESULTS/RUN_ID/ncu/report.ncu-rep)",
        example="out.ncu-rep",
        type=Path,
    ),
    Flag(
        "--kernel-name",
        "profile.ncu.kernel_name",
        "ncu --kernel-name filter (NAME or regex:EXPR)",
        example="regex:gemm",
    ),
    Flag("--launch-skip", "profile.ncu.launch_skip", "ncu --launch-skip", example="2", type=int),
    Flag("--launch-count", "profile.ncu.launch_count", "ncu --launch-count", example="5", type=int),
    Flag(
        "--clock-control",
        "profile.ncu.clock_control",
        "ncu --clock-control: base (default), none or reset",
        example="none",
    ),
    Flag("--nvtx-include", "profile.ncu.nvtx_include", "ncu --nvtx --nvtx-include filter", example="step/"),
    Flag(
        "program",
        "profile.ncu.program",
        "program to profile (default: the profile workload, via fleetbench.profile.ncu.target)",
        example="python3",
        metavar="-- PROGRAM",
        convert=_program_or_none,
    ),
)
GPU_FLAG_HELP = "the GPU the report was captured on, where it says only 'device 0' (CSV, log)"
NCU_SUMMARIZE_FLAGS = (
    Flag("--gpu", "profile.ncu.gpu", GPU_FLAG_HELP, example="H100 SXM", metavar="NAME"),
    Flag("--peak", "profile.ncu.peak", PEAK_HELP, example="dram=864GB/s,fp32=91.6TFLOPS", metavar="PEAKS"),
)
ROOFLINE_FLAGS = (
    Flag(
        "--ncu",
        "profile.roofline_ncu",
        "kernels of an ncu report (.ncu-rep or CSV)",
        example="k.ncu-rep",
        type=Path,
        metavar="REPORT",
    ),
    Flag(
        "--gpu", "profile.ncu.gpu", "with --ncu: the GPU the report was captured on", example="H100 SXM", metavar="NAME"
    ),
    Flag(
        "--peak",
        "profile.ncu.peak",
        "with --ncu: " + PEAK_HELP,
        example="dram=864GB/s,fp32=91.6TFLOPS",
        metavar="PEAKS",
    ),
    Flag(
        "--ops",
        "profile.roofline_ops",
        "ops of a profile run folder (or its ops.json)",
        example="results/r1",
        type=Path,
        metavar="RUN",
    ),
    Flag("--device", "profile.device", "auto, cpu or cuda: whose peaks to measure (default: auto)", example="cpu"),
    Flag("--remeasure", "profile.remeasure_peaks", "measure the peaks again (ignore the cache)", switch=True),
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `profile`, `ncu run`, `ncu summarize`, `ncu permissions` and `roofline`."""
    profile = commands.add_parser(
        "profile", help="torch.profiler trace, trace summary and analytical roofline of a workload (steps A, C)"
    )
    add_run_options(profile)
    add_flags(profile, PROFILE_FLAGS)
    profile.set_defaults(handler=handle_profile)

    ncu = commands.add_parser("ncu", help="Nsight Compute: capture with ncu, summarise reports (step B)")
    sub = ncu.add_subparsers(dest="ncu_command", required=True, metavar="{run,summarize,permissions}")
    run = sub.add_parser("run", help="ncu --set full --target-processes all -o REPORT PROGRAM, then summarise")
    add_run_options(run)
    add_flags(run, NCU_RUN_FLAGS)
    run.set_defaults(handler=handle_ncu_run)
    summarize = sub.add_parser("summarize", help="per-kernel speed-of-light, FLOPs, DRAM bytes, class and fix")
    summarize.add_argument("report", type=Path, help=".ncu-rep file, or ncu --csv output (--page details or raw)")
    summarize.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    summarize.add_argument("--launches", action="store_true", help="one row per launch instead of per kernel")
    summarize.add_argument("--record", action="store_true", help="also write a result record and metrics")
    add_flags(summarize, NCU_SUMMARIZE_FLAGS)  # read by --record's config, else straight from args
    summarize.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_CUT} when the report is cut short (the summary is still printed)",
    )
    summarize.add_argument("--verbose", action="store_true", help="also echo ncu's ==PROF== progress lines on stderr")
    add_run_options(summarize)
    summarize.set_defaults(handler=handle_ncu_summarize)
    permissions = sub.add_parser("permissions", help="who may read the GPU counters here (RmProfilingAdminOnly)")
    permissions.add_argument("--params", type=Path, help="driver params file (default: /proc/driver/nvidia/params)")
    permissions.add_argument("--json", action="store_true", help="print the state as one line of JSON on stdout")
    permissions.set_defaults(handler=handle_ncu_permissions)

    roofline = commands.add_parser(
        "roofline", help="roofline PNG from an ncu report or a profile run, against peaks (step C)"
    )
    add_run_options(roofline)
    add_flags(roofline, ROOFLINE_FLAGS)
    roofline.set_defaults(handler=handle_roofline)


def handle_profile(args: argparse.Namespace, console: Console) -> int:
    """Profile the workload (arguments after `--` go to a script or module)."""
    config = config_from_args(args)
    from fleetbench.cli.views.profile import show_profile
    from fleetbench.profile.jobs import profile as profile_job  # torch loads once the config is valid

    result = profile_job.run(config, run_context(config, console))
    show_profile(console, result.view)  # ends with the table of top ops, their class and fix
    return 0


def handle_ncu_run(args: argparse.Namespace, console: Console) -> int:
    """Capture an Nsight Compute report of the program (default: the profile workload) and summarise it."""
    from fleetbench.profile.jobs import ncu as ncu_job  # torch loads only when a handler runs

    config = config_from_args(args)
    context = run_context(config, console)
    result = ncu_job.run(config, context)
    if result.view is not None:
        from fleetbench.cli.views.profile import show_ncu

        show_ncu(console, result.view)
    print_record_path(console, result.record, context.results_dir)
    return 0


def _summary_settings(args: argparse.Namespace) -> tuple[Thresholds, int, str | None, str | None]:
    """The class thresholds, top-N, GPU name and peaks of a summary: the config's (--config, --set), else its defaults."""
    from fleetbench.profile.classify import Thresholds, thresholds_of

    if args.config is None and not args.overrides:
        return Thresholds(), SUMMARY_TOP, args.gpu, args.peak
    from fleetbench.config.loader import load_config

    config = load_config(args.config, args.overrides)  # thresholds; nothing is written
    ncu = config.profile.ncu
    return thresholds_of(config.profile), config.profile.top, args.gpu or ncu.gpu, args.peak or ncu.peak


def _log_notes(notes: list[str], verbose: bool = False) -> None:
    """The reader's warnings (a cut file, values left out) and ncu's ==WARNING==/==ERROR== lines on stderr;
    ncu's ==PROF== progress lines only with `verbose` (else at debug level, so they do not bury the warnings)."""
    for note in notes:
        if note.startswith("warning: "):
            log.warning("%s", note.removeprefix("warning: "))  # the log format names the level itself
        elif note.startswith(("==WARNING", "==ERROR")):
            log.warning("%s", note)
        elif not note.startswith("note: "):  # notes are part of the answer (stdout)
            log.log(logging.INFO if verbose else logging.DEBUG, "%s", note)


def handle_ncu_summarize(args: argparse.Namespace, console: Console) -> int:
    """Summarise an existing report on stdout (table or --json); --record makes it a run with a record."""
    # Reading a report needs no torch and no run machinery: each import here is what the path uses.
    if args.record:
        from fleetbench.cli.views.profile import show_ncu
        from fleetbench.profile.jobs import ncu as ncu_job

        config = config_from_args(args)
        context = run_context(config, console)
        result = ncu_job.summary_job(args.report)(config, context)
        show_ncu(console, result.view)
        print_record_path(console, result.record, context.results_dir)
        return 0
    from fleetbench.profile.ncu.summary import overview, summarize_path

    thresholds, top, gpu, peak = _summary_settings(args)
    summary = summarize_path(args.report, thresholds, gpu, peak)
    _log_notes(summary.notes, args.verbose)  # with --json too: a cut report says so where a person reads it
    status = EXIT_CUT if args.strict and summary.cut else 0
    if args.json:
        print(jsonio.dumps({**summary.to_dict(), "overview": overview(summary, top)}, indent=1))
        return status
    from fleetbench.cli.views.profile import fixes_table, kernel_notes, ncu_fix_rows, ncu_table, nvidia_table

    out = Console(width=None if sys.stdout.isatty() else 160)  # a listing: stdout, so it pipes
    out.print(ncu_table(summary, launches=args.launches))
    out.print(fixes_table("class and main fix", ncu_fix_rows(summary, top)))
    rules = nvidia_table(summary, top)
    if rules is not None:
        out.print(rules)
    for line in kernel_notes(summary, top):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    return status


def handle_ncu_permissions(args: argparse.Namespace, console: Console) -> int:
    """Print the driver's GPU counter permission and how ncu must run here; 0 whatever the state."""
    from fleetbench.profile.ncu.permissions import DEFAULT_PARAMS_PATH, read_counter_permissions

    found = read_counter_permissions(args.params or DEFAULT_PARAMS_PATH)
    print(found.to_json() if args.json else found.report())
    return 0


def handle_roofline(args: argparse.Namespace, console: Console) -> int:
    """Draw the roofline of an ncu report's kernels or a profile run's ops against measured peaks."""
    from fleetbench.profile.jobs import roofline as roofline_job  # torch loads only when a handler runs

    if args.ncu is not None and args.ops is not None:
        raise UserError("give --ncu REPORT or --ops RUN_FOLDER, not both")
    config = config_from_args(args)
    from fleetbench.cli.views.profile import show_roofline

    context = run_context(config, console)
    result = roofline_job.run(config, context)
    show_roofline(console, result.view)
    print_record_path(console, result.record, context.results_dir)
    return 0
