"""The batch script of a training job: deploy/slurm/fleetbench-train.sbatch with its #SBATCH lines and
its settings rendered from a request.

The template's `#SBATCH` lines are a GPU site's defaults; a rendered script has exactly the
directives of the request instead (no `--gpus-per-node` on a CPU partition), and its settings lines
(`PRESET=${PRESET:-seed}`) become plain assignments (`PRESET=tiny`), so the script kept beside the
results says what ran.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.names import shown

TEMPLATE = Path("slurm") / "fleetbench-train.sbatch"  # under deploy/
JOB_NAME = "fleetbench-train"
SETTING = re.compile(r"^(?P<name>[A-Z_]+)=\$\{(?P=name):-[^}]*\}$")
# fullmatch, not match: `$` also matches before a final newline, which would end the #SBATCH line early.
TIME_LIMIT = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE")
MAX_MINUTES = 0xFFFF_FFFF  # Slurm keeps a time limit in minutes in 32 bits, the top value meaning INFINITE


def _minutes(text: str) -> float:
    """The minutes of a --time TIME_LIMIT matched; inf where a field after the first is 60 or more."""
    if text in ("UNLIMITED", "INFINITE"):
        return 0
    if len(text) > 32:  # beyond any 32-bit count of minutes, and short of int()'s digit limit
        return math.inf
    days, _, rest = text.rpartition("-")
    parts = [int(part) for part in rest.split(":")]
    if any(part > 59 for part in parts[1:]):
        return math.inf
    if days:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = [*parts, 0, 0][:3]
        return int(days) * 1440 + hours * 60 + minutes + seconds / 60
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + parts[2] / 60
    return parts[0] + (parts[1] / 60 if len(parts) == 2 else 0)


# Slurm keeps node counts in 32 bits and CPUs per task in 16, its top two values meaning "unset" and
# "unlimited"; the trainer takes at most 10,000,000 steps (config/train.py).
MAX_NODES = 0xFFFF_FFFD
MAX_PER_NODE = 0xFFFD
MAX_STEPS = 10_000_000


@dataclass(frozen=True)
class JobRequest:
    """What `fleetbench slurm submit` asks for."""

    nodes: int = 2
    gpus_per_node: int = 0
    preset: str = "tiny"
    steps: int = 20
    partition: str | None = None
    time_limit: str | None = None
    cpus_per_task: int | None = None
    checkpoint_every: int = 0
    requeue: bool = False
    collectives: bool = True  # the collectives sweep over the job's nodes before training

    def validate(self) -> None:
        """Refuse what Slurm or the trainer would refuse later, in one line naming the option."""
        from fleetbench.config.train import PRESETS

        _in_range("--nodes", self.nodes, 1, MAX_NODES)
        _in_range("--gpus-per-node", self.gpus_per_node, 0, MAX_PER_NODE, " (0: CPU, gloo)")
        if self.preset not in PRESETS:
            raise UserError(f"--preset {self.preset!r} is not accepted; accepted: {', '.join(PRESETS)}")
        _in_range("--steps", self.steps, 1, MAX_STEPS)
        _in_range("--checkpoint-every", self.checkpoint_every, 0, MAX_STEPS, " (0: none)")
        if self.cpus_per_task is not None:
            _in_range("--cpus-per-task", self.cpus_per_task, 1, MAX_PER_NODE)
        if self.time_limit is not None and (
            not TIME_LIMIT.fullmatch(self.time_limit) or not 0 <= _minutes(self.time_limit) < MAX_MINUTES
        ):
            raise UserError(
                f"--time {shown(self.time_limit)} is not accepted; accepted: Slurm's MINUTES, HH:MM:SS, D-HH:MM:SS "
                f"(minutes and seconds after the first field 0-59, below {MAX_MINUTES} minutes in all) or UNLIMITED"
            )
        if self.partition is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,255}", self.partition):
            raise UserError(
                f"--partition {shown(self.partition)} is not accepted; accepted: a partition name "
                "(1-255 letters, digits, '_', '.', '-')"
            )

    def directives(self, results_dir: str) -> list[str]:
        """The #SBATCH lines of the job; its batch output goes to <results_dir>/slurm-logs/."""
        options = [
            f"--job-name={JOB_NAME}",
            f"--nodes={self.nodes}",
            "--ntasks-per-node=1",
            *([f"--gpus-per-node={self.gpus_per_node}"] if self.gpus_per_node else []),
            *([f"--cpus-per-task={self.cpus_per_task}"] if self.cpus_per_task else []),
            "--exclusive",
            *([f"--time={self.time_limit}"] if self.time_limit else []),
            *([f"--partition={self.partition}"] if self.partition else []),
            "--requeue" if self.requeue else "--no-requeue",
            f"--chdir={results_dir}",
            f"--output={results_dir}/slurm-logs/slurm-%j.out",
        ]
        return [f"#SBATCH {option}" for option in options]

    def settings(self) -> dict[str, str]:
        """The settings lines of the template this request fills in."""
        return {
            "PRESET": self.preset,
            "STEPS": str(self.steps),
            "CHECKPOINT_EVERY": str(self.checkpoint_every),
            "COLLECTIVES": "1" if self.collectives else "0",
        }


def render(template: str, request: JobRequest, results_dir: str) -> str:
    """The template with the request's #SBATCH lines (where the template's were) and settings."""
    settings = request.settings()
    out: list[str] = []
    placed = False
    for line in template.splitlines():
        if line.startswith("#SBATCH"):
            if not placed:
                out.extend(request.directives(results_dir))
                placed = True
            continue
        match = SETTING.match(line)
        if match and match.group("name") in settings:
            name = match.group("name")
            out.append(f"{name}={shlex.quote(settings[name])}")
            continue
        out.append(line)
    if not placed:
        raise UserError("the batch script template has no #SBATCH lines; it is not fleetbench-train.sbatch")
    return "\n".join(out) + "\n"


def batch_output(results_dir: str, job_id: int) -> str:
    """Where Slurm writes the batch script's own output of a job rendered by `render`."""
    return f"{results_dir}/slurm-logs/slurm-{job_id}.out"


def _in_range(option: str, value: int, low: int, high: int, note: str = "") -> None:
    if not low <= value <= high:
        shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:20]}... ({len(str(value))} digits)"
        raise UserError(f"{option} {shown} is not accepted; use {low}-{high}{note}")
