"""`fleetbench noise`: the run-to-run noise of this machine class, measured once, for the gate's minimum change.

fleetbench noise -- probe --set probe.threads=1             2 x 20 processes of the same command
fleetbench noise --rounds 6 --baseline main -- probe        ... and keep them as baseline `main`
fleetbench noise --set compare.noise_factor=3 -- probe       the bar compare applies with that setting
Runs the command in 2 x N processes (N: 3 to 1000), interleaved as an A/A comparison (compare --rounds
with the same configuration on both sides), and files each headline figure's noise (the robust spread
of the logs of the per-process medians, and of the per-process best samples) under
results/calibration/ for this machine class (CPU model, cores, GPU model, count and driver; never the
host name, so CI runners of one kind share it). Prints the noise and exactly the minimum change
compare applies at the default compare settings (the same function computes both): for a single pair
of runs and for --rounds N, with the compare section of --config and --set (the defaults without);
then the A/A comparison itself, judged as compare would judge it with those settings.
Exit status: 0 calibrated; 2 bad input or a process that failed (nothing is filed then).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fleetbench.cli.compare_cmd import limits_from, rounds_count
from fleetbench.cli.options import add_results_dir
from fleetbench.errors import UserError

if TYPE_CHECKING:
    from fleetbench.compare.noise import Calibration
    from fleetbench.compare.rounds import Outcome
    from fleetbench.config.compare import CompareConfig
    from fleetbench.config.schema import FleetbenchConfig


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `noise`."""
    noise = commands.add_parser(
        "noise",
        help="measure this machine's run-to-run noise (A/A processes) for compare's minimum change",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    noise.add_argument("command", nargs="*", metavar="COMMAND", help="-- then the benchmark command, e.g. -- probe")
    noise.add_argument(
        "--rounds",
        type=rounds_count,
        metavar="N",
        help="processes per side, 2 x N in all, 3 to 1000 (default: compare.rounds, 20)",
    )
    noise.add_argument("--baseline", metavar="NAME", help="also keep the processes and their noise as baseline NAME")
    noise.add_argument("--run-prefix", metavar="PREFIX", help="run ids PREFIX-base-01 ... (default: noise-<time>)")
    noise.add_argument("--config", type=Path, metavar="FILE", help="config whose compare section the bar is shown for")
    noise.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="compare.KEY=VALUE",
        help="a compare setting the bar is shown for, e.g. compare.noise_factor=3 (the command's own go after --)",
    )
    add_results_dir(noise)
    noise.set_defaults(handler=handle_noise)


def compare_settings(args: argparse.Namespace) -> CompareConfig:
    """The compare section the bar is printed for: --config's, with --set's compare.* keys on top."""
    from fleetbench.config.loader import load_config

    for override in args.overrides:
        if not override.startswith("compare."):
            raise UserError(
                f"noise: --set {override!r} is not accepted; accepted: compare.KEY=VALUE (the bar is shown for "
                "compare's settings; the benchmark's own --set goes after --)"
            )
    config: FleetbenchConfig = load_config(args.config, args.overrides)
    return config.compare


def _check(args: argparse.Namespace) -> CompareConfig:
    from fleetbench.compare.baselines import check_name
    from fleetbench.compare.rounds import check_command

    check_command(tuple(args.command))
    cfg = compare_settings(args)
    if args.rounds is None:  # the noise of as many processes as compare runs
        args.rounds = cfg.rounds
    if args.baseline is not None:
        check_name(args.baseline)
    return cfg


def _run(args: argparse.Namespace, root: Path, console: Console) -> Outcome:
    from fleetbench.cli.compare_cmd import require_scipy
    from fleetbench.compare import rounds
    from fleetbench.runinfo import new_run_id

    require_scipy()
    command = tuple(args.command)
    plan = rounds.RoundsPlan(command, args.rounds, root, rounds.Side("base"), rounds.Side("new"),
                             args.run_prefix or f"noise-{new_run_id()}")  # fmt: skip
    outcome = rounds.run_rounds(plan, {}, lambda line: console.print(line, markup=False, highlight=False))
    failed = outcome.crashed["new"] or [r.error or r.run_id for r in outcome.records["new"] if r.status != "ok"]
    if failed:
        raise UserError(f"noise: a process failed ({failed[0]}); nothing was filed: fix the command and run again")
    return outcome


def noise_table(calibration: Calibration, rounds: int, cfg: CompareConfig) -> Table:
    """Each figure's noise and exactly the minimum change compare applies with `cfg` (noise.bar_pct)."""
    import dataclasses

    from fleetbench.compare.formats import labels_text, short_metric
    from fleetbench.compare.noise import bar_pct, describe_class
    from fleetbench.compare.statistics import settings_from

    within = dataclasses.replace(settings_from(cfg), scope="within run")
    between = dataclasses.replace(settings_from(cfg), scope="between processes")
    table = Table(
        title=f"run-to-run noise of {describe_class(calibration.machine)} ({calibration.processes} processes)"
    )
    columns = ("benchmark", "metric", "labels", "noise, median", "noise, best sample", "min change, one pair",
               f"min change, --rounds {rounds} ({cfg.process_summary})")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right" if "noise" in column or "min" in column else "left")
    for figure in calibration.figures:
        table.add_row(
            figure.benchmark,
            short_metric(figure.metric),
            labels_text(figure.labels),
            f"{figure.noise_pct:.2f}%",
            f"{figure.best_noise_pct:.2f}%" if figure.best_noise_pct is not None else "-",
            f"{bar_pct(figure, within, cfg.noise_factor, 1):.1f}%",
            f"{bar_pct(figure, between, cfg.noise_factor, rounds):.1f}%",
        )
    return table


def handle_noise(args: argparse.Namespace, console: Console) -> int:
    """Run the A/A processes, file the calibration (and the baseline), print the noise and the A/A verdicts."""
    from fleetbench.cli.views import compare as display
    from fleetbench.compare import noise, rounds
    from fleetbench.compare.baselines import Baseline, set_baseline
    from fleetbench.compare.matching import by_process, compare_runs
    from fleetbench.compare.statistics import settings_from

    cfg = _check(args)
    root = Path(args.results_dir)
    outcome = _run(args, root, console)
    records = outcome.records["base"] + outcome.records["new"]
    processes = by_process(records)
    machine = next((r.machine for r in records if r.rank == 0), {})
    calibration = noise.estimate(processes, machine, list(args.command))
    if not calibration.figures:
        raise UserError(f"noise: {' '.join(args.command)} recorded no headline figures; nothing to calibrate")
    path = noise.store(root, calibration)
    Console(width=160).print(noise_table(calibration, args.rounds, cfg))
    console.print(f"noise calibration: {path}", markup=False)
    if args.baseline:
        baseline = Baseline(args.baseline, outcome.prefix, "fleetbench noise", "", records, len(processes), calibration)
        console.print(f"baseline {args.baseline}: {set_baseline(root, baseline)}", markup=False)
    base = rounds.side_ref(outcome, rounds.Side("base"), "A")
    new = rounds.side_ref(outcome, rounds.Side("new"), "A again")
    # The A/A check is judged as compare judges with the same settings
    check = compare_runs(base, new, settings_from(cfg), calibration=calibration, noise_factor=cfg.noise_factor,
                         limits=limits_from(cfg))  # fmt: skip
    display.show(Console(width=160), [check], [])
    return 0
