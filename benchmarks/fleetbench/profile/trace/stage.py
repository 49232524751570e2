"""The demo's trace stage: the per-rank breakdown of the train stage's profiled steps, as a run.

The train stage traced two steps of the FSDP2 job on every rank (`profile/rank-N.*.pt.trace.json.gz`)
and `fleetbench train` printed their breakdown; this stage records them as `fleetbench trace
summarize --record` would, in the same run folder, so Prometheus, the dashboards and the report
hold how much of each rank's step FSDP2's communication takes and which rank straggles.
"""

from __future__ import annotations

from rich.console import Console

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError
from fleetbench.profile.trace.record import TraceSettings, record_report
from fleetbench.profile.trace.report import build_report
from fleetbench.results.record import ResultRecord

STAGE_TOP = 10


def run_stage(config: FleetbenchConfig, console: Console) -> ResultRecord:
    """Record the rank traces of this run's train stage (the train command printed them); rank 0's record."""
    if config.run.run_id is None:
        raise UserError("the trace stage reads the train stage's traces: it needs the demo's run id")
    folder = config.run.results_dir / config.run.run_id / "profile"
    if not any(folder.glob("rank-*.pt.trace.json*")):
        raise UserError(f"no rank traces under {folder}: the train stage profiled no steps (train.steps too few?)")
    report = build_report([folder], "steps", STAGE_TOP, None, chart=False)
    straggler = report.ranks.straggler
    console.print(
        f"trace: {len(report.summaries)} rank traces recorded"
        + (f"; straggler rank {straggler.rank} (+{straggler.gap_ratio:.1%} {straggler.metric})" if straggler else ""),
        highlight=False,
    )
    settings = TraceSettings(paths=[str(folder)], window="steps", top=STAGE_TOP)
    records = record_report(config, report, settings)
    return min(records, key=lambda record: record.rank)
