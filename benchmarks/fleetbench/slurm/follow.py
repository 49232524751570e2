"""Following a job: its state until it ends, each node's latest line, cancel, and why it failed.

A job's nodes write their output to <results>/slurm-<job>/slurm/<node>.log (named after its NodeName) on the
shared file system, and the batch script's own output (srun's messages: which task exited how) to
<results>/slurm-logs/slurm-<job>.out; the controller reads both. A failed job is explained with the
node that failed: the one srun names as having exited badly, else the job's nodes that Slurm has
marked down, with the last lines of that node's log.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fleetbench.errors import UserError
from fleetbench.slurm import queries
from fleetbench.slurm.controller import Controller
from fleetbench.slurm.script import batch_output

POLL_S = 2.0
# A requeued job (sbatch --requeue) passes through NODE_FAIL before it is pending again.
REQUEUE_GRACE_S = 20.0
SRUN_TASK_ERROR = re.compile(r"srun: error: (\S+): tasks? [\d,-]+: (.+)")
SRUN_NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
# Exit statuses of the tasks Slurm itself ended after another task or node failed (SIGTERM, SIGKILL).
ENDED_BY_SLURM = ("exit code 143", "exit code 137", "Killed", "Terminated")
TAIL_LINES = 15
# Native stack frames of a C++ exception (torch's): the lines around them say more in a log tail.
NATIVE_FRAME = re.compile(r"^(frame #\d+: |<omitting python frames>)")


@dataclass
class Progress:
    """What a poll saw: the job, each node's latest line, and the states it went through."""

    job: queries.JobInfo
    last_lines: dict[str, str] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Failure:
    """Why a job did not complete: its state and reason, the failing nodes and their log tails."""

    job: queries.JobInfo
    nodes: dict[str, str]  # node -> why (srun's message, or Slurm's node state and reason)
    tails: dict[str, str]  # node (or "batch") -> its last lines

    def headline(self) -> str:
        """One line: the job, its state, reason and exit, and the failing nodes."""
        job = self.job
        parts = [f"job {job.job_id} {job.state}"]
        if job.reason:
            parts.append(f"({job.reason})")
        if job.exit_code:
            parts.append(f"exit code {job.exit_code}")
        if job.signal:
            parts.append(f"signal {job.signal}")
        where = "; ".join(f"{node}: {why}" for node, why in self.nodes.items())
        return " ".join(parts) + (f" on {job.nodes}" if job.nodes else "") + (f" - {where}" if where else "")


# Slurm's job ids stop at 0x03ffffff (slurm.conf MaxJobId: "may not exceed 67108863").
MAX_JOB_ID = 67_108_863


def job_id_of(text: str) -> int:
    """A job id as typed (`42`): ASCII digits within Slurm's range; UserError otherwise (before any network)."""
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    if not (text.isascii() and text.isdigit()) or len(text) > 8 or not 1 <= int(text) <= MAX_JOB_ID:
        raise UserError(
            f"job id {shown!r} is not accepted; accepted: the number sbatch printed, 1-{MAX_JOB_ID} (e.g. 42)"
        )
    return int(text)


def require(controller: Controller, job_id: int) -> queries.JobInfo:
    """The job, or a UserError when Slurm knows nothing of it."""
    found = queries.job(controller, job_id)
    if found is None:
        raise UserError(
            f"job {job_id} is not known to slurmctld on {controller.describe()} (nor to its job completion log)"
        )
    return found


def last_lines(controller: Controller, results_dir: str, job_id: int) -> dict[str, str]:
    """Each node's latest non-empty output line of the job (node -> line)."""
    folder = f"{results_dir}/{queries.run_id_of(job_id)}/slurm"
    script = (
        'for f in "$1"/*.log; do [ -f "$f" ] || continue; '
        'printf "%s\\t%s\\n" "$(basename "$f" .log)" "$(grep -v "^[[:space:]]*$" "$f" | tail -n 1)"; done'
    )
    done = controller.run(["sh", "-c", script, "sh", folder], timeout=30)
    lines = {}
    for row in str(done.stdout).splitlines():
        node, _, line = row.partition("\t")
        if node:
            lines[node] = " ".join(line.split())
    return lines


def poll(controller: Controller, job_id: int, results_dir: str, progress: Progress | None) -> Progress:
    """One look at the job: its state and its nodes' latest lines, added to `progress`."""
    job = require(controller, job_id)
    current = progress or Progress(job)
    current.job = job
    word = f"{job.state}" + (f" (restart {job.restarts})" if job.restarts else "")
    if not current.history or current.history[-1] != word:
        current.history.append(word)
    if job.state in {"RUNNING", "COMPLETING"} or job.final:
        current.last_lines = last_lines(controller, results_dir, job_id) or current.last_lines
    return current


def wait(
    controller: Controller,
    job_id: int,
    results_dir: str,
    on_poll: Callable[[Progress], None],
    timeout_s: float | None = None,
) -> Progress:
    """Poll until the job has ended for good (a NODE_FAIL of a requeueable job waits for its requeue);
    `on_poll` sees every poll. UserError (exit 1) when `timeout_s` passes first."""
    started = time.monotonic()
    progress: Progress | None = None
    final_since: float | None = None
    while True:
        progress = poll(controller, job_id, results_dir, progress)
        on_poll(progress)
        job = progress.job
        if job.final:
            if not (job.requeue and job.state == "NODE_FAIL"):
                return progress
            final_since = final_since or time.monotonic()
            if time.monotonic() - final_since > REQUEUE_GRACE_S:
                return progress
        else:
            final_since = None
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise UserError(
                f"job {job_id} is still {job.state} after {timeout_s:.0f} s; `fleetbench slurm wait {job_id}` goes on",
                exit_code=1,
            )
        time.sleep(POLL_S)


def _tail(controller: Controller, path: str, lines: int = TAIL_LINES) -> str:
    done = controller.run(["tail", "-n", str(lines), path], timeout=30)
    return str(done.stdout).rstrip() if done.returncode == 0 else ""


def failing_nodes(controller: Controller, job: queries.JobInfo, batch: str) -> dict[str, str]:
    """The job's nodes that failed it, and why: those srun reports a node failure on, and the job's
    nodes Slurm has marked down; else the first task srun reports as exited badly, and any other
    that did not just end by the SIGTERM or SIGKILL Slurm sends the rest after the first failure."""
    failing = {m.group(1): "node failure" for m in SRUN_NODE_FAILURE.finditer(batch)}
    if job.state == "NODE_FAIL" or failing:
        names = set(controller.check(["scontrol", "show", "hostnames", job.nodes]).split()) if job.nodes else set()
        for node in queries.nodes(controller):
            if node.name in names and not node.usable:
                state = f"{node.state}{'' if node.responding else ', not responding'}"
                failing[node.name] = f"{state}" + (f" ({node.reason})" if node.reason else "")
        if failing:
            return failing
    tasks: dict[str, str] = {}
    for match in SRUN_TASK_ERROR.finditer(batch):  # in the order srun saw them: the first one failed first
        tasks.setdefault(match.group(1), match.group(2).strip())
    first = dict(list(tasks.items())[:1])
    return first | {node: why for node, why in tasks.items() if not why.endswith(ENDED_BY_SLURM)}


def log_tail(text: str) -> str:
    """The last TAIL_LINES lines of a node's log, native stack frames left out."""
    lines = [line for line in text.splitlines() if not NATIVE_FRAME.match(line)]
    return "\n".join(lines[-TAIL_LINES:])


def explain(controller: Controller, job: queries.JobInfo, results_dir: str) -> Failure:
    """Why `job` did not complete: its failing nodes (`failing_nodes`) with the last lines of their
    logs, and the last lines of the batch output."""
    batch = _tail(controller, batch_output(results_dir, job.job_id), lines=500)
    failing = failing_nodes(controller, job, batch)
    folder = f"{results_dir}/{queries.run_id_of(job.job_id)}/slurm"
    tails = {node: log_tail(_tail(controller, f"{folder}/{node}.log", lines=500)) for node in failing}
    if batch:
        tails["batch"] = "\n".join(batch.splitlines()[-TAIL_LINES:])
    return Failure(job, failing, {k: v for k, v in tails.items() if v})


def cancel(controller: Controller, job_id: int, timeout_s: float = 60) -> queries.JobInfo:
    """scancel the job and wait until Slurm reports it ended; the job as it ended."""
    job = require(controller, job_id)
    if job.final:
        raise UserError(f"job {job_id} has already ended ({job.state}); nothing to cancel")
    controller.check(["scancel", str(job_id)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = require(controller, job_id)
        if job.final:
            return job
        time.sleep(1)
    raise UserError(f"job {job_id} is still {job.state} {timeout_s:.0f} s after scancel", exit_code=1)
