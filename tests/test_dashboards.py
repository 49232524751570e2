"""Dashboards: generated from the model, structurally sound, and every query real against Prometheus."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from fleetbench.dashboards.build import stale, to_grafana
from fleetbench.dashboards.definition import VARIABLES, Dashboard
from fleetbench.dashboards.promql_names import metric_names
from fleetbench.dashboards.registry import DASHBOARDS, DCGM_METRICS
from fleetbench.services.prometheus_api import PrometheusClient
from fleetbench.telemetry.catalogue import CATALOGUE

EXPOSED = {name for metric in CATALOGUE.values() for name in metric.exposed_names}
IDS = [d.uid for d in DASHBOARDS]


def substitute(expr: str, run_id: str = ".*") -> str:
    """What Grafana sends for "All" (and the report for one run): `.*` for each variable."""
    for name in VARIABLES:
        expr = expr.replace(f"${name}", run_id if name == "run_id" else ".*")
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
    assert set(VARIABLES) <= set(variables)
    assert "fleetbench-prometheus" not in json.dumps(model), "datasource UIDs must come from the variable"


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=IDS)
def test_queries_name_only_catalogue_or_dcgm_metrics(dashboard: Dashboard) -> None:
    for panel in dashboard.panels():
        for query in panel.queries:
            names = metric_names(query.expr)
            assert names, query.expr
            assert names <= EXPOSED | DCGM_METRICS, (panel.title, names - EXPOSED - DCGM_METRICS)


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
        deadline = time.monotonic() + (0 if panel.gpu_only else 10)
        while True:
            returned = sum(len(prometheus.query(substitute(query.expr, run_id))) for query in panel.queries)
            if returned or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        if not panel.gpu_only:
            assert returned, f"{dashboard.uid}: panel {panel.title!r} is empty after the demo"


def test_only_gpu_panels_may_lack_cpu_data() -> None:
    # DCGM series exist only where a GPU is: every panel reading them must say so.
    for dashboard in DASHBOARDS:
        for panel in dashboard.panels():
            if any(metric_names(q.expr) & DCGM_METRICS for q in panel.queries):
                assert panel.gpu_only, panel.title


@pytest.mark.services
def test_prometheus_rejects_a_broken_query(prometheus: PrometheusClient) -> None:
    from fleetbench.services.prometheus_api import PromQLError

    with pytest.raises(PromQLError, match="bad_data"):
        prometheus.query("sum by (host (fleetbench_steps_total)")
