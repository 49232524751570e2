"""`fleetbench trace summarize --record`: each rank trace becomes a result record of one run.

The records share one run id and carry the trace's rank as their `rank` label, as a multi-rank
training run's records do, so the per-rank figures need no label of their own: time shares, span,
host wait and top kernels as `fleetbench profile` records them, HTA's communication-computation
overlap, and, in the straggler's record only, how far it is above the median of the ranks.
"""

from __future__ import annotations

from pydantic import BaseModel

from fleetbench.catalogue import HEADLINES
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.profile.export import record_trace
from fleetbench.profile.trace.report import TraceReport
from fleetbench.profile.trace.summary import TraceSummary
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "trace"


class TraceSettings(BaseModel):
    """What the command was asked to summarise, and how: recorded with each rank's result."""

    paths: list[str]
    window: str
    top: int
    comm: str = "fleetbench"  # which kernels were communication (trace.comm)


def _set(run: BenchmarkRun, metric: str, value: float, **labels: str) -> None:
    run.metrics.set(metric, value, **labels)
    if metric in HEADLINES.get(run.identity.benchmark, ()):
        run.add_headline(metric, value, None, **labels)


def _device(summary: TraceSummary) -> tuple[str, str]:
    """The device name and backend a rank's record states."""
    if not summary.has_device_events:
        return "cpu", "cpu"
    return (summary.device_names[0] if summary.device_names else "gpu"), "cuda"


def record_rank(run: BenchmarkRun, report: TraceReport, summary: TraceSummary) -> None:
    """One rank's metrics and summary into its run."""
    record_trace(run, summary)
    for device in summary.devices:
        if device.comm_overlap_ratio is not None:
            _set(run, "fleetbench_profile_comm_overlap_ratio", device.comm_overlap_ratio, gpu=device.device)
    straggler = report.ranks.straggler
    if straggler is not None and (straggler.rank, straggler.path) == (summary.rank, summary.path):
        figure = straggler.metric.replace(" ", "_")
        _set(run, "fleetbench_profile_straggler_gap_ratio", straggler.gap_ratio, figure=figure)
    # the traces and the chart stay where they are (outside the run folder): the summary names them
    run.summary.update(
        {
            "trace": summary.to_dict(),
            "ranks": report.ranks.to_dict(),
            "chart": None if report.chart is None else str(report.chart),
        }
    )


def record_job(report: TraceReport, settings: TraceSettings) -> Job[TraceReport]:
    """The job that records a summarised set of traces: one record per rank trace, all in one run."""

    def record_report(config: FleetbenchConfig, context: RunContext) -> JobResult[TraceReport]:
        records = []
        for summary in report.summaries:
            device, backend = _device(summary)
            with open_run(config, context, BENCHMARK, settings, device, backend, rank=summary.rank) as run:
                record_rank(run, report, summary)
            records.append(run.result())
        return JobResult(sorted(records, key=lambda record: record.rank), report)

    return record_report
