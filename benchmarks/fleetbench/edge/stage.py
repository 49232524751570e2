"""The demo's edge stage: the quick kernel set on this machine's adapter and, where ExecuTorch is
installed, the trainer's tiny model exported (XNNPACK) and timed against eager PyTorch."""

from __future__ import annotations

import logging

from rich.console import Console

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.edge import run as edge_job
from fleetbench.edge.plan import quick
from fleetbench.errors import UserError
from fleetbench.results.record import ResultRecord
from fleetbench.runinfo import new_run_id

# Fewer timed passes than a full `edge run --pte`: the stage shows the path, in seconds.
STAGE_PTE_WARMUP = 5
STAGE_PTE_ITERATIONS = 30

log = logging.getLogger(__name__)


def run_stage(config: FleetbenchConfig, console: Console) -> ResultRecord:
    """The quick set, plus the exported model when the [mobile] extra is there; seconds on lavapipe."""
    from fleetbench.edge import pte
    from fleetbench.edge.model_factory import build

    edge = quick(config.edge)
    run_id = config.run.run_id or new_run_id()
    config = config.model_copy(update={"run": config.run.model_copy(update={"run_id": run_id})})
    try:
        pte.require_executorch()
    except UserError as exc:
        log.warning("edge models skipped: %s", exc)
    else:
        out_dir = config.run.results_dir / run_id / "edge" / "models"
        out_dir.mkdir(parents=True, exist_ok=True)
        with console.status("exporting the tiny model to ExecuTorch (XNNPACK) ..."):
            built = build(edge.module, edge.seed, edge.model_batch)
            exported = pte.export(built, ["xnnpack"], out_dir, edge.seed, edge.model_batch, strict=True)
        program = next(r.path for r in exported if r.path is not None)
        edge = edge.model_copy(
            update={"pte": program, "pte_warmup": STAGE_PTE_WARMUP, "pte_iterations": STAGE_PTE_ITERATIONS}
        )
    return edge_job.run(config.model_copy(update={"edge": edge}), console)
