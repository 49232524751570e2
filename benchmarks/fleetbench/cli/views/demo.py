"""What `fleetbench demo` shows: each stage's result as it finishes, then what Prometheus holds and where to look."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from fleetbench.demo import DemoOutcome
from fleetbench.job import JobResult
from fleetbench.services.prometheus_api import Series

SHOWN_LABELS = ("probe", "kernel", "runtime", "size", "dtype")


class StagesOnConsole:
    """The demo's observer: a rule before each stage, the stage's own tables after it."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def started(self, name: str) -> None:
        """A rule with the stage's name."""
        self.console.rule(name)

    def finished(self, name: str, result: JobResult[Any]) -> None:
        """The stage's tables (the train stage's ranks showed theirs as they ran)."""
        if name == "probe":
            from fleetbench.cli.views.probe import probe_table

            self.console.print(probe_table(result.view))
        elif name == "trace":
            from fleetbench.cli.views.trace import recorded_line

            self.console.print(recorded_line(result.view), highlight=False)
        elif name == "profile":
            from fleetbench.cli.views.profile import show_profile

            show_profile(self.console, result.view)
        elif name == "edge":
            from fleetbench.cli.views.edge import show_results

            show_results(self.console, result.view)


def arrived_table(series: list[Series], run_id: str) -> Table:
    """Headline series of the run as Prometheus holds them (queried back, not the values sent)."""
    table = Table(title=f"run {run_id} in Prometheus")
    table.add_column("benchmark")
    table.add_column("metric (fleetbench_...)", no_wrap=True)
    table.add_column("labels")
    table.add_column("value", justify="right")
    for s in series:
        metric = s.labels["__name__"].removeprefix("fleetbench_")
        labels = " ".join(f"{k}={s.labels[k]}" for k in SHOWN_LABELS if k in s.labels)
        table.add_row(s.labels.get("benchmark", ""), metric, labels, f"{s.value:.4g}")
    return table


def show_outcome(console: Console, outcome: DemoOutcome) -> None:
    """What Prometheus holds for the run, then where to look."""
    console.rule("what Prometheus holds for this run")
    console.print(arrived_table(outcome.series, outcome.run_id))
    console.rule("where to look")
    console.print(
        f"report         {outcome.report}\n"
        f"run folder     {outcome.run_dir}/ (records.jsonl, *.prom, plots)\n"
        f"records        .venv/bin/fleetbench results show {outcome.run_id}\n"
        f"Prometheus     {outcome.query_url}\n"
        f"Pushgateway    {outcome.pushgateway_url}\n"
        f"stop services  make stack-down",
        soft_wrap=True,
    )
