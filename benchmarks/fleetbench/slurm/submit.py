"""`fleetbench slurm submit`: check the request against the partition, render the batch script, sbatch it.

Everything that can be refused is refused before sbatch runs (no job is left queued by a bad
request): the options themselves, then what sinfo says of the partition: that it exists, has that
many nodes, that many of them up, and the GPUs asked for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.slurm import queries
from fleetbench.slurm.controller import Controller
from fleetbench.slurm.script import TEMPLATE, JobRequest, render

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submitted:
    """A submitted job: its id, the partition's nodes it may run on, the script and the site settings."""

    job_id: int
    partition: str
    script: str
    settings: dict[str, str]

    @property
    def run_id(self) -> str:
        """The run id of its results (the run folder under the results dir)."""
        return queries.run_id_of(self.job_id)


def partition_of(request: JobRequest, all_nodes: list[queries.SlurmNode]) -> tuple[str, list[queries.SlurmNode]]:
    """The partition the job goes to (the named one, else the default) and its nodes; UserError if none."""
    names = sorted({n.partition for n in all_nodes})
    if request.partition is not None:
        name = request.partition
        if name not in names:
            raise UserError(f"--partition {name!r} does not exist; accepted: {', '.join(names) or 'none (no nodes)'}")
    else:
        defaults = sorted({n.partition for n in all_nodes if n.default})
        if not defaults:
            raise UserError(f"the cluster has no default partition; pass --partition ({', '.join(names) or 'none'})")
        name = defaults[0]
    return name, [n for n in all_nodes if n.partition == name]


def check_capacity(request: JobRequest, all_nodes: list[queries.SlurmNode]) -> str:
    """Refuse a request the partition cannot run now (UserError); returns the partition's name."""
    name, members = partition_of(request, all_nodes)
    if request.nodes > len(members):
        listed = ", ".join(n.name for n in members)
        raise UserError(
            f"--nodes {request.nodes} is more than partition {name} has ({len(members)}: {listed}); "
            f"accepted: 1-{len(members)}"
        )
    usable = [n for n in members if n.usable]
    if request.nodes > len(usable):
        down = "; ".join(
            f"{n.name} {n.state}{'' if n.responding else ' (not responding)'}" for n in members if not n.usable
        )
        raise UserError(
            f"--nodes {request.nodes}: only {len(usable)} of the {len(members)} nodes of partition {name} can take a "
            f"job now ({down}); accepted: 1-{len(usable)}, or bring the nodes back"
        )
    fitting = [n for n in usable if n.gpus >= request.gpus_per_node]
    if request.gpus_per_node and len(fitting) < request.nodes:
        most = max((n.gpus for n in usable), default=0)
        raise UserError(
            f"--gpus-per-node {request.gpus_per_node}: {len(fitting)} usable node(s) of partition {name} have that "
            f"many GPUs (the most is {most}); accepted: 0-{most}"
        )
    return name


def submit(controller: Controller, request: JobRequest, deploy_dir: Path) -> Submitted:
    """Validate, check the partition, render the script and submit it with sbatch; the job's id."""
    request.validate()
    template_path = deploy_dir / TEMPLATE
    try:
        template = template_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read the batch script {template_path} ({exc.strerror or exc})") from None
    settings = queries.site_settings(controller)
    results_dir = settings.get("RESULTS_DIR", "")
    if not results_dir.startswith("/"):
        raise UserError(
            f"RESULTS_DIR={results_dir!r} in {queries.SITE_ENV} on {controller.describe()} is not an absolute "
            "path; set slurm_results_dir in the inventory and deploy the slurm playbook"
        )
    partition = check_capacity(request, queries.nodes(controller))
    script = render(template, request, results_dir)
    out = controller.check(["sbatch", "--parsable"], stdin=script, timeout=60)
    first = out.strip().split(";")[0]
    if not first.isdigit():
        raise UserError(f"sbatch on {controller.describe()} printed {out.strip()!r} instead of a job id")
    log.debug("submitted job %s to partition %s on %s", first, partition, controller.describe())
    return Submitted(int(first), partition, script, settings)
