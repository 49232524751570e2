"""The demo's trace stage: the per-rank breakdown of the train stage's profiled steps, as a run.

The train stage traced two steps of the FSDP2 job on every rank (`profile/rank-N.*.pt.trace.json.gz`)
and `fleetbench train` printed their breakdown; this stage records them as `fleetbench trace
summarize --record` would, in the same run folder, so Prometheus, the dashboards and the report
hold how much of each rank's step FSDP2's communication takes and which rank straggles.
"""

from __future__ import annotations

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.profile.jobs.trace import TraceSettings, record_job
from fleetbench.profile.trace.comm import CommRules
from fleetbench.profile.trace.report import TraceReport, build_report

STAGE_TOP = 10


def run_stage(config: FleetbenchConfig, context: RunContext) -> JobResult[TraceReport]:
    """Record the rank traces of this run's train stage (the train command showed them); rank 0's record first."""
    folder = context.folder("profile")
    if not any(folder.glob("rank-*.pt.trace.json*")):
        raise UserError(f"no rank traces under {folder}: the train stage profiled no steps (train.steps too few?)")
    rules = CommRules(config.trace.comm, config.trace.comm_patterns)
    report = build_report([folder], "steps", STAGE_TOP, None, chart=False, rules=rules)
    settings = TraceSettings(paths=[str(folder)], window="steps", top=STAGE_TOP, comm=config.trace.comm)
    return record_job(report, settings)(config, context)


JOB: Job[TraceReport] = run_stage
