"""The model paths of `edge run`: the tiny model on PyTorch MPS, an ExecuTorch program against eager."""

from __future__ import annotations

import logging
from typing import Any

from fleetbench.config.schema import EdgeConfig
from fleetbench.edge.discipline import Watch
from fleetbench.edge.export import record_model, record_model_thermal
from fleetbench.edge.plan import EdgePlan
from fleetbench.telemetry.session import BenchmarkRun

log = logging.getLogger(__name__)


def run_mps_path(cfg: EdgeConfig, run: BenchmarkRun, models: list[dict[str, Any]], watch: Watch) -> dict[str, Any]:
    """Time the model on PyTorch MPS and record it (appended to `models`); a skip reason where MPS is off or missing."""
    if not cfg.mps:
        return {"skipped": "edge.mps=false"}
    from fleetbench.edge import mps

    if not mps.mps_available():
        log.warning("mps: %s; skipped", mps.SKIP_REASON)
        return {"skipped": mps.SKIP_REASON}
    from fleetbench.edge.model_factory import build

    built = build(cfg.module, cfg.seed, cfg.model_batch)
    log.info("mps: %s forward, %d warm-ups, %d iterations ...", built.name, cfg.pte_warmup, cfg.pte_iterations)
    timing_result, thermal = watch.around(
        lambda: mps.run_mps(built, cfg.pte_warmup, cfg.pte_iterations, cfg.model_tolerance)
    )
    summary = record_model(run, timing_result, cfg.trim_ratio, cfg.cv_target)
    summary["thermal"] = thermal.summary()
    record_model_thermal(run, thermal, timing_result.runtime, timing_result.model)
    models.append(summary)
    return summary


def run_program(plan: EdgePlan, run: BenchmarkRun, models: list[dict[str, Any]], watch: Watch) -> list[str]:
    """Time the planned ExecuTorch program and eager PyTorch on the same input; the disagreements.

    Both runtimes are timed in one call, so they share one thermal record (before the first, after the
    second)."""
    if plan.program is None:
        return []
    from fleetbench.edge import pte

    cfg = plan.cfg
    log.info(
        "ExecuTorch program %s (%d warm-ups, %d iterations) ...", plan.program.path, cfg.pte_warmup, cfg.pte_iterations
    )
    program = plan.program
    (et, eager), thermal = watch.around(
        lambda: pte.run_program(program, cfg.module, cfg.seed, cfg.pte_warmup, cfg.pte_iterations, cfg.model_tolerance)
    )
    failures = []
    for t in (et, eager):
        if t is None:
            continue
        summary = record_model(run, t, cfg.trim_ratio, cfg.cv_target)
        summary["thermal"] = thermal.summary()
        record_model_thermal(run, thermal, t.runtime, t.model)
        models.append(summary)
        if t.agrees is False:
            failures.append(
                f"{t.runtime} {t.model} disagrees with eager PyTorch "
                f"(max rel error {t.max_rel_error:.2e} > {cfg.model_tolerance:g})"
            )
    if et.note:
        log.warning(et.note)
    return failures
