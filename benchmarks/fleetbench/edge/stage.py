"""The demo's edge stage: the quick kernel set on this machine's adapter and, where ExecuTorch is
installed, the trainer's tiny model exported (XNNPACK) and timed against eager PyTorch."""

from __future__ import annotations

import logging

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.edge import run as edge_job
from fleetbench.edge.plan import quick
from fleetbench.edge.run import EdgeOutcome
from fleetbench.errors import UserError
from fleetbench.job import Job, JobResult, RunContext

# Fewer timed passes than a full `edge run --pte`: the stage shows the path, in seconds.
STAGE_PTE_WARMUP = 5
STAGE_PTE_ITERATIONS = 30

log = logging.getLogger(__name__)


def run_stage(config: FleetbenchConfig, context: RunContext) -> JobResult[EdgeOutcome]:
    """The quick set, plus the exported model when the [mobile] extra is there; seconds on lavapipe."""
    from fleetbench.edge import pte
    from fleetbench.edge.model_factory import build

    edge = quick(config.edge)
    try:
        pte.require_executorch()
    except UserError as exc:
        log.warning("edge models skipped: %s", exc)
    else:
        out_dir = context.folder("edge") / "models"
        out_dir.mkdir(parents=True, exist_ok=True)
        with context.progress.task("edge", "exporting the tiny model to ExecuTorch (XNNPACK) ...") as task:
            built = build(edge.module, edge.seed, edge.model_batch)
            exported = pte.export(
                built, ["xnnpack"], out_dir, edge.seed, edge.model_batch, strict=True, on_step=task.update
            )
        program = next(r.path for r in exported if r.path is not None)
        edge = edge.model_copy(
            update={"pte": program, "pte_warmup": STAGE_PTE_WARMUP, "pte_iterations": STAGE_PTE_ITERATIONS}
        )
    return edge_job.run(config.model_copy(update={"edge": edge}), context)


JOB: Job[EdgeOutcome] = run_stage
