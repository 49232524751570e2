"""The dashboard model: plain data that both the Grafana JSON generator and the offline report read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fleetbench.catalogue import spec

VariableOrder = Literal["none", "asc", "desc"]


@dataclass(frozen=True)
class Variable:
    """A query template variable: the values of one `fleetbench_run_info` label, as Grafana offers them."""

    name: str  # what queries write as `$name`
    label: str  # what Grafana shows beside the picker
    source: str = ""  # the run_info label whose values it offers; "" = the variable's own name
    multi: bool = True  # several values and "All" (`.*`, matched with =~); else exactly one (matched with =)
    order: VariableOrder = "none"  # alphabetical order of the offered values (run ids sort by age)

    @property
    def label_name(self) -> str:
        """The series label this variable selects on."""
        return self.source or self.name

    @property
    def matcher(self) -> str:
        """The label matcher a query writes for this variable: a regex for multi-value, else exact."""
        return f'{self.label_name}{"=~" if self.multi else "="}"${self.name}"'


# The filters every dashboard has (besides the datasource and the run), and the run variable.
FILTERS: tuple[Variable, ...] = (
    Variable("benchmark", "Benchmark"),
    Variable("host", "Host"),
    Variable("device", "Device"),
    Variable("backend", "Backend"),
)
RUN = Variable("run_id", "Run")
# Template variables of the dashboards that show runs (any number of them), in the order they are shown.
STANDARD_VARIABLES: tuple[Variable, ...] = (FILTERS[0], RUN, *FILTERS[1:])
VARIABLES: tuple[str, ...] = tuple(variable.name for variable in STANDARD_VARIABLES)
PanelKind = Literal["timeseries", "stat", "table", "barchart", "bargauge"]
# A colour step of a panel's thresholds: from `value` up (None: from minus infinity), in `color`.
ThresholdStep = tuple[float | None, str]


def selection(metric: str, variables: tuple[Variable, ...], **matchers: str) -> str:
    """`metric{<each variable's matcher>, extra="matchers"}`."""
    extra = "".join(f',{key}="{value}"' for key, value in matchers.items())
    return f"{metric}{{{','.join(variable.matcher for variable in variables)}{extra}}}"


def sel(metric: str, **matchers: str) -> str:
    """`metric{<the dashboard's variables>, extra="matchers"}`: every query filters by the variables."""
    return selection(metric, STANDARD_VARIABLES, **matchers)


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
    # Data only where a Slurm cluster is (the Slurm exporter): empty without one by nature.
    slurm_only: bool = False
    # Data only where the device has a temperature sensor or throttle indicator: a VM has none.
    sensor_only: bool = False
    # Data only once `fleetbench compare` or `history` pushed their findings (--pushgateway).
    pushed_by_compare: bool = False
    # Data only once a job the demo does not run pushed it (`fleetbench edge llm`: minutes of exports).
    outside_demo: bool = False
    # Data only while an alert rule fires (Prometheus' ALERTS series): none on a healthy stack.
    alert_only: bool = False
    # Data only where a power source is readable (NVML, RAPL, a board's power tool): a VM has none.
    power_only: bool = False
    # Values coloured by thresholds (ascending); () keeps Grafana's default colours.
    thresholds: tuple[ThresholdStep, ...] = ()

    @property
    def may_be_empty(self) -> bool:
        """Whether the panel has no data by nature: no GPU, no Slurm cluster, no sensor, no comparison pushed
        yet, a job the demo does not run, no alert firing, or no power source."""
        return (
            self.gpu_only
            or self.slurm_only
            or self.sensor_only
            or self.pushed_by_compare
            or self.outside_demo
            or self.alert_only
            or self.power_only
        )


@dataclass(frozen=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Dashboard:
    """One dashboard: identity, the benchmarks its variable offers, its rows and its template variables."""

    uid: str
    title: str
    description: str
    benchmarks: tuple[str, ...]  # what the benchmark variable offers; () = every benchmark
    rows: tuple[Row, ...]
    tags: tuple[str, ...] = field(default=("fleetbench",))
    variables: tuple[Variable, ...] = STANDARD_VARIABLES

    @property
    def one_run(self) -> bool:
        """Whether the `run_id` variable selects its runs, so one run id binds every query (the report)."""
        return RUN in self.variables

    def panels(self) -> list[Panel]:
        """Every panel, row by row."""
        return [panel for row in self.rows for panel in row.panels]
