"""What `fleetbench slurm` shows a person: the nodes, a job's live progress, how it ended and why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from fleetbench.slurm.follow import Failure, Progress
    from fleetbench.slurm.queries import JobInfo, SlurmNode

STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}


def nodes_table(nodes: list[SlurmNode]) -> Table:
    """sinfo as a table: partition (default marked *), node, state, CPUs, GPUs, reason."""
    table = Table(title="Slurm nodes")
    for column in ("partition", "node", "state", "cpus", "gpus", "reason"):
        table.add_column(column, justify="right" if column in {"cpus", "gpus"} else "left")
    for node in nodes:
        state = node.state + ("" if node.responding else " (not responding)")
        table.add_row(
            node.partition + ("*" if node.default else ""),
            node.name,
            Text(state, style="green" if node.usable else "red"),
            str(node.cpus),
            str(node.gpus),
            node.reason,
        )
    return table


def _elapsed(job: JobInfo) -> str:
    if not job.start:
        return "-"
    seconds = int((job.end or time.time()) - job.start)
    return f"{seconds // 60}:{seconds % 60:02d}"


def progress_view(progress: Progress) -> Group:
    """The live view of a job: its state line, then each node's latest output line."""
    job = progress.job
    head = Text.assemble(
        (f"job {job.job_id} ", "bold"),
        (job.state, STATE_STYLE.get(job.state, "red" if job.final else "yellow")),
        f"  {job.reason}" if job.reason and job.reason != "None" else "",
        f"  nodes {job.nodes or '-'}  elapsed {_elapsed(job)}",
        f"  restarts {job.restarts}" if job.restarts else "",
    )
    table = Table(show_header=True, box=None, pad_edge=False)
    table.add_column("node", style="bold")
    table.add_column("latest output", overflow="ellipsis", no_wrap=True)
    for node, line in sorted(progress.last_lines.items()):
        table.add_row(node, line)
    return Group(head, table)


def print_submitted(console: Console, job_id: int, partition: str, controller: str, nodes: int) -> None:
    """The line after sbatch accepted the job."""
    console.print(
        f"submitted job {job_id} to partition {partition} on {controller}: {nodes} node(s), run id slurm-{job_id}",
        markup=False,
        highlight=False,
    )


def print_end(console: Console, progress: Progress) -> None:
    """How the job ended, with the states it went through."""
    job = progress.job
    style = "green" if job.state == "COMPLETED" else "red"
    console.print(
        Text.assemble(
            (f"job {job.job_id} {job.state}", f"bold {style}"),
            f" after {_elapsed(job)} on {job.nodes or '-'}",
            f" (states: {' -> '.join(progress.history)})" if len(progress.history) > 1 else "",
        )
    )


def print_failure(console: Console, failure: Failure) -> None:
    """The failed job's one-line headline, then the last lines of each failing node's log."""
    console.print(Text(failure.headline(), style="bold red"))
    for node, tail in failure.tails.items():
        title = "batch script output" if node == "batch" else f"{node} log"
        console.print(Text(f"--- {title} (last lines) ---", style="bold"))
        console.print(tail, markup=False, highlight=False)


def print_collected(console: Console, run_dir: Path, ranks: list[int], losses: list[tuple[object, object]]) -> None:
    """Where the results are, the ranks that wrote records and their loss first -> last."""
    console.print(f"results: {run_dir}", markup=False, highlight=False, soft_wrap=True)
    if ranks:
        shown = ", ".join(dict.fromkeys(f"{first} -> {last}" for first, last in losses if first is not None))
        console.print(
            f"records of rank(s) {', '.join(map(str, ranks))}" + (f"; loss {shown}" if shown else ""),
            markup=False,
            highlight=False,
        )
    else:
        console.print("no result records (the job failed before a rank wrote one)", markup=False, highlight=False)
