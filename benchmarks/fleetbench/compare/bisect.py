"""`fleetbench bisect`: the first commit between a good and a bad one where a figure got worse (asv find).

The commits are those on the ancestry path from GOOD to BAD (`git rev-list --topo-order --reverse
--ancestry-path GOOD..BAD`). Each commit visited is checked out in a temporary git worktree and its
benchmark command runs in N separate processes (`--rounds N`, as `compare --rounds`); the worktrees
are removed on any exit, SIGTERM included. A commit is *bad* when `compare` judges the figure worse
than at GOOD between those processes (the same test, minimum change and stability checks as
`compare --rounds`), or when its processes fail (asv counts a failure as a regression); *good* when
it is judged no worse. BAD itself is checked first: if it is not judged worse than GOOD there is
nothing to bisect, and bisect says so. A comparison that is unstable or has no verdict stops the
search, naming the commit, instead of guessing. Each commit is measured once and its processes reused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fleetbench.compare import rounds
from fleetbench.compare.matching import Comparison, Row, RunRef, compare_runs
from fleetbench.compare.stability import Limits
from fleetbench.compare.statistics import TestSettings
from fleetbench.errors import UserError
from fleetbench.results.load import cpu_times, load_between
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import RECORDS_FILE, read_records

Verdict = str  # "bad", "good", or why the search stopped


@dataclass(frozen=True)
class BisectPlan:
    """What bisect runs: the command, processes per commit, where, the figure and how it is judged."""

    command: tuple[str, ...]
    rounds: int
    results_root: Path
    repo: Path
    metric: str
    labels: dict[str, str]
    settings: TestSettings
    noise_factor: float = 2.0
    limits: Limits = field(default_factory=Limits)
    prefix: str = "bisect"


@dataclass
class Bisection:
    """What bisect found: the first bad commit (None when it stopped), each step's verdict, why it stopped."""

    commits: list[str]
    first_bad: str | None = None
    steps: list[tuple[str, str, str]] = field(default_factory=list)  # commit, verdict, the figure's change
    stopped: str = ""


def commit(repo: Path, flag: str, rev: str) -> str:
    """The full commit id `rev` names in `repo`; one line naming the flag and the rev otherwise."""
    try:
        return rounds._git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except UserError:
        raise UserError(
            f"{flag} {rev!r} is not a commit of {repo}; accepted: a branch, tag or commit of the repository "
            "--repo names (default: the current folder)"
        ) from None


def ancestry(repo: Path, good: str, bad: str) -> list[str]:
    """The commits after GOOD up to BAD on the ancestry path, oldest first; a UserError when there are none."""
    good_id, bad_id = commit(repo, "--good", good), commit(repo, "--bad", bad)
    listing = rounds._git(repo, "rev-list", "--topo-order", "--reverse", "--ancestry-path", f"{good_id}..{bad_id}")
    commits = listing.split()
    if not commits:
        raise UserError(
            f"--bad {bad!r} is not a descendant of --good {good!r} in {repo}; accepted: a good commit and a later bad one"
        )
    return [good_id, *commits]


def measure(plan: BisectPlan, commit: str, report: Callable[[str], None]) -> RunRef:
    """The benchmark command at `commit` in plan.rounds processes (a worktree, removed at the end)."""
    side = rounds.Side("new")
    records: list[ResultRecord] = []
    loads = []
    crashed: list[str] = []
    with rounds.worktrees(plan.repo, {"tree": commit}) as trees:
        source = trees["tree"] / "benchmarks"
        if not (source / "fleetbench").is_dir():
            raise UserError(f"commit {commit[:12]} has no benchmarks/fleetbench: it cannot run the command")
        runs = rounds.RoundsPlan(plan.command, plan.rounds, plan.results_root, side, side, plan.prefix, plan.repo)
        for index in range(plan.rounds):
            run_id = f"{plan.prefix}-{commit[:12]}-{index + 1:02d}"
            before = cpu_times()
            done = rounds.run_process(rounds.process_argv(runs, side, run_id), source)
            loads.append(load_between(before, cpu_times()))
            folder = plan.results_root / run_id
            records += read_records(folder) if (folder / RECORDS_FILE).is_file() else []
            report(f"{commit[:12]} process {index + 1}/{plan.rounds}: exit {done.returncode}")
            if done.returncode != 0:
                crashed.append(f"{run_id}: exit {done.returncode}: {rounds._last_line(done.stderr)}")
                break
    records = [only_the_figure(record, plan) for record in records]
    return RunRef(commit[:12], f"{plan.prefix}-{commit[:12]}", records, processes=len(loads),
                  crashed=tuple(crashed), load=tuple(loads))  # fmt: skip


def only_the_figure(record: ResultRecord, plan: BisectPlan) -> ResultRecord:
    """The record with only the plan's figure(s) in its headline: bisect judges that figure, so the other
    figures of the benchmark do not join the family the correction divides alpha among."""
    kept = [f for f in record.headline
            if f.metric == plan.metric and all(f.labels.get(k) == v for k, v in plan.labels.items())]  # fmt: skip
    return record.model_copy(update={"headline": kept})


def judge_step(plan: BisectPlan, good: RunRef, candidate: RunRef) -> tuple[Verdict, str]:
    """Whether `candidate` is bad against `good` on the plan's figure, and the figure's change as text."""
    if candidate.crashed:
        return "bad", f"its process failed ({candidate.crashed[0]})"
    comparison = compare_runs(good, candidate, plan.settings, False, None, plan.noise_factor, plan.limits)
    if comparison.failures:
        return "bad", comparison.failures[0].reason
    row = figure_row(comparison, plan)
    change = row.change
    assert change is not None
    too_few = [note for bench in comparison.benchmarks for note in bench.notes if "cannot show" in note]
    if too_few:  # no step can be judged bad: say so instead of calling every commit good
        return f"stopped: {too_few[0]}", f"{change.change_pct:+.1f}%"
    text = f"{change.change_pct:+.1f}% (p adj {change.p_adjusted if change.p_adjusted is not None else change.p_value})"
    if change.why:
        return f"stopped: {change.why}", text
    return ("bad" if change.verdict == "worse" else "good"), text


def figure_row(comparison: Comparison, plan: BisectPlan) -> Row:
    """The row of the plan's figure (metric and labels) in a comparison; a UserError when it is not there."""
    for bench in comparison.benchmarks:
        for row in bench.rows:
            same = row.metric == plan.metric and all(row.labels.get(k) == v for k, v in plan.labels.items())
            if same and row.change is not None:
                return row
    raise UserError(
        f"the command recorded no figure {plan.metric} {plan.labels or ''}; accepted: a headline figure it records"
    )


def bisect(plan: BisectPlan, good: str, bad: str, report: Callable[[str], None]) -> Bisection:
    """Find the first bad commit between `good` and `bad` (see the module docstring)."""
    commits = ancestry(plan.repo, good, bad)
    found = Bisection(commits)
    measured: dict[str, RunRef] = {}

    def at(commit: str) -> RunRef:
        if commit not in measured:
            measured[commit] = measure(plan, commit, report)
        return measured[commit]

    baseline = at(commits[0])
    if baseline.crashed:
        raise UserError(f"--good {good}: its process failed ({baseline.crashed[0]}); a good commit must run")
    verdict, text = judge_step(plan, baseline, at(commits[-1]))
    found.steps.append((commits[-1], verdict, text))
    report(f"bad {commits[-1][:12]} against good {commits[0][:12]}: {verdict}, {text}")
    if verdict != "bad":
        found.stopped = f"--bad {bad} is not judged worse than --good {good} ({verdict}, {text}): nothing to bisect"
        return found
    low, high = 0, len(commits) - 1  # commits[low] is good, commits[high] is bad
    while high - low > 1:
        middle = (low + high) // 2
        verdict, text = judge_step(plan, baseline, at(commits[middle]))
        found.steps.append((commits[middle], verdict, text))
        report(f"step {commits[middle][:12]}: {verdict}, {text}")
        if verdict == "bad":
            high = middle
        elif verdict == "good":
            low = middle
        else:
            found.stopped = f"at {commits[middle][:12]}: {verdict.removeprefix('stopped: ')}"
            return found
    found.first_bad = commits[high]
    return found
