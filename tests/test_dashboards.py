"""Dashboards: generated from the model, structurally sound, and every query real against Prometheus."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from fleetbench.catalogue import CATALOGUE, HEADLINES
from fleetbench.dashboards.build import stale, to_grafana
from fleetbench.dashboards.compare import COMPARE
from fleetbench.dashboards.definition import VARIABLES, Dashboard
from fleetbench.dashboards.promql_names import metric_names
from fleetbench.dashboards.registry import DASHBOARDS, DCGM_METRICS, PROMETHEUS_METRICS, SLURM_METRICS
from fleetbench.report.build import dashboards_for
from fleetbench.services.prometheus_api import PrometheusClient, Series
from fleetbench.services.stack import LocalStack

VARIABLE_REF = re.compile(r"\$(\w+)")
EXPOSED = {name for metric in CATALOGUE.values() for name in metric.exposed_names}
IDS = [d.uid for d in DASHBOARDS]


def substitute(expr: str, run_id: str = ".*", base: str | None = None, new: str | None = None) -> str:
    """What Grafana sends for "All" (and the report for one run): `.*` for each filter variable, `run_id`
    for the run variable; the compare dashboard's single-run variables get `base` and `new` (default `run_id`)."""
    runs = {"run_id": run_id, "base": base or run_id, "new": new or run_id}
    for name in sorted({*VARIABLES, *runs}, key=len, reverse=True):  # longest first: none inside another
        expr = expr.replace(f"${name}", runs.get(name, ".*"))
    return expr


def test_committed_json_equals_a_fresh_generation() -> None:
    assert stale(DASHBOARDS, REPO / "grafana" / "dashboards") == []
    result = run_cli("dashboards", "--check", "--out", str(REPO / "grafana" / "dashboards"))
    assert result.returncode == 0, result.stderr


def test_check_fails_on_a_stale_dashboard(tmp_path: Path) -> None:
    run_cli("dashboards", "--out", str(tmp_path))
    path = tmp_path / f"{DASHBOARDS[0].uid}.json"
    path.write_text(path.read_text().replace('"Run status"', '"Edited by hand"'))
    result = run_cli("dashboards", "--check", "--out", str(tmp_path))
    assert result.returncode == 1
    assert f"out of date: {path.name}" in result.stderr


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=IDS)
def test_structure(dashboard: Dashboard) -> None:
    model = to_grafana(dashboard)
    assert model["schemaVersion"] >= 39
    panels = model["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and 0 not in ids
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        mine = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"panel {panel['title']!r} overlaps another"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["fieldConfig"]["defaults"]["unit"]
        assert panel["description"]
        assert panel["targets"]
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert list(variables) == ["datasource", *(v.name for v in dashboard.variables)]
    for variable in dashboard.variables:
        shown = variables[variable.name]
        assert shown["query"].endswith(f", {variable.label_name})") and shown["label"] == variable.label
        assert shown["multi"] is shown["includeAll"] is variable.multi
    written = {name for panel in dashboard.panels() for q in panel.queries for name in VARIABLE_REF.findall(q.expr)}
    assert written <= set(variables), f"queries name undeclared variables: {written - set(variables)}"
    assert "fleetbench-prometheus" not in json.dumps(model), "datasource UIDs must come from the variable"


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=IDS)
def test_queries_name_only_catalogue_dcgm_or_slurm_metrics(dashboard: Dashboard) -> None:
    known = EXPOSED | DCGM_METRICS | SLURM_METRICS | PROMETHEUS_METRICS
    for panel in dashboard.panels():
        for query in panel.queries:
            names = metric_names(query.expr)
            assert names, query.expr
            assert names <= known, (panel.title, names - known)


def test_metric_name_extraction() -> None:
    expr = 'sum by (host) (rate(fleetbench_steps_total{run_id=~"$run_id"}[5m])) / on(host) group_left up * 1e3'
    assert metric_names(expr) == {"fleetbench_steps_total", "up"}
    assert metric_names('{__name__=~"a_total|b_seconds", x="y"}') == {"a_total", "b_seconds"}


@pytest.mark.services
@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=IDS)
def test_every_query_is_valid_and_demo_panels_have_data(
    dashboard: Dashboard, demo_run: Path, prometheus: PrometheusClient
) -> None:
    run_id = demo_run.name
    for panel in dashboard.panels():
        # Polled for a few seconds: one slow gateway scrape on a loaded machine leaves its series stale
        # until the next scrape. A PromQL error raises at once.
        deadline = time.monotonic() + (0 if panel.may_be_empty else 10)
        while True:
            returned = sum(len(prometheus.query(substitute(query.expr, run_id))) for query in panel.queries)
            if returned or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        if not panel.may_be_empty:
            assert returned, f"{dashboard.uid}: panel {panel.title!r} is empty after the demo"


def test_only_gpu_panels_may_lack_cpu_data() -> None:
    # DCGM series exist only where a GPU is, the Slurm exporter's where Slurm is: every panel reading
    # them must say so.
    for dashboard in DASHBOARDS:
        for panel in dashboard.panels():
            if any(metric_names(q.expr) & DCGM_METRICS for q in panel.queries):
                assert panel.gpu_only, panel.title
            if any(metric_names(q.expr) & SLURM_METRICS for q in panel.queries):
                assert panel.slurm_only, panel.title


@pytest.mark.services
def test_prometheus_rejects_a_broken_query(prometheus: PrometheusClient) -> None:
    from fleetbench.services.prometheus_api import PromQLError

    with pytest.raises(PromQLError, match="bad_data"):
        prometheus.query("sum by (host (fleetbench_steps_total)")


def test_the_single_run_report_leaves_out_the_compare_dashboard() -> None:
    assert COMPARE in DASHBOARDS and not COMPARE.one_run
    assert COMPARE not in dashboards_for(set(HEADLINES))
    assert [d for d in DASHBOARDS if d.one_run] == [d for d in DASHBOARDS if d is not COMPARE]


@pytest.fixture(scope="session")
def second_probe_run(stack: LocalStack, prometheus: PrometheusClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A probe run beside the demo's (same sizes), from another host name, pushed to the session's gateway."""
    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.job import RunContext
    from fleetbench.probe.run import run

    run_id = "compare-new"
    config = FleetbenchConfig.model_validate(
        {
            "run": {"results_dir": str(tmp_path_factory.mktemp("compare-results")), "run_id": run_id},
            "probe": {"matmul_sizes": [128, 256], "copy_mib": [4], "min_run_time_s": 0.05},
            "telemetry": {"pushgateway": stack.pushgateway_url},
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLEETBENCH_HOST", "compare-host")
        run(config, RunContext.start(config))
    assert prometheus.wait_for(f'fleetbench_run_success{{run_id="{run_id}"}}', timeout_s=30)
    return run_id


def by_key(series: list[Series]) -> dict[tuple[tuple[str, str], ...], float]:
    """Instant series by their full label set."""
    return {tuple(sorted(s.labels.items())): s.value for s in series}


@pytest.mark.services
def test_compare_ratio_pairs_two_runs_from_different_hosts(
    demo_run: Path, second_probe_run: str, prometheus: PrometheusClient
) -> None:
    base, new = demo_run.name, second_probe_run
    # What the ratio has to see through: the runs' series differ in run_id, host and the gateway's instance.
    seen = prometheus.query(f'fleetbench_probe_achieved_flop_per_second{{run_id=~"{base}|{new}"}}')
    assert {s.labels["run_id"] for s in seen} == {base, new}
    assert len({s.labels["host"] for s in seen}) == len({s.labels["instance"] for s in seen}) == 2
    probe_row = next(row for row in COMPARE.rows if row.title == "Device probe")
    values_panels, ratio_panels = probe_row.panels[0::2], probe_row.panels[1::2]
    assert [p.title for p in ratio_panels] == ["Matmul FLOP/s: new / base", "Copy bandwidth: new / base"]
    for values, ratio in zip(values_panels, ratio_panels, strict=True):
        base_values, new_values = (
            by_key(prometheus.query(substitute(q.expr, base=base, new=new))) for q in values.queries
        )
        ratios = by_key(prometheus.query(substitute(ratio.queries[0].expr, base=base, new=new)))
        assert ratios, f"{ratio.title}: no series paired between {base} and {new}"
        assert ratios.keys() == base_values.keys() == new_values.keys()
        for key, value in ratios.items():
            assert value == pytest.approx(new_values[key] / base_values[key], rel=1e-9), key
            assert value > 0, (key, value)  # how far apart two probe runs are is the machine's, not the panel's
        same = by_key(prometheus.query(substitute(ratio.queries[0].expr, base=base, new=base)))
        assert same.keys() == ratios.keys() and set(same.values()) == {1.0}


@pytest.mark.services
def test_gpu_panels_read_a_stand_in_dcgm_exporter(stack: LocalStack, prometheus: PrometheusClient) -> None:
    """Every DCGM panel's query returns data from series named exactly as dcgm-exporter names them (a
    stand-in pushed with the exporter's labels: gpu, UUID, modelName, Hostname), then the stand-in goes."""
    from prometheus_client import CollectorRegistry, Gauge, delete_from_gateway, push_to_gateway

    registry = CollectorRegistry()
    labels = {"gpu": "0", "UUID": "GPU-standin", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "standin-node"}
    # Benign values: nothing here may fire an alert rule of the session's Prometheus.
    values = {"DCGM_FI_DEV_FB_USED": 1000.0, "DCGM_FI_DEV_FB_FREE": 80000.0, "DCGM_FI_DEV_SM_CLOCK": 1980.0}
    for name in sorted(DCGM_METRICS):
        gauge = Gauge(name, f"stand-in of dcgm-exporter's {name}", list(labels), registry=registry)
        gauge.labels(**labels).set(values.get(name, 0.0))
    push_to_gateway(stack.pushgateway_url, job="dcgm-standin", registry=registry)
    try:
        panels = [
            p for d in DASHBOARDS for p in d.panels() if any(metric_names(q.expr) & DCGM_METRICS for q in p.queries)
        ]
        assert {name for p in panels for q in p.queries for name in metric_names(q.expr)} >= DCGM_METRICS - {
            "DCGM_FI_DEV_FB_FREE",  # read by the memory alert, not a panel
            "DCGM_FI_PROF_SM_ACTIVE",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        }
        for panel in panels:
            deadline = time.monotonic() + 15
            while True:
                returned = sum(len(prometheus.query(substitute(q.expr))) for q in panel.queries)
                if returned or time.monotonic() > deadline:
                    break
                time.sleep(0.25)
            assert returned, f"panel {panel.title!r} has no data from the stand-in DCGM exporter"
    finally:
        delete_from_gateway(stack.pushgateway_url, job="dcgm-standin")


@pytest.mark.services
def test_energy_panels_show_a_runs_energy_pushed_through_the_stack(
    stack: LocalStack, prometheus: PrometheusClient, tmp_path: Path
) -> None:
    """A VM reads no power source, so the demo leaves the energy row empty: a run's own telemetry pushes a
    reading here (what a GPU or a Jetson gives) and every energy panel shows it."""
    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.dashboards.overview import energy
    from fleetbench.energy.meter import EnergyReading
    from fleetbench.job import RunContext
    from fleetbench.telemetry.energy import record_energy
    from fleetbench.telemetry.session import open_run

    config = FleetbenchConfig.model_validate(
        {"run": {"results_dir": str(tmp_path), "run_id": "energy-panel"},
         "telemetry": {"pushgateway": stack.pushgateway_url}}
    )  # fmt: skip
    with open_run(config, RunContext.start(config), "probe", config.probe, "cpu", "cpu") as run:
        record_energy(run, EnergyReading("tegrastats", 30.0, 6.0, covered_share=0.98), steps=3, tokens=600)
    expected = {"Average power": 5.0, "Energy per step": 10.0, "Energy per token": 0.05}
    for panel in energy.panels:
        assert panel.power_only and panel.may_be_empty
        deadline = time.monotonic() + 15
        while not (found := prometheus.query(substitute(panel.queries[0].expr, "energy-panel"))):
            assert time.monotonic() < deadline, f"panel {panel.title!r} shows no pushed energy"
            time.sleep(0.25)
        (series,) = found
        assert series.labels["source"] == "tegrastats" and series.value == pytest.approx(expected[panel.title])


@pytest.mark.services
def test_every_edge_llm_panel_reads_what_the_job_records(
    stack: LocalStack, prometheus: PrometheusClient, tmp_path: Path
) -> None:
    """The demo does not run `edge llm` (minutes of exports): one row, recorded by the job's own `_record`
    and pushed through the stack as a run pushes it, must reach every panel of the LLM row."""
    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.dashboards.edge import llm
    from fleetbench.edge.llm.job import LlmRow, _record
    from fleetbench.job import RunContext
    from fleetbench.telemetry.session import open_run

    row = LlmRow("llama.cpp", "q4_0", True, backend="vulkan", device="llvmpipe", ok=True, load_s=0.02,
                 cold_load_s=0.05, rss_after_load_bytes=9 << 20, peak_rss_bytes=12 << 20, rss_imports_bytes=5 << 20,
                 rss_model_bytes=4 << 20, peak_rss_model_bytes=7 << 20, logit_error=0.1, tolerance=0.2)  # fmt: skip
    row.pp, row.tg, row.ttft = {"p50": 400.0, "p99": 380.0}, {"p50": 90.0, "p99": 85.0}, {"p50": 0.03, "p99": 0.04}
    row.samples = {"pp": [400.0], "tg": [90.0], "ttft": [0.03]}
    row.thermal = {"celsius_before": 41.0, "celsius_after": 47.5, "throttled": False}
    row.energy = {"source": "tegrastats", "joules_per_token": 0.012}
    row.greedy_equal = row.greedy_total = 6
    row.agrees = True
    config = FleetbenchConfig.model_validate(
        {"run": {"results_dir": str(tmp_path), "run_id": "llm-panels"},
         "telemetry": {"pushgateway": stack.pushgateway_url}}
    )  # fmt: skip
    with open_run(config, RunContext.start(config), "edge-llm", config.edge.llm, "cpu", "cpu") as bench:
        _record(bench, row)
    for panel in llm.panels:
        deadline = time.monotonic() + 15
        while not all(prometheus.query(substitute(q.expr, "llm-panels")) for q in panel.queries):
            assert time.monotonic() < deadline, f"panel {panel.title!r} shows nothing of a recorded row"
            time.sleep(0.25)
    (series,) = prometheus.query(substitute(llm.panels[-2].queries[0].expr, "llm-panels"))
    assert series.labels["runtime"] == "llama.cpp-vulkan" and series.value == pytest.approx(0.012)
