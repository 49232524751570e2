"""`fleetbench compare` and `fleetbench baseline`: runs side by side, significance, the CI gate.

fleetbench compare BASE NEW [NEW ...]               run ids, run folders or baseline names (within run)
fleetbench compare --baseline main NEW              against a named baseline
fleetbench compare a1,a2,a3 b1,b2,b3                stored runs pooled: each side 3 independent processes
fleetbench compare --rounds --new-set probe.threads=1 -- probe --set probe.matmul_sizes=[256]
                                                    base and new in 20 processes each (compare.rounds), interleaved
fleetbench compare --rounds --base-rev main --new-rev HEAD -- probe
                                                    two commits, through git worktree (asv continuous)
fleetbench compare A B --fail-on-regression 5       fail only when a figure is significantly worse by a factor > 1.05
fleetbench compare A B --format md --out cmp.md     a pull-request comment (also csv, json)
fleetbench baseline set main RUN | list | rm main
The verdict, one rule: a figure is worse (or better) when Mann-Whitney U on the logs of its independent
samples rejects at compare.alpha after Holm's correction across the comparison's figures, and its
Hodges-Lehmann factor is at least its minimum change (max of compare.min_change_pct and the noise
floor of this machine class, fleetbench noise). Effects are factors: a rate halving and a time doubling
are both a 100 % change, for the minimum change and --fail-on-regression alike. The interval shown is
the test's own confidence set (Hodges-Lehmann), so it excludes no change exactly when the test rejects.
Independent samples are processes (--rounds N, 3 to 1000; baselines of fleetbench noise; stored runs
pooled as RUN1,RUN2,RUN3); a single pair
of runs is judged only against a noise floor calibrated for this machine class, else its figures are
printed with "not enough independent samples to judge" (exit 0 unless a failure). A figure whose
processes spread by more than compare.unstable_spread_pct, or that ran under a load average above
compare.max_load_per_core per core, is "unstable": no verdict, and what to do.
Exit status: 0 no regression; 1 a regression (a figure judged worse, or a benchmark ok in base that
failed or went missing in new), each named; 2 bad input or nothing comparable; `baseline list` 3 when
a baseline file it lists is damaged (named on stderr); 130 interrupted, SIGINT or SIGTERM (the --rounds
worktrees are removed first).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fleetbench.cli.options import add_results_dir, also_after
from fleetbench.config.loader import load_config
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.envvars import PUSHGATEWAY_ENV
from fleetbench.errors import UserError
from fleetbench.fsutil import check_output_file, refuse_foreign_file, write_text_atomic

if TYPE_CHECKING:  # the compare package loads scipy: only when a comparison runs
    from fleetbench.compare.gate import Regression
    from fleetbench.compare.matching import Comparison
    from fleetbench.compare.stability import Limits
    from fleetbench.config.compare import CompareConfig
    from fleetbench.results.record import ResultRecord

FORMATS = ("table", "md", "csv", "json")
PARTIAL_EXIT = 3  # docs/exit-status.md: finished, but the result leaves something out
MIN_ROUNDS, MAX_ROUNDS = 3, 1000  # fewer than 3 a side: no test has a verdict; more: days of processes


def rounds_count(text: str) -> int:
    """--rounds N: a whole number of processes per side in MIN_ROUNDS..MAX_ROUNDS (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not MIN_ROUNDS <= value <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not accepted; accepted: {MIN_ROUNDS} to {MAX_ROUNDS} processes per side "
            f"(fewer than {MIN_ROUNDS} independent samples a side can give no verdict)"
        )
    return value


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `compare` and `baseline set|list|rm`."""
    compare = commands.add_parser(
        "compare",
        help="compare runs: headline figures, change with CI, verdict; a CI gate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument(
        "runs", nargs="*", metavar="RUN", help="BASE NEW [NEW ...], NEW ... with --baseline; with --rounds: -- COMMAND"
    )
    compare.add_argument("--baseline", metavar="NAME", help="compare against this baseline")
    compare.add_argument("--format", default="table", help=f"output: {', '.join(FORMATS)} (default: table)")
    compare.add_argument("--out", type=Path, metavar="FILE", help="write the output here instead of stdout")
    compare.add_argument("--force", action="store_true", help="replace an existing --out file")
    compare.add_argument(
        "--fail-on-regression",
        type=float,
        metavar="PCT",
        help="exit 1 only when a figure is significantly worse by a factor of more than 1 + PCT/100 (a rate halved "
        "and a time doubled are both 100 %%; default: when worse at all)",
    )
    add_rounds_options(compare)
    compare.add_argument(
        "--allow-mismatch", action="store_true", help="compare runs of other devices or world sizes anyway (marked)"
    )
    compare.add_argument("--config", type=Path, metavar="FILE", help="config with a compare section")
    compare.add_argument(
        "--pushgateway",
        metavar="URL",
        help=f"push the verdicts for Grafana's compare dashboard (default: ${PUSHGATEWAY_ENV})",
    )
    compare.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="e.g. compare.alpha=0.01"
    )
    add_results_dir(compare, default=None)  # unset: the config's run.results_dir, else results
    compare.set_defaults(handler=handle_compare)

    baseline = commands.add_parser("baseline", help="named baselines: set, list, rm")
    add_results_dir(baseline, default=None)
    sub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="{set,list,rm}")
    set_ = sub.add_parser("set", help="keep a run's records as baseline NAME (replaces an older one)")
    set_.add_argument("name")
    set_.add_argument("run", metavar="RUN", help="run id or run folder")
    set_.set_defaults(handler=handle_baseline_set)
    listing = sub.add_parser("list", help="baselines and the runs they came from")
    listing.set_defaults(handler=handle_baseline_list)
    rm = sub.add_parser("rm", help="delete baseline NAME")
    rm.add_argument("name")
    rm.set_defaults(handler=handle_baseline_rm)
    also_after(baseline, set_, listing, rm)


def add_rounds_options(parser: argparse.ArgumentParser) -> None:
    """--rounds and what each side of it runs."""
    group = parser.add_argument_group("independent processes (--rounds)")
    group.add_argument(
        "--rounds",
        nargs="?",
        type=rounds_count,
        const=0,
        metavar="N",
        help="run base and new in N processes each (3 to 1000), interleaved, and test per-process summaries "
        "(N default: compare.rounds, 20); the benchmark command follows --",
    )
    group.add_argument("--base-set", action="append", default=[], metavar="KEY=VALUE", help="base's config overrides")
    group.add_argument("--new-set", action="append", default=[], metavar="KEY=VALUE", help="new's config overrides")
    group.add_argument("--base-rev", metavar="REV", help="run base at this commit (git worktree)")
    group.add_argument("--new-rev", metavar="REV", help="run new at this commit (git worktree)")
    group.add_argument("--repo", type=Path, default=Path("."), metavar="DIR", help="git checkout of the revs (.)")
    group.add_argument("--run-prefix", metavar="PREFIX", help="run ids PREFIX-base-01 ... (default: rounds-<time>)")


def require_scipy() -> None:
    """The statistics of a comparison need scipy, the `compare` extra; say so in one line without it."""
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise UserError(
            "comparing runs needs scipy: pip install 'fleetbench[compare]' (make setup installs it)"
        ) from None


def _config(args: argparse.Namespace) -> FleetbenchConfig:
    import os

    flags = {
        "run.results_dir": (str(args.results_dir) if args.results_dir else None, "--results-dir"),
        "compare.fail_on_regression_pct": (args.fail_on_regression, "--fail-on-regression"),
        "telemetry.pushgateway": (
            args.pushgateway or os.environ.get(PUSHGATEWAY_ENV) or None,
            "--pushgateway" if args.pushgateway else PUSHGATEWAY_ENV,
        ),
    }
    config: FleetbenchConfig = load_config(args.config, args.overrides, flags)
    return config


def write_output(text: str, out: Path | None) -> None:
    """To stdout, or atomically to `out` (a reader never sees half a file)."""
    if out is None:
        sys.stdout.write(text)
        return
    write_text_atomic(out, text, f"--out {out}")


def render_table_text(comparisons: list[Comparison], failures: list[Regression], width: int = 160) -> str:
    """The terminal tables as plain text, for --out with the table format."""
    from fleetbench.cli.views import compare as display

    console = Console(record=True, width=width, file=io.StringIO())
    display.show(console, comparisons, failures)
    return console.export_text()


def _check_args(args: argparse.Namespace) -> None:
    if args.format not in FORMATS:
        raise UserError(f"--format {args.format!r} is not accepted; accepted: {', '.join(FORMATS)}")
    for flag, rev in (("--base-rev", args.base_rev), ("--new-rev", args.new_rev)):
        if rev is not None and not rev.strip():  # '' would be read as "no rev": the working tree, not a commit
            raise UserError(
                f"{flag} {rev!r} is empty; accepted: a branch, tag or commit of the repository --repo names"
            )
    if args.out is not None:  # before the comparison: its work must not end in a file that cannot be written
        check_output_file(args.out, "--out")
        refuse_foreign_file(args.out, "--out", args.force)
    if args.rounds is None:
        rounds_only = [flag for flag, value in (("--base-set", args.base_set), ("--new-set", args.new_set),
                       ("--base-rev", args.base_rev), ("--new-rev", args.new_rev)) if value]  # fmt: skip
        if rounds_only:
            raise UserError(f"{rounds_only[0]} applies to --rounds; pass --rounds N -- COMMAND, or drop it")
    elif args.baseline is not None:
        raise UserError("--rounds runs both sides; --baseline compares with stored runs: pass one of them")


def limits_from(cfg: CompareConfig) -> Limits:
    """When a comparison between processes is too noisy to judge, from the compare section."""
    from fleetbench.compare.stability import Limits

    return Limits(cfg.unstable_spread_pct, cfg.max_load_per_core, cfg.max_steal_pct)


def _named_comparisons(args: argparse.Namespace, config: FleetbenchConfig) -> list[Comparison]:
    """BASE (or --baseline) against each NEW, as stored runs."""
    from fleetbench.compare.matching import compare_runs, find_calibration, load_baseline, load_run
    from fleetbench.compare.statistics import settings_from

    root, cfg = config.run.results_dir, config.compare
    if args.baseline is not None:
        if not args.runs:
            raise UserError("compare --baseline NAME needs at least one NEW run")
        base, news = load_baseline(args.baseline, root), [load_run(r, root) for r in args.runs]
    elif len(args.runs) < 2:
        raise UserError("compare needs BASE and at least one NEW run (or --baseline NAME and a NEW run)")
    else:
        base, news = load_run(args.runs[0], root), [load_run(r, root) for r in args.runs[1:]]
    settings, limits = settings_from(cfg), limits_from(cfg)
    calibrations = [find_calibration(base, new, root) for new in news]
    return [
        compare_runs(base, new, settings, args.allow_mismatch, calibration, cfg.noise_factor, limits)
        for new, calibration in zip(news, calibrations, strict=True)
    ]


def _rounds_comparison(args: argparse.Namespace, config: FleetbenchConfig, console: Console) -> Comparison:
    """Run the rounds (`compare --rounds`) and compare the two sides' processes."""
    from fleetbench.compare import rounds
    from fleetbench.compare.matching import compare_runs, find_calibration
    from fleetbench.compare.statistics import settings_from

    command = tuple(args.runs)
    rounds.check_command(command)
    plan = rounds.RoundsPlan(
        command, args.rounds or config.compare.rounds, config.run.results_dir,
        rounds.Side("base", tuple(args.base_set), args.base_rev), rounds.Side("new", tuple(args.new_set), args.new_rev),
        args.run_prefix or "", args.repo,
    )  # fmt: skip
    rounds.check_overrides((plan.base, plan.new))
    started = time.monotonic()

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    with rounds.checkouts(plan.repo, (plan.base, plan.new), say) as sources:
        outcome = rounds.run_rounds(plan, sources, say)
    base = rounds.side_ref(outcome, plan.base, rounds.describe_side(plan.base))
    new = rounds.side_ref(outcome, plan.new, rounds.describe_side(plan.new))
    console.print(
        f"rounds: {len(outcome.seconds)} processes in {time.monotonic() - started:.1f} s", markup=False, highlight=False
    )
    cfg = config.compare
    calibration = find_calibration(base, new, config.run.results_dir)
    return compare_runs(base, new, settings_from(cfg), args.allow_mismatch, calibration, cfg.noise_factor,
                        limits_from(cfg))  # fmt: skip


def _emit(args: argparse.Namespace, comparisons: list[Comparison], failures: list[Regression]) -> None:
    from fleetbench.cli.views import compare as display
    from fleetbench.compare import formats

    if args.format == "table" and args.out is None:
        display.show(Console(width=None if sys.stdout.isatty() else 160), comparisons, failures)
        return
    text = {
        "table": lambda: render_table_text(comparisons, failures),
        "md": lambda: formats.to_markdown(comparisons, failures),
        "csv": lambda: formats.to_csv(comparisons),
        "json": lambda: formats.to_json(comparisons, failures),
    }[args.format]()
    write_output(text, args.out)


def publish_verdicts(comparisons: list[Comparison], config: FleetbenchConfig, console: Console) -> None:
    """Push each comparison's verdicts to the Pushgateway (spooled when it is down; never a failure)."""
    from fleetbench.compare import publish
    from fleetbench.results.store import default_spool_dir

    gateway = config.telemetry.pushgateway
    assert gateway is not None
    spool = config.telemetry.spool_dir or default_spool_dir(config.run.results_dir)
    for comparison in comparisons:
        problem = publish.push(publish.verdicts(comparison), gateway, spool)
        if problem:
            console.print(f"warning: {problem}", markup=False, highlight=False, soft_wrap=True)


def handle_compare(args: argparse.Namespace, console: Console) -> int:
    """Compare BASE with each NEW (or run --rounds); print or write the tables; exit 1 on a regression."""
    from fleetbench.compare import formats
    from fleetbench.compare.gate import regressions

    _check_args(args)
    require_scipy()
    config = _config(args)
    if args.rounds is not None:
        comparisons = [_rounds_comparison(args, config, console)]
    else:
        comparisons = _named_comparisons(args, config)
    if not any(b.compared for c in comparisons for b in c.benchmarks) and not any(c.failures for c in comparisons):
        mismatches = "; ".join(f"{b.benchmark}: {formats.mismatch_text(b)}" for c in comparisons for b in c.benchmarks)
        raise UserError(f"nothing comparable ({mismatches}); --allow-mismatch compares anyway, marked")
    cfg = config.compare
    failures = regressions(comparisons, cfg.fail_on_regression_pct, cfg.fail_thresholds_pct)
    _emit(args, comparisons, failures)
    if config.telemetry.pushgateway:
        publish_verdicts(comparisons, config, console)
    if failures:
        console.print(
            f"{len(failures)} regression(s): " + "; ".join(f.describe() for f in failures),
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
    """Keep the records of RUN as baseline NAME, with this machine's noise calibration when there is one."""
    from fleetbench.compare import noise
    from fleetbench.compare.baselines import Baseline, check_name, set_baseline
    from fleetbench.compare.matching import load_run

    root = _root(args)
    check_name(args.name)
    run = load_run(args.run, root)  # refuses figures that are not measurements (NaN, inf, negative)
    if run.label.startswith("baseline "):
        raise UserError(f"{args.run!r} is a baseline, not a run; pass a run id or run folder")
    refuse_uncomparable(args.run, run.records)
    calibration = noise.for_machine(root, run.machine)
    baseline = Baseline(args.name, run.run_id, str(args.run), "", run.records, 1, calibration)
    path = set_baseline(root, baseline)
    kept = f", noise of {calibration.set_at[:19]}" if calibration else ""
    console.print(f"baseline {args.name} -> run {run.run_id} ({len(run.records)} records{kept}): {path}", markup=False)
    return 0


def refuse_uncomparable(ref: str, records: list[ResultRecord]) -> None:
    """A baseline must hold what `compare --baseline` compares: a successful rank-0 record with headline
    figures. A run with no records, only failed ones or no figures is refused when the baseline is made."""
    from fleetbench.compare.matching import latest_ok

    if any(record.headline for record in latest_ok(records).values()):
        return
    failed = sum(1 for record in records if record.status == "failed")
    held = f"{len(records)} records, {failed} failed" if records else "no records"
    raise UserError(
        f"baseline set: run {ref!r} holds no successful record with headline figures ({held}), so no "
        "comparison could use it; accepted: a run that finished ok"
    )


def handle_baseline_list(args: argparse.Namespace, console: Console) -> int:
    """One row per baseline: the run, when it was set, its benchmarks; a damaged file is a row that says so."""
    from fleetbench.compare.baselines import scan_baselines
    from fleetbench.results.store import check_results_root

    root = check_results_root(_root(args))  # a missing folder or a file is no empty list of baselines
    table = Table(title=f"baselines in {root}")
    for column in ("name", "run_id", "set at", "benchmarks", "processes", "noise"):
        table.add_column(column)
    damaged = 0
    for name, baseline in scan_baselines(root):
        if isinstance(baseline, str):
            damaged += 1
            table.add_row(name, "-", "-", "damaged: see the line below", "-", "-")
            console.print(f"warning: {baseline}", markup=False, highlight=False, soft_wrap=True)
            continue
        benchmarks = ", ".join(sorted({r.benchmark for r in baseline.records}))
        noise = f"{len(baseline.noise.figures)} figures" if baseline.noise else "-"
        table.add_row(name, baseline.run_id, baseline.set_at[:19], benchmarks, str(baseline.processes), noise)
    Console().print(table)  # a listing: stdout, so it pipes
    return PARTIAL_EXIT if damaged else 0  # docs/exit-status.md: a listing with rows it could not read


def handle_baseline_rm(args: argparse.Namespace, console: Console) -> int:
    """Delete baseline NAME."""
    from fleetbench.compare.baselines import remove_baseline

    path = remove_baseline(_root(args), args.name)
    console.print(f"removed {path}", markup=False)
    return 0
