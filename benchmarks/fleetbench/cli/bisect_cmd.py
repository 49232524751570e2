"""`fleetbench bisect`: the first commit between GOOD and BAD where a figure got worse (asv find).

fleetbench bisect --good v1.2 --bad HEAD --metric probe_achieved_flop_per_second -- probe --set probe.threads=1
fleetbench bisect --good A --bad B --metric step_seconds --rounds 10 --repo ../fleetbench -- train --steps 20
Walks the commits on the ancestry path from GOOD to BAD by halves. Each commit visited runs the
benchmark command in N processes (--rounds N, 3 to 1000; default compare.rounds) from a temporary git
worktree (removed on any exit, SIGTERM included) and is judged against GOOD's processes as
`compare --rounds` judges (Mann-Whitney U on the logs, Hodges-Lehmann factor, minimum change,
"unstable" on a busy machine); a commit whose processes fail is bad. BAD is checked first. Each
commit is measured once, after GOOD, not interleaved with it: keep the machine quiet.
Exit status: 0 the first bad commit found (printed); 1 nothing to bisect (BAD not judged worse than
GOOD) or the search stopped on a comparison without a verdict (named); 2 bad input; 130 interrupted (SIGINT or SIGTERM).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from fleetbench.cli.compare_cmd import limits_from, require_scipy, rounds_count
from fleetbench.cli.history_cmd import metric_name, parse_labels
from fleetbench.cli.options import add_results_dir
from fleetbench.errors import UserError


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `bisect`."""
    bisect = commands.add_parser(
        "bisect",
        help="find the first commit between a good and a bad one where a figure got worse (asv find)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bisect.add_argument("command", nargs="*", metavar="COMMAND", help="-- then the benchmark command, e.g. -- probe")
    bisect.add_argument("--good", required=True, metavar="REV", help="a commit where the figure was good")
    bisect.add_argument("--bad", required=True, metavar="REV", help="a later commit where it is worse")
    bisect.add_argument("--metric", required=True, metavar="METRIC", help="the headline metric judged")
    bisect.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="narrow the figure")
    bisect.add_argument(
        "--rounds", type=rounds_count, metavar="N", help="processes per commit, 3 to 1000 (compare.rounds)"
    )
    bisect.add_argument("--repo", type=Path, default=Path("."), metavar="DIR", help="git checkout of the revs (.)")
    bisect.add_argument(
        "--run-prefix", metavar="PREFIX", help="run ids PREFIX-<commit>-01 ... (default: bisect-<time>)"
    )
    bisect.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="compare settings, e.g. compare.alpha=0.01")  # fmt: skip
    add_results_dir(bisect)
    bisect.set_defaults(handler=handle_bisect)


def handle_bisect(args: argparse.Namespace, console: Console) -> int:
    """Check the input, bisect, print each step and the first bad commit."""
    from fleetbench.compare import rounds
    from fleetbench.compare.bisect import BisectPlan, ancestry, bisect
    from fleetbench.compare.statistics import settings_from
    from fleetbench.config.loader import load_config
    from fleetbench.runinfo import new_run_id

    rounds.check_command(tuple(args.command))
    metric, labels = metric_name(args.metric), parse_labels(args.label)
    require_scipy()
    config = load_config(None, list(args.overrides), {})
    cfg = config.compare
    settings = settings_from(cfg)
    plan = BisectPlan(tuple(args.command), args.rounds or cfg.rounds, Path(args.results_dir), args.repo, metric,
                      labels, settings, cfg.noise_factor, limits_from(cfg),
                      args.run_prefix or f"bisect-{new_run_id()}")  # fmt: skip

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    ancestry(args.repo, args.good, args.bad)  # revisions that do not exist: one line before anything else
    if note := rounds.uncommitted_note(args.repo):
        say(note)
    with rounds.terminated_as_exit():
        found = bisect(plan, args.good, args.bad, say)
    if found.first_bad is None:
        raise UserError(f"bisect: {found.stopped}", exit_code=1)
    subject = rounds._git(args.repo, "log", "-1", "--format=%s", found.first_bad)
    print(f"first bad commit: {found.first_bad} {subject}")
    return 0
