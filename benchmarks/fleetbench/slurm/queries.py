"""What Slurm says: partitions and nodes (sinfo), a job's state (squeue --json, else scontrol, and the
job completion log once slurmctld has forgotten the job), and the site's job settings.

Without slurmdbd there is no `sacct`: while slurmctld remembers a job (MinJobAge after its end)
`squeue --json` gives its state, reason and exit code; afterwards the line that
`JobCompType=jobcomp/filetxt` wrote for it does.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass
from typing import Any

from fleetbench.errors import UserError
from fleetbench.slurm.controller import Controller

SITE_ENV = "/etc/fleetbench/slurm.env"
# States after which a job does not run again (a requeued one shows PENDING or REQUEUED instead).
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
)
USABLE_NODE_STATES = frozenset({"idle", "allocated", "mixed", "completing", "planned"})
KEY_VALUE = re.compile(r"(\w[\w/:.]*)=(\S*)")


@dataclass(frozen=True)
class SlurmNode:
    """A node of a partition as sinfo shows it: its name, state word, reason and GPUs."""

    name: str
    partition: str
    default: bool  # the partition is the cluster's default
    state: str  # Slurm's word in lower case, flags dropped (idle, allocated, down, drained, ...)
    responding: bool  # no `*` flag
    reason: str
    gpus: int
    cpus: int

    @property
    def usable(self) -> bool:
        """Whether it can take a job now (up and not draining)."""
        return self.responding and self.state in USABLE_NODE_STATES


@dataclass(frozen=True)
class JobInfo:
    """One job as Slurm last reported it."""

    job_id: int
    name: str
    state: str  # RUNNING, PENDING, COMPLETED, FAILED, NODE_FAIL, ...
    reason: str
    exit_code: int | None  # the batch script's status; None when unknown
    signal: int | None
    nodes: str  # Slurm's host list, e.g. node[2-3]
    node_count: int
    batch_host: str
    start: int | None  # Unix time
    end: int | None
    restarts: int
    requeue: bool
    source: str  # squeue, scontrol or jobcomp

    @property
    def final(self) -> bool:
        """Whether the job has ended for good."""
        return self.state in FINAL_STATES

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON object, with the run id of its results."""
        return {**asdict(self), "run_id": run_id_of(self.job_id)}


def run_id_of(job_id: int) -> str:
    """The run id (and run folder name) of a job's results: slurm-<job id>."""
    return f"slurm-{job_id}"


def state_word(raw: str) -> tuple[str, bool]:
    """(state in lower case without flags, responding) of an sinfo state such as `down*` or `idle~`."""
    text = raw.strip().lower()
    return text.rstrip("*~#!%$@^-+"), "*" not in text


def gres_gpus(gres: str) -> int:
    """GPUs in an sinfo %G field: `gpu:8`, `gpu:h100:8(S:0-1)`, `gpu:2,shard:4` -> 8, 8, 2; `(null)` -> 0."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def parse_sinfo(text: str) -> list[SlurmNode]:
    """Rows of `sinfo --noheader --Node --format %N|%P|%T|%G|%c|%E` (the reason last: it may hold `|`)."""
    nodes = []
    for line in text.splitlines():
        parts = line.split("|", 5)
        if len(parts) != 6:
            continue
        name, partition, state, gres, cpus, reason = parts
        word, responding = state_word(state)
        nodes.append(
            SlurmNode(
                name.strip(),
                partition.strip().rstrip("*"),
                partition.strip().endswith("*"),
                word,
                responding,
                "" if reason.strip() == "none" else reason.strip(),
                gres_gpus(gres.strip()),
                int(cpus) if cpus.strip().isdigit() else 0,
            )
        )
    return nodes


def nodes(controller: Controller) -> list[SlurmNode]:
    """Every node of every partition (a node in two partitions is listed twice)."""
    text = controller.check(["sinfo", "--noheader", "--Node", "--format", "%N|%P|%T|%G|%c|%E"])
    return parse_sinfo(text)


def site_settings(controller: Controller) -> dict[str, str]:
    """The job settings the slurm role wrote on the nodes (KEY=VALUE lines of /etc/fleetbench/slurm.env)."""
    done = controller.run(["cat", SITE_ENV])
    if done.returncode != 0:
        raise UserError(
            f"{SITE_ENV} is missing on {controller.describe()}: deploy the slurm playbook first "
            "(`make deploy PLAYBOOK=slurm`, or `make cluster-up SLURM=1` for the local cluster)"
        )
    return parse_env(str(done.stdout))


def parse_env(text: str) -> dict[str, str]:
    """KEY=VALUE lines (shell-quoted values; comments and blank lines skipped)."""
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        words = shlex.split(value) if value else [""]
        settings[key.strip()] = words[0] if words else ""
    return settings


def _first(value: Any) -> Any:
    """squeue --json gives a state as a string (22.05) or a list of flags (23.02 and later)."""
    return value[0] if isinstance(value, list) and value else value


def _number(value: Any) -> int | None:
    """An integer field of squeue --json: a plain number (22.05) or {set, infinite, number} (later)."""
    if isinstance(value, dict):
        return int(value["number"]) if value.get("set") and not value.get("infinite") else None
    return int(value) if isinstance(value, int | float) else None


def _wait_status(raw: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) of a wait status as squeue --json reports a job's `exit_code` (22.05)."""
    if raw is None:
        return None, None
    return (raw >> 8) & 0xFF, (raw & 0x7F) or None


def parse_squeue_json(text: str, job_id: int) -> JobInfo | None:
    """Job `job_id` in `squeue --json` output, or None when slurmctld no longer lists it."""
    for job in json.loads(text).get("jobs", []):
        if _number(job.get("job_id")) != job_id:
            continue
        raw_exit = job.get("exit_code")
        if isinstance(raw_exit, dict) and "return_code" in raw_exit:  # 23.02 and later
            code, signal = _number(raw_exit.get("return_code")), _number((raw_exit.get("signal") or {}).get("id"))
        else:
            code, signal = _wait_status(_number(raw_exit))
        return JobInfo(
            job_id=job_id,
            name=str(job.get("name", "")),
            state=str(_first(job.get("job_state")) or "UNKNOWN").upper(),
            reason="" if job.get("state_reason") in (None, "", "None") else str(job["state_reason"]),
            exit_code=code,
            signal=signal,
            nodes=str(job.get("nodes") or ""),
            node_count=_number(job.get("node_count")) or 0,
            batch_host=str(job.get("batch_host") or ""),
            start=_number(job.get("start_time")) or None,
            end=_number(job.get("end_time")) or None,
            restarts=_number(job.get("restart_cnt")) or 0,
            requeue=bool(job.get("requeue")),
            source="squeue",
        )
    return None


def parse_key_values(line: str, job_id: int, source: str) -> JobInfo:
    """A job from one `Key=Value ...` line (`scontrol -o show job`, or the jobcomp/filetxt log)."""
    fields: dict[str, str] = dict(KEY_VALUE.findall(line))
    code, _, signal = fields.get("ExitCode", "").partition(":")
    return JobInfo(
        job_id=job_id,
        name=fields.get("JobName") or fields.get("Name") or "",
        state=fields.get("JobState", "UNKNOWN").upper(),
        reason="" if fields.get("Reason", "None") == "None" else fields.get("Reason", ""),
        exit_code=int(code) if code.isdigit() else None,
        signal=int(signal) if signal.isdigit() and int(signal) else None,
        nodes=fields.get("NodeList", ""),
        node_count=int((fields.get("NumNodes") or fields.get("NodeCnt") or "0").split("-")[0] or 0),
        batch_host=fields.get("BatchHost", ""),
        start=None,
        end=None,
        restarts=int(fields.get("Restarts", "0") or 0),
        requeue=fields.get("Requeue", "0") == "1",
        source=source,
    )


def job(controller: Controller, job_id: int) -> JobInfo | None:
    """The job's state from squeue (or scontrol where squeue has no --json), else from the job
    completion log; None when Slurm knows nothing of it."""
    done = controller.run(["squeue", "--json"])
    if done.returncode == 0:
        found = parse_squeue_json(str(done.stdout), job_id)
    else:  # no --json in this Slurm: scontrol's one-line form
        shown = controller.run(["scontrol", "--oneliner", "show", "job", str(job_id)])
        text = str(shown.stdout).strip()
        found = parse_key_values(text, job_id, "scontrol") if shown.returncode == 0 and text else None
    return found or completed_job(controller, job_id)


def completed_job(controller: Controller, job_id: int) -> JobInfo | None:
    """The job's line in the job completion log (jobcomp/filetxt), or None."""
    config = controller.run(["scontrol", "show", "config"])
    settings = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", str(config.stdout), flags=re.MULTILINE))
    if settings.get("JobCompType") != "jobcomp/filetxt" or not settings.get("JobCompLoc"):
        return None
    found = controller.run(["grep", "-E", f"^JobId={job_id} ", settings["JobCompLoc"]])
    lines = str(found.stdout).strip().splitlines()
    return parse_key_values(lines[-1], job_id, "jobcomp") if found.returncode == 0 and lines else None
