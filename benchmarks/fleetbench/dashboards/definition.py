"""The dashboard model: plain data that both the Grafana JSON generator and the offline report read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fleetbench.telemetry.catalogue import spec

# Template variables every dashboard has (besides the datasource), in the order they are shown.
VARIABLES: tuple[str, ...] = ("benchmark", "run_id", "host", "device", "backend")
SELECTOR = ",".join(f'{name}=~"${name}"' for name in VARIABLES)

PanelKind = Literal["timeseries", "stat", "table", "barchart", "bargauge"]


def sel(metric: str, **matchers: str) -> str:
    """`metric{<the dashboard's variables>, extra="matchers"}`: every query filters by the variables."""
    extra = "".join(f',{key}="{value}"' for key, value in matchers.items())
    return f"{metric}{{{SELECTOR}{extra}}}"


def unit_of(metric: str) -> str:
    """The Grafana unit of a catalogue metric: panels take their unit from the catalogue."""
    return spec(metric).grafana_unit


@dataclass(frozen=True)
class Query:
    """One PromQL query of a panel, its legend template, and whether it is instant (else a range)."""

    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    """One panel: what it shows, how (kind and unit), and its size on the 24-column grid."""

    title: str
    kind: PanelKind
    queries: tuple[Query, ...]
    unit: str
    description: str
    width: int = 12
    height: int = 8
    # Data only where GPUs are (DCGM exporter, GPU traces): empty on a CPU machine by nature.
    gpu_only: bool = False


@dataclass(frozen=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Dashboard:
    """One dashboard: identity, the benchmarks its variable offers, and its rows."""

    uid: str
    title: str
    description: str
    benchmarks: tuple[str, ...]  # what the benchmark variable offers; () = every benchmark
    rows: tuple[Row, ...]
    tags: tuple[str, ...] = field(default=("fleetbench",))

    def panels(self) -> list[Panel]:
        """Every panel, row by row."""
        return [panel for row in self.rows for panel in row.panels]
