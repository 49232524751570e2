"""`make demo`: every benchmark on the embedded default (CPU), through the real telemetry path.

Starts the local Prometheus and Pushgateway, runs each stage (a job) into one run folder, waits until
Prometheus has scraped what was pushed, renders the offline report from the same queries the
dashboards use, and returns where everything is. It prints nothing: the CLI shows each stage's
result as it finishes (through `StageObserver`) and the closing summary.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.edge import stage as edge_stage
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.probe import run as probe_job
from fleetbench.profile.jobs import profile as profile_job
from fleetbench.profile.jobs import trace_stage
from fleetbench.report.build import build_report
from fleetbench.results.store import default_spool_dir
from fleetbench.services.prometheus_api import PrometheusClient, Series
from fleetbench.services.stack import LocalStack
from fleetbench.train.stage import run_train_stage

log = logging.getLogger(__name__)

STAGES: list[tuple[str, Job[Any]]] = [
    ("probe", probe_job.run),
    ("train", run_train_stage),
    ("trace", trace_stage.run_stage),
    ("profile", profile_job.run),
    ("edge", edge_stage.run_stage),
]
# The headline series the closing table queries back from Prometheus (rank 0's).
SHOWN_METRICS = (
    "fleetbench_probe_achieved_.*|fleetbench_train_(mfu_ratio|tokens_per_second|loss)|fleetbench_run_success"
    "|fleetbench_edge_kernel_achieved_flop_per_second|fleetbench_edge_model_latency_mean_seconds"
)


class StageObserver(Protocol):
    """Who watches the demo: told when each stage starts and what it returned."""

    def started(self, name: str) -> None:
        """Stage `name` is about to run."""

    def finished(self, name: str, result: JobResult[Any]) -> None:
        """Stage `name` ran; `result` is what it returned."""


@dataclass(frozen=True)
class DemoOutcome:
    """Where the demo's results are, and what Prometheus holds of them."""

    run_id: str
    run_dir: Path
    report: Path
    prometheus_url: str
    pushgateway_url: str
    series: list[Series]  # the headline series, queried back from Prometheus, in stage order
    query_url: str  # the probe's FLOP/s of this run in Prometheus' graph page


def run_demo(config: FleetbenchConfig, stack: LocalStack, context: RunContext, observer: StageObserver) -> DemoOutcome:
    """Run every stage into `context`'s run folder through `stack`, render the report, say where things are."""
    stack.up()
    config = context.pinned(config)
    config = config.model_copy(
        update={"telemetry": config.telemetry.model_copy(update={"pushgateway": stack.pushgateway_url})}
    )
    records = []
    for name, stage in STAGES:
        observer.started(name)
        result = stage(config, context)
        records.append(result.record)
        observer.finished(name, result)
    prometheus = PrometheusClient(stack.prometheus_url)
    expr = f'fleetbench_run_success{{run_id="{context.run_id}"}}'
    arrived = prometheus.wait_for(expr, timeout_s=30, min_series=len(records))
    if len(arrived) < len(records):
        log.warning(
            "only %d of %d runs reached Prometheus; spooled pushes wait in %s",
            len(arrived),
            len(records),
            default_spool_dir(context.results_dir),
        )
    series = headline_series(prometheus, context.run_id)
    page = build_report(context.run_dir, stack.prometheus_url)
    probe = urllib.parse.quote(f'fleetbench_probe_achieved_flop_per_second{{run_id="{context.run_id}"}}')
    return DemoOutcome(
        run_id=context.run_id,
        run_dir=context.run_dir,
        report=page,
        prometheus_url=stack.prometheus_url,
        pushgateway_url=stack.pushgateway_url,
        series=series,
        query_url=f"{stack.prometheus_url}/graph?g0.expr={probe}&g0.tab=1",
    )


def headline_series(prometheus: PrometheusClient, run_id: str) -> list[Series]:
    """The run's headline series as Prometheus holds them (queried back, not the values sent), in stage order."""
    series = prometheus.query(f'{{__name__=~"{SHOWN_METRICS}", run_id="{run_id}", rank="0"}}')
    order = {name: index for index, (name, _stage) in enumerate(STAGES)}
    return sorted(
        series,
        key=lambda s: (
            order.get(s.labels.get("benchmark", ""), 99),
            s.labels["__name__"],
            s.labels.get("kernel", s.labels.get("probe", "")),
            s.labels.get("size", ""),
        ),
    )
