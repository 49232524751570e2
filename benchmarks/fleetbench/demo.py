"""`make demo`: every benchmark on the embedded default (CPU), through the real telemetry path.

Starts the local Prometheus and Pushgateway, runs each stage into one run folder, waits until
Prometheus has scraped what was pushed, renders the offline report from the same queries the
dashboards use, and prints where everything is.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.edge import stage as edge_stage
from fleetbench.probe import run as probe_job
from fleetbench.profile import run as profile_job
from fleetbench.profile.trace import stage as trace_stage
from fleetbench.report.build import build_report
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import default_spool_dir
from fleetbench.runinfo import new_run_id
from fleetbench.services.prometheus_api import PrometheusClient
from fleetbench.services.stack import LocalStack
from fleetbench.train.stage import run_train_stage

log = logging.getLogger(__name__)

Stage = Callable[[FleetbenchConfig, Console], ResultRecord]


STAGES: list[tuple[str, Stage]] = [
    ("probe", probe_job.run),
    ("train", run_train_stage),
    ("trace", trace_stage.run_stage),
    ("profile", profile_job.run),
    ("edge", edge_stage.run_stage),
]


def run_demo(config: FleetbenchConfig, stack: LocalStack, console: Console) -> Path:
    """Run every stage into one run folder through `stack`, render the report, and return the run folder."""
    console.rule("[bold]fleetbench demo[/]: the embedded default (CPU, local Prometheus)")
    stack.up()
    console.print(f"Prometheus {stack.prometheus_url}, Pushgateway {stack.pushgateway_url} (loopback)")
    run_id = config.run.run_id or new_run_id()
    config = config.model_copy(
        update={
            "run": config.run.model_copy(update={"run_id": run_id}),
            "telemetry": config.telemetry.model_copy(update={"pushgateway": stack.pushgateway_url}),
        }
    )
    records = []
    for name, stage in STAGES:
        console.rule(name)
        records.append(stage(config, console))
    run_dir = config.run.results_dir / run_id
    prometheus = PrometheusClient(stack.prometheus_url)
    arrived = prometheus.wait_for(f'fleetbench_run_success{{run_id="{run_id}"}}', timeout_s=30, min_series=len(records))
    console.rule("what Prometheus holds for this run")
    console.print(arrived_table(prometheus, run_id))
    if len(arrived) < len(records):
        log.warning(
            "only %d of %d runs reached Prometheus; spooled pushes wait in %s",
            len(arrived),
            len(records),
            default_spool_dir(config.run.results_dir),
        )
    page = build_report(run_dir, stack.prometheus_url)
    expr = urllib.parse.quote(f'fleetbench_probe_achieved_flop_per_second{{run_id="{run_id}"}}')
    console.rule("where to look")
    console.print(
        f"report         {page}\n"
        f"run folder     {run_dir}/ (records.jsonl, *.prom, plots)\n"
        f"records        .venv/bin/fleetbench results show {run_id}\n"
        f"Prometheus     {stack.prometheus_url}/graph?g0.expr={expr}&g0.tab=1\n"
        f"Pushgateway    {stack.pushgateway_url}\n"
        f"stop services  make stack-down",
        soft_wrap=True,
    )
    return run_dir


def arrived_table(prometheus: PrometheusClient, run_id: str) -> Table:
    """Headline series of the run as Prometheus holds them (queried back, not the values sent)."""
    table = Table(title=f"run {run_id} in Prometheus")
    table.add_column("benchmark")
    table.add_column("metric (fleetbench_...)", no_wrap=True)
    table.add_column("labels")
    table.add_column("value", justify="right")
    shown_metrics = (
        "fleetbench_probe_achieved_.*|fleetbench_train_(mfu_ratio|tokens_per_second|loss)|fleetbench_run_success"
        "|fleetbench_edge_kernel_achieved_flop_per_second|fleetbench_edge_model_latency_mean_seconds"
    )
    series = prometheus.query(f'{{__name__=~"{shown_metrics}", run_id="{run_id}", rank="0"}}')
    shown = ("probe", "kernel", "runtime", "size", "dtype")
    order = {name: index for index, (name, _stage) in enumerate(STAGES)}
    for s in sorted(
        series,
        key=lambda s: (
            order.get(s.labels.get("benchmark", ""), 99),
            s.labels["__name__"],
            s.labels.get("kernel", s.labels.get("probe", "")),
            s.labels.get("size", ""),
        ),
    ):
        metric = s.labels["__name__"].removeprefix("fleetbench_")
        labels = " ".join(f"{k}={s.labels[k]}" for k in shown if k in s.labels)
        table.add_row(s.labels.get("benchmark", ""), metric, labels, f"{s.value:.4g}")
    return table
