"""Where a panel's numbers come from: the same queries against Prometheus, or the run's records."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from fleetbench.dashboards.definition import VARIABLES, Panel
from fleetbench.dashboards.promql_names import metric_names
from fleetbench.results.record import ResultRecord
from fleetbench.services.prometheus_api import PrometheusClient

HIDDEN_LABELS = {"__name__", "job", "instance", "run_id", "benchmark"}
_LEGEND_FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass
class SeriesData:
    """One line of a panel: its legend and its (unix time, value) points."""

    name: str
    points: list[tuple[float, float]] = field(default_factory=list)  # (unix time, value)

    @property
    def last(self) -> float:
        """The latest value (what stat, table and bar panels show)."""
        return self.points[-1][1]


@dataclass
class PanelData:
    """A panel with the series its queries returned for one run."""

    panel: Panel
    series: list[SeriesData]
    source: str  # "prometheus" or "records"


def legend(template: str, labels: dict[str, str], hidden: set[str] = HIDDEN_LABELS) -> str:
    """A series' name: the query's `{{label}}` template filled in, else its labels but `hidden` as k=v."""
    if template:
        return _LEGEND_FIELD.sub(lambda m: labels.get(m.group(1), ""), template).strip() or "value"
    shown = [f"{k}={v}" for k, v in sorted(labels.items()) if k not in hidden]
    return " ".join(shown) or "value"


def bind(expr: str, run_id: str) -> str:
    """Fill the dashboard variables the way the report selects: this run, everything else 'All'."""
    for name in VARIABLES:
        # Run ids hold only [A-Za-z0-9._-]; '.' is the one regex metacharacter, escaped for PromQL's string.
        expr = expr.replace(f"${name}", run_id.replace(".", "\\\\.") if name == "run_id" else ".*")
    return expr


class PrometheusSource:
    """Panels from Prometheus: the dashboards' own queries bound to one run, over the run's time span."""

    def __init__(self, client: PrometheusClient, run_id: str, start: float, end: float) -> None:
        self.client, self.run_id = client, run_id
        self.start = start - 30
        self.end = min(max(end + 60, time.time()), end + 600)

    def panel(self, panel: Panel) -> PanelData:
        """Run the panel's queries: range queries for time series, instant ones for the other kinds."""
        series: list[SeriesData] = []
        for query in panel.queries:
            expr = bind(query.expr, self.run_id)
            if panel.kind == "timeseries":
                step = max(1.0, (self.end - self.start) / 200)
                for item in self.client.query_range(expr, self.start, self.end, step):
                    series.append(SeriesData(legend(query.legend, item.labels), item.points))
            else:
                # Tables show every label a query keeps (benchmark and run included), as Grafana does.
                hidden = {"__name__", "job", "instance"} if panel.kind == "table" else HIDDEN_LABELS
                for instant in self.client.query(expr):
                    name = legend(query.legend, instant.labels, hidden)
                    series.append(SeriesData(name, [(time.time(), instant.value)]))
        return PanelData(panel, series, "prometheus")


class RecordsSource:
    """No Prometheus: plot the records' samples of the metrics each panel's queries name."""

    def __init__(self, records: list[ResultRecord]) -> None:
        self.records = records

    def panel(self, panel: Panel) -> PanelData:
        """One point per record sample of a metric the panel's queries name, at the record's end time."""
        wanted = {name for query in panel.queries for name in metric_names(query.expr)}
        # Grafana's date units take milliseconds (the queries multiply by 1000); samples are in seconds.
        scale = 1000.0 if panel.unit.startswith("dateTime") else 1.0
        series = []
        for record in self.records:
            for sample in record.metrics:
                if sample.name in wanted:
                    labels = {**sample.labels, "host": record.host, "rank": str(record.rank)}
                    name = legend("", {k: v for k, v in labels.items() if k != "rank" or record.rank})
                    series.append(
                        SeriesData(
                            f"{sample.name.removeprefix('fleetbench_')} {name}",
                            [(record.end.timestamp(), sample.value * scale)],
                        )
                    )
        return PanelData(panel, series, "records")
