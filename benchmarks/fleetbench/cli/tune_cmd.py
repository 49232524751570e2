"""`fleetbench tune RUN [RUN...]`: candidate knob changes from a run's verdicts, each measured against the base.

fleetbench tune RUN_ID                          a train run: its configuration is the base
fleetbench tune TRAIN_RUN PROFILE_RUN NCU_RUN   with the verdicts of a profile and an ncu run
Reads the runs' records (the train run's configuration and figures; the profile's and ncu's classes,
where given), proposes candidate `train.*` changes (fleetbench.train.tune.candidates), runs the base and
each candidate in ROUNDS rounds of separate `fleetbench train` processes (rotating order) and judges
each candidate's device tokens/s against the base with compare's between-process statistics. Prints
each change with its interval, or "no significant change", and writes the best configuration (the
base where nothing is significantly better) as a file `fleetbench train --config FILE` accepts
(default results/<prefix>/tuned.yaml). Exit status: 0; 2 bad input (no train run, rounds < 3).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from fleetbench import jsonio
from fleetbench.cli.options import add_results_dir
from fleetbench.errors import UserError
from fleetbench.fsutil import check_output_file

if TYPE_CHECKING:
    from fleetbench.train.tune.candidates import Candidate, Verdicts

MIN_ROUNDS = 3  # compare's fewest samples for a test (fleetbench.compare.statistics.MIN_SAMPLES)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `tune`."""
    tune = commands.add_parser(
        "tune",
        help="candidate knob changes from a run's verdicts, each measured against the base; writes the best config",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tune.add_argument("runs", nargs="+", metavar="RUN", help="run ids (a train run, and profile/ncu runs if any)")
    tune.add_argument("--rounds", type=int, default=5, help=f"processes per side, at least {MIN_ROUNDS} (default 5)")
    tune.add_argument("--out", type=Path, metavar="FILE", help="the best config (default RESULTS/PREFIX/tuned.yaml)")
    tune.add_argument("--only", action="append", default=[], metavar="NAME", help="measure only these candidates")
    tune.add_argument(
        "--set", action="append", default=[], dest="base_sets", metavar="KEY=VALUE",
        help="change the base too (e.g. train.steps=8 for shorter processes)",
    )  # fmt: skip
    tune.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    add_results_dir(tune)
    tune.set_defaults(handler=handle_tune)


def _verdicts(args: argparse.Namespace, root: Path) -> Verdicts:
    """The runs' verdicts, with the base changed by --set."""
    import yaml

    from fleetbench.results.store import find_run, read_records
    from fleetbench.train.tune.candidates import read_verdicts

    records = [record for run_id in args.runs for record in read_records(find_run(root, run_id))]
    try:
        verdicts = read_verdicts(records)
    except ValueError as exc:
        raise UserError(f"tune {' '.join(args.runs)}: {exc}; accepted: the run id of a finished train run") from None
    for item in args.base_sets:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("train.") or key == "train.":
            raise UserError(f"--set {item!r} is not accepted; accepted: train.KEY=VALUE, e.g. train.steps=8")
        verdicts.train[key.removeprefix("train.")] = yaml.safe_load(value)
    return verdicts


def _chosen(found: list[Candidate], only: list[str]) -> list[Candidate]:
    """The candidates --only names (all without it); a name that is no candidate is a UserError."""
    if not only:
        return found
    names = {c.name for c in found}
    unknown = [name for name in only if name not in names]
    if unknown:
        raise UserError(f"--only {unknown[0]!r} is not a candidate of this run; accepted: {', '.join(sorted(names))}")
    return [c for c in found if c.name in only]


def handle_tune(args: argparse.Namespace, console: Console) -> int:
    """Read the runs' verdicts, measure each candidate, print the changes, write the best configuration."""
    from fleetbench.runinfo import new_run_id
    from fleetbench.train.tune.candidates import candidates
    from fleetbench.train.tune.measure import best, measure, write_base_config, write_best

    if args.rounds < MIN_ROUNDS:
        raise UserError(f"--rounds {args.rounds}: too few for a test; accepted: {MIN_ROUNDS} or more")
    root = Path(args.results_dir)
    verdicts = _verdicts(args, root)
    proposed = candidates(verdicts)
    found = _chosen(proposed, args.only)
    prefix = f"tune-{new_run_id()}"
    out = args.out or root / prefix / "tuned.yaml"
    check_output_file(out, "--out")
    config_file = write_base_config(verdicts.train, root / prefix / "base.yaml")
    err = Console(stderr=True)
    err.print(
        f"tune: verdicts from {', '.join(verdicts.sources)}; {len(proposed)} candidate(s), {len(found)} measured",
        highlight=False,
    )
    for c in proposed:
        left_out = "" if c in found else " [not measured: --only]"
        err.print(f"  {c.name}: {' '.join(c.overrides)} ({c.why}){left_out}", highlight=False, markup=False)
    base, judged = measure(config_file, found, args.rounds, root, prefix, lambda line: err.print(line, highlight=False))
    winner = best(judged)
    written = write_best(verdicts.train, winner, out)
    outcome: dict[str, Any] = {
        "verdicts_from": verdicts.sources,
        "proposed": [{"name": c.name, "overrides": list(c.overrides), "why": c.why} for c in proposed],
        "base": {"config": str(config_file), "samples": base.samples, "runs": base.run_ids},
        "candidates": [
            {
                "name": j.candidate.name,
                "overrides": list(j.candidate.overrides),
                "why": j.candidate.why,
                "samples": j.measured.samples,
                "runs": j.measured.run_ids,
                "failure": j.failure,
                "change_pct": j.change.change_pct if j.change else None,
                "interval_pct": list(j.change.ci_pct) if j.change and j.change.ci_pct else None,
                "p_value": j.change.p_value if j.change else None,
                "verdict": j.change.verdict if j.change else "failed",
            }
            for j in judged
        ],
        "best": winner.candidate.name if winner else "base",
        "config": str(written),
    }
    (root / prefix / "tune.json").write_text(jsonio.dumps(outcome, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(jsonio.dumps(outcome, indent=1))
        return 0
    table = Table(title=f"tune: device tokens/s against the base ({args.rounds} processes each)", title_justify="left")
    for column in ("candidate", "change", "95% interval", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for item in outcome["candidates"]:
        interval = item["interval_pct"]
        table.add_row(
            f"{item['name']} ({' '.join(item['overrides'])})",
            f"{item['change_pct']:+.1f}%" if item["change_pct"] is not None else "-",
            f"{interval[0]:+.1f}% .. {interval[1]:+.1f}%" if interval else "-",
            str(item["verdict"]),
            str(item["failure"] or item["why"]),
        )
    console.print(table)
    console.print(f"best: {outcome['best']}; config written to {written} (fleetbench train --config {written})")
    return 0
