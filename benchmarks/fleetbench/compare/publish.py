"""compare's verdicts and history's steps as Prometheus series, so Grafana's compare dashboard shows the very
verdicts the terminal, the pull-request comment and the HTML report show (never its own colour band).

`fleetbench compare --pushgateway URL` pushes one group per comparison (job fleetbench, benchmark
"compare", run_id the new run, instance this host): `fleetbench_compare_change_ratio` per figure, its
labels naming base and new run, the benchmark, metric, figure and the verdict. `fleetbench history
--pushgateway URL` pushes one group per metric (benchmark "history"): `fleetbench_history_step_ratio`
per step, naming the run and commit where it happened. A push the gateway does not take is retried,
then spooled like a run's (`fleetbench metrics flush` delivers it later): nothing is lost, nothing fails.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from fleetbench.compare.formats import labels_text
from fleetbench.compare.history import Series, Step
from fleetbench.compare.matching import Comparison, RunRef
from fleetbench.runinfo import host_name
from fleetbench.telemetry.push import JOB, PushPolicy, push_with_retries
from fleetbench.telemetry.recorder import MetricRecorder, RunIdentity
from fleetbench.telemetry.spool import Spool, SpoolEntry

log = logging.getLogger(__name__)


def side_run_id(run: RunRef) -> str:
    """The run a dashboard's base or new picker names: the run itself, or a --rounds side's last process."""
    return run.records[-1].run_id if run.records else run.run_id


def verdicts(comparison: Comparison) -> MetricRecorder:
    """One comparison's figures as `fleetbench_compare_change_ratio`, labelled with their verdicts."""
    new = side_run_id(comparison.new)
    first = comparison.new.records[0] if comparison.new.records else None
    identity = RunIdentity("compare", new, host_name(), first.device if first else "", first.backend if first else "")
    recorder = MetricRecorder(identity)
    for bench in comparison.benchmarks:
        for row in bench.rows:
            if row.change is None or not math.isfinite(row.change.ratio):
                continue
            recorder.set(
                "fleetbench_compare_change_ratio", row.change.ratio - 1.0,
                base=side_run_id(comparison.base), new=new, compared=bench.benchmark, metric=row.metric,
                figure=labels_text(row.labels), verdict=row.verdict,
            )  # fmt: skip
    return recorder


def steps_found(metric: str, panels: list[tuple[Series, list[Step]]]) -> MetricRecorder:
    """Every step history found in `metric`'s series as `fleetbench_history_step_ratio`."""
    run_id = f"history-{metric.removeprefix('fleetbench_')}"[:64]
    recorder = MetricRecorder(RunIdentity("history", run_id, host_name(), "", ""))
    for series, found in panels:
        for step in found:
            recorder.set(
                "fleetbench_history_step_ratio", step.after / step.before - 1.0,
                compared=series.benchmark, metric=metric, figure=labels_text(series.labels), at_run=step.run_id,
                commit=step.commit,
            )  # fmt: skip
    return recorder


def push(recorder: MetricRecorder, gateway: str, spool_dir: Path) -> str | None:
    """Push the recorder's group; on failure spool it and return one line saying so (None when pushed)."""
    from prometheus_client.exposition import generate_latest

    identity = recorder.identity
    group = {"benchmark": identity.benchmark, "run_id": identity.run_id, "instance": identity.host, "rank": "0"}
    error = push_with_retries(gateway, recorder.registry, group, PushPolicy())
    if error is None:
        return None
    entry = SpoolEntry(gateway=gateway, job=JOB, grouping_key=group, exposition=generate_latest(recorder.registry).decode(),
                       spooled_at=time.time(), reason=error)  # fmt: skip
    where = Spool(spool_dir).put(entry)
    kept = f"spooled in {spool_dir} (fleetbench metrics flush delivers it)" if where else "not spooled either"
    return f"the push of {identity.benchmark} {identity.run_id} to {gateway} failed ({error}); {kept}"
