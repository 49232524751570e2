"""The metric catalogue: every metric the suite exports, declared once.

Benchmarks, exporters, dashboards, the offline report and the tests read this module; a metric
that is not declared here cannot be recorded. Naming follows prometheus.io/docs/practices/naming:
`fleetbench_` prefix, base units (`_seconds`, `_bytes`), ratios 0-1 as `_ratio`, counters `_total`.
GPU utilisation, framebuffer use, power and temperature are left to the DCGM exporter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

PREFIX = "fleetbench_"

# Labels every series carries: who ran what, where. Values are bounded per run (no steps, no times).
COMMON_LABELS: tuple[str, ...] = ("benchmark", "run_id", "host", "device", "backend", "rank")

MetricKind = Literal["gauge", "counter", "histogram", "summary"]

# Unit -> the name suffix it requires and the Grafana unit a panel uses for it.
UNITS: dict[str, tuple[str, str]] = {
    "seconds": ("_seconds", "s"),
    "bytes": ("_bytes", "bytes"),
    "ratio": ("_ratio", "percentunit"),
    "flop_per_second": ("_flop_per_second", "flops"),
    "bytes_per_second": ("_bytes_per_second", "Bps"),
    "timestamp": ("_timestamp_seconds", "dateTimeAsIso"),
    "info": ("_info", "none"),
    "count": ("", "short"),
}

NAME_PATTERN = re.compile(r"^fleetbench_[a-z][a-z0-9_]*[a-z0-9]$")


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: MetricKind
    unit: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None

    @property
    def label_names(self) -> tuple[str, ...]:
        """Common labels first, then the metric's own."""
        return COMMON_LABELS + self.labels

    @property
    def grafana_unit(self) -> str:
        return UNITS[self.unit][1]

    @property
    def exposed_names(self) -> tuple[str, ...]:
        """Series names as they appear in an exposition (what PromQL queries name)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_count", f"{self.name}_sum")
        if self.kind == "summary":
            return (self.name, f"{self.name}_count", f"{self.name}_sum")
        return (self.name,)


def _spec(name: str, kind: MetricKind, unit: str, help: str, *labels: str,
          buckets: tuple[float, ...] | None = None) -> MetricSpec:
    return MetricSpec(name=name, kind=kind, unit=unit, help=help, labels=labels, buckets=buckets)


CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        # --- every run -------------------------------------------------------------------------
        _spec("fleetbench_run_info", "gauge", "info",
              "Constant 1; labels carry the run's software identity", "version", "git_revision"),
        _spec("fleetbench_run_start_timestamp_seconds", "gauge", "timestamp",
              "Unix time the run started"),
        _spec("fleetbench_run_end_timestamp_seconds", "gauge", "timestamp",
              "Unix time the run ended (set once, at the end)"),
        _spec("fleetbench_run_duration_seconds", "gauge", "seconds",
              "Wall-clock duration of the run so far, or of the whole run once ended"),
        _spec("fleetbench_run_success", "gauge", "count",
              "Whether the run ended successfully: 1 ok, 0 failed; absent while running"),
        _spec("fleetbench_run_last_success_timestamp_seconds", "gauge", "timestamp",
              "Unix time of the end of the last successful run of this benchmark on this host/rank"),
        # --- memory of the process and of the device allocator ---------------------------------
        _spec("fleetbench_process_peak_rss_bytes", "gauge", "bytes",
              "Peak resident set size of the benchmark process (getrusage ru_maxrss)"),
        _spec("fleetbench_memory_peak_allocated_bytes", "gauge", "bytes",
              "Peak bytes held by tensors in the device allocator (torch.cuda.max_memory_allocated)"),
        _spec("fleetbench_memory_peak_reserved_bytes", "gauge", "bytes",
              "Peak bytes reserved by the device caching allocator (torch.cuda.max_memory_reserved)"),
        # --- the matmul / copy probe -----------------------------------------------------------
        _spec("fleetbench_probe_op_seconds", "gauge", "seconds",
              "Median time of one probe operation (torch.utils.benchmark)", "probe", "dtype", "size"),
        _spec("fleetbench_probe_op_spread_ratio", "gauge", "ratio",
              "Interquartile range of the probe's timings divided by their median", "probe", "dtype", "size"),
        _spec("fleetbench_probe_achieved_flop_per_second", "gauge", "flop_per_second",
              "Achieved floating-point operations per second (FLOPs from torch.utils.flop_counter)",
              "probe", "dtype", "size"),
        _spec("fleetbench_probe_achieved_bytes_per_second", "gauge", "bytes_per_second",
              "Achieved memory traffic per second (bytes read plus bytes written)", "probe", "dtype", "size"),
        _spec("fleetbench_probe_operations_total", "counter", "count",
              "Probe operations timed", "probe", "dtype", "size"),
        # --- a generic benchmark loop (telemetry overhead measurement, trainers) ---------------
        _spec("fleetbench_step_seconds", "gauge", "seconds", "Wall-clock time of the latest step"),
        _spec("fleetbench_steps_total", "counter", "count", "Steps completed"),
    )
}


def spec(name: str) -> MetricSpec:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"metric {name!r} is not in the catalogue (fleetbench.telemetry.catalogue)") from None


def naming_problems(metric: MetricSpec) -> list[str]:
    """What breaks the naming rules; the tests require an empty list for every entry."""
    problems = []
    if not NAME_PATTERN.fullmatch(metric.name):
        problems.append("name must be fleetbench_ followed by snake_case")
    if metric.unit not in UNITS:
        problems.append(f"unknown unit {metric.unit!r}")
    else:
        suffix = UNITS[metric.unit][0]
        base = metric.name.removesuffix("_total")
        if suffix and not base.endswith(suffix):
            problems.append(f"unit {metric.unit} requires the suffix {suffix}")
    if metric.kind == "counter" and not metric.name.endswith("_total"):
        problems.append("counters end in _total")
    if metric.kind != "counter" and metric.name.endswith("_total"):
        problems.append("only counters end in _total")
    if not metric.help or not metric.help[0].isupper():
        problems.append("help must be a sentence")
    if set(metric.labels) & set(COMMON_LABELS) or len(set(metric.labels)) != len(metric.labels):
        problems.append("labels repeat a common label or each other")
    for forbidden in ("step", "timestamp", "time", "le", "quantile", "job", "instance"):
        if forbidden in metric.labels:
            problems.append(f"label {forbidden!r} is reserved or unbounded")
    return problems
