"""`compare --rounds N`: base and new in N separate processes each, interleaved, like asv continuous.

Each side is one benchmark command of the `fleetbench` CLI (the stable interface) with its own
`--set` overrides, or the same command at another commit: `--base-rev`/`--new-rev` check the
commits out with `git worktree add --detach` into a temporary folder and run each side's processes
on that checkout's `benchmarks/` (PYTHONPATH first, so the installed copy is not used); the
worktrees are removed at the end. Rounds alternate the order (base new, new base, ...) so a drift of
the machine over the minutes of a comparison falls on both sides alike. Every process is a run
folder of its own under the results root (`<prefix>-base-01`, `<prefix>-new-01`, ...), so the
processes stay inspectable, and history sees them. A process of base that fails stops the
comparison (exit 2: there is nothing to compare against); one of new that fails stops it too,
and is reported as an introduced failure (exit 1).

Around each process the load average and the CPU time stolen by the hypervisor are read (`Load`): a
comparison whose processes ran on a busy machine is "unstable" (compare/stability.py). A SIGTERM
while the worktrees exist ends the command as Ctrl-C does, after removing them (exit 130). When the
sides run commits, uncommitted changes of the repository are not what is measured, and a note says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fleetbench.compare.matching import RunRef
from fleetbench.compare.validity import check_records
from fleetbench.errors import Terminated, UserError
from fleetbench.results.load import Load, cpu_times, load_between
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import RECORDS_FILE, read_records
from fleetbench.runinfo import new_run_id

# The commands that run a benchmark and take --set, --run-id and --results-dir.
JOB_COMMANDS = ("probe", "train", "profile", "edge", "trace", "ncu", "roofline")
OWN_OPTIONS = ("--run-id", "--results-dir")  # set by the rounds for every process
BAD_INPUT = 2

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its name, its --set overrides, and the commit it runs (None: this checkout)."""

    name: str
    overrides: tuple[str, ...] = ()
    rev: str | None = None


@dataclass(frozen=True)
class RoundsPlan:
    """What `compare --rounds` runs: the command, how many rounds, where, and the two sides."""

    command: tuple[str, ...]
    rounds: int
    results_root: Path
    base: Side
    new: Side
    prefix: str = ""
    repo: Path = Path(".")


@dataclass
class Outcome:
    """What the rounds produced: each side's process records, processes without records, and the time."""

    records: dict[str, list[ResultRecord]] = field(default_factory=lambda: {"base": [], "new": []})
    crashed: dict[str, list[str]] = field(default_factory=lambda: {"base": [], "new": []})
    seconds: list[float] = field(default_factory=list)
    run_ids: dict[str, list[str]] = field(default_factory=lambda: {"base": [], "new": []})
    prefix: str = ""
    load: dict[str, list[Load]] = field(default_factory=lambda: {"base": [], "new": []})


def check_command(command: tuple[str, ...]) -> None:
    """A benchmark command of the CLI, without the options the rounds set themselves."""
    if not command or command[0] not in JOB_COMMANDS:
        got = repr(command[0]) if command else "nothing"
        raise UserError(
            f"--rounds runs a benchmark command, got {got}; accepted: {', '.join(JOB_COMMANDS)} "
            "with its options, e.g. fleetbench compare --rounds 10 -- probe --set probe.threads=1"
        )
    own = [arg.split("=", 1)[0] for arg in command if arg.split("=", 1)[0] in OWN_OPTIONS]
    if own:
        raise UserError(f"{own[0]}: --rounds sets each process's run id and results folder; drop it from the command")


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"git {' '.join(args[:2])} in {repo}: {exc}") from None
    if done.returncode != 0:
        line = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise UserError(f"git {' '.join(args)} in {repo}: {line}")
    return done.stdout.strip()


def commit_of(repo: Path, side: Side) -> str:
    """The full commit id a side's --rev names in `repo`; a UserError naming the rev otherwise."""
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{side.rev}^{{commit}}")
    except UserError:
        raise UserError(
            f"--{side.name}-rev {side.rev!r} is not a commit of {repo}; accepted: a branch, tag or commit "
            "of the repository --repo names (default: the current folder)"
        ) from None


def check_overrides(sides: tuple[Side, ...]) -> None:
    """Each side's --set overrides, validated as the benchmark's config would be, before any process runs."""
    from fleetbench.config.loader import load_config

    for side in sides:
        try:
            load_config(None, list(side.overrides))
        except UserError as exc:
            raise UserError(f"--{side.name}-set: {exc}") from None


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(
        f"interrupted by signal {signum} (SIGTERM)"
    )  # unwinds through the `finally` that removes the worktrees


@contextlib.contextmanager
def terminated_as_exit() -> Iterator[None]:
    """While inside, SIGTERM raises Terminated (an interrupt: exit 130), so every `finally` runs (the main
    thread only), also where the CLI's own handler is not installed."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def uncommitted_note(repo: Path) -> str:
    """A note when `repo` has uncommitted changes to tracked files: the commits run, not those changes."""
    try:
        changed = _git(repo, "status", "--porcelain", "--untracked-files=no")
    except UserError:
        return ""
    if not changed:
        return ""
    return (
        f"note: {repo} has uncommitted changes ({len(changed.splitlines())} file(s)); the revisions are checked "
        "out from their commits, so those changes are not what is measured"
    )


@contextlib.contextmanager
def checkouts(
    repo: Path, sides: tuple[Side, ...], report: Callable[[str], None] | None = None
) -> Iterator[dict[str, Path]]:
    """The sides' commits checked out with `git worktree add --detach` (removed at the end, SIGTERM
    included): name -> source. Revisions that do not exist are refused before anything is made."""
    wanted = [side for side in sides if side.rev]
    if not wanted:
        yield {}
        return
    commits = {side.name: commit_of(repo, side) for side in wanted}
    if report is not None and (note := uncommitted_note(repo)):
        report(note)
    with terminated_as_exit(), worktrees(repo, {side.name: commits[side.name] for side in wanted}) as trees:
        for side in wanted:
            if not (trees[side.name] / "benchmarks" / "fleetbench").is_dir():
                raise UserError(
                    f"--{side.name}-rev {side.rev}: commit {commits[side.name][:12]} has no benchmarks/fleetbench"
                )
        yield {name: tree / "benchmarks" for name, tree in trees.items()}


@contextlib.contextmanager
def worktrees(repo: Path, commits: dict[str, str]) -> Iterator[dict[str, Path]]:
    """Detached worktrees of `commits` (name -> commit) in a temporary folder; removed on any exit."""
    folder = Path(tempfile.mkdtemp(prefix="fleetbench-rounds-"))
    made: list[Path] = []
    try:
        trees = {}
        for name, commit in commits.items():
            tree = folder / name
            made.append(tree)  # before `add`: a SIGTERM during it leaves a locked, half-made worktree
            _git(repo, "worktree", "add", "--detach", str(tree), commit)
            trees[name] = tree
        yield trees
    finally:
        for tree in made:
            with contextlib.suppress(UserError):
                _git(repo, "worktree", "unlock", str(tree))
            with contextlib.suppress(UserError):
                _git(repo, "worktree", "remove", "--force", "--force", str(tree))
        shutil.rmtree(folder, ignore_errors=True)
        if made:
            with contextlib.suppress(UserError):
                _git(repo, "worktree", "prune")


def process_argv(plan: RoundsPlan, side: Side, run_id: str) -> list[str]:
    """The command line of one process."""
    sets = [arg for override in side.overrides for arg in ("--set", override)]
    return [sys.executable, "-m", "fleetbench", *plan.command, *sets,
            "--results-dir", str(plan.results_root), "--run-id", run_id]  # fmt: skip


def run_process(argv: list[str], source: Path | None) -> subprocess.CompletedProcess[str]:
    """One process of one side, with that side's checkout first on the import path."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [env.get("PYTHONPATH")])])
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    except OSError as exc:
        raise UserError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _collect(plan: RoundsPlan, side: Side, run_id: str, done: subprocess.CompletedProcess[str], out: Outcome) -> bool:
    """File one finished process; False when the rounds must stop (a failure)."""
    folder = plan.results_root / run_id
    records = read_records(folder) if (folder / RECORDS_FILE).is_file() else []
    out.records[side.name] += records
    out.run_ids[side.name].append(run_id)
    if done.returncode == 0:
        return True
    why = f"{run_id}: exit {done.returncode}: {_last_line(done.stderr)}"
    if side.name == "base" or done.returncode == BAD_INPUT:
        raise UserError(f"--rounds: {side.name} process {why}", exit_code=BAD_INPUT)
    if not records:
        out.crashed[side.name].append(why)
    return False


def run_rounds(plan: RoundsPlan, sources: dict[str, Path], report: Callable[[str], None]) -> Outcome:
    """Run the rounds, alternating the order each round; stops at the first failed process."""
    prefix = plan.prefix or f"rounds-{new_run_id()}"
    out = Outcome(prefix=prefix)
    for index in range(plan.rounds):
        order = (plan.base, plan.new) if index % 2 == 0 else (plan.new, plan.base)
        for side in order:
            run_id = f"{prefix}-{side.name}-{index + 1:02d}"
            started, before = time.monotonic(), cpu_times()
            done = run_process(process_argv(plan, side, run_id), sources.get(side.name))
            out.seconds.append(time.monotonic() - started)
            out.load[side.name].append(load_between(before, cpu_times()))
            load = out.load[side.name][-1]
            steal = f", steal {load.steal_pct:.1f} %" if load.steal_pct else ""
            report(f"round {index + 1}/{plan.rounds} {side.name}: {run_id} exit {done.returncode} "
                   f"({out.seconds[-1]:.1f} s, load {load.load1:.2f} on {load.cores} cores{steal})")  # fmt: skip
            if not _collect(plan, side, run_id, done, out):
                report(f"{side.name} failed in round {index + 1}: the remaining rounds are not run")
                return out
    return out


def side_ref(outcome: Outcome, side: Side, label: str) -> RunRef:
    """One side's processes as a run of the comparison (figures checked like any run's)."""
    records = outcome.records[side.name]
    ref = RunRef(label, f"{outcome.prefix}-{side.name}", records, processes=len(outcome.run_ids[side.name]),
                 crashed=tuple(outcome.crashed[side.name]), rounds=outcome.prefix,
                 load=tuple(outcome.load[side.name]))  # fmt: skip
    check_records(label, records)
    return ref


def describe_side(side: Side) -> str:
    """`new (probe.threads=1 @ abc123)`: the side's overrides and commit, for its label."""
    parts = [*side.overrides, *([f"@ {side.rev}"] if side.rev else [])]
    return f"{side.name} ({', '.join(parts)})" if parts else side.name
