"""Alert rules: valid for promtool, every rule unit-tested by `promtool test rules`, the unit tests able to
fail, only known metric names, and loaded by the local stack's Prometheus."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from fleetbench.catalogue import CATALOGUE
from fleetbench.dashboards.promql_names import metric_names
from fleetbench.dashboards.registry import DCGM_METRICS, NODE_EXPORTER_METRICS
from fleetbench.services.stack import LocalStack, alert_rules_text

RULES = REPO / "benchmarks" / "fleetbench" / "services" / "alert_rules.yml"
UNIT_TESTS = REPO / "tests" / "promtool" / "alert_rules_test.yml"
EXPOSED = {name for metric in CATALOGUE.values() for name in metric.exposed_names}
# Series Prometheus (up) and the Pushgateway (push_time_seconds) add themselves.
BUILT_IN = {"up", "push_time_seconds"}
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

needs_promtool = pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool (Debian package prometheus) missing")


def alert_rules() -> list[dict[str, object]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def promtool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


@needs_promtool
def test_promtool_check_rules_is_clean() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


@needs_promtool
def test_promtool_unit_tests_of_the_rules_pass() -> None:
    result = promtool("test", "rules", str(UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_rule_has_a_firing_and_a_quiet_case() -> None:
    cases = [case for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    for rule in alert_rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case["exp_alerts"] for case in mine), f"{rule['alert']} is never shown firing"
        assert any(not case["exp_alerts"] for case in mine), f"{rule['alert']} is never shown quiet"


def test_rules_read_only_catalogue_dcgm_or_built_in_series() -> None:
    known = EXPOSED | DCGM_METRICS | NODE_EXPORTER_METRICS | BUILT_IN
    for rule in alert_rules():
        names = metric_names(str(rule["expr"]))
        assert names, rule["alert"]
        assert names <= known, (rule["alert"], names - known)


def test_the_local_stack_ships_the_same_rules() -> None:
    assert alert_rules_text() == RULES.read_text()


# Planted bugs: each edit breaks one rule the way a slip would; the unit tests must catch every one.
PLANTED = [
    ("floor(DCGM_FI_DEV_CLOCK_THROTTLE_REASONS / 8) % 2", "0"),  # forgets HW slowdown
    ("floor(DCGM_FI_DEV_CLOCK_THROTTLE_REASONS / 4) % 2", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS % 2"),  # idle bit
    ("> 0.95", "> 0.99"),
    ("clamp_min(10 * quantile_over_time", "clamp_min(20 * quantile_over_time"),
    ("fleetbench_step_seconds[1h]), 120)", "fleetbench_step_seconds[1h]), 60)"),
    (
        "unless on (job, benchmark, run_id, instance, rank) fleetbench_run_end_timestamp_seconds\n        labels:\n"
        "          severity: critical",
        "\n        labels:\n          severity: critical",
    ),
    ("> 900", "> 1200"),
    ('up{job=~"node|dcgm|slurm|pushgateway"}', 'up{job=~".+"}'),
    ("increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[15m])", "increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[15m])"),
    ("increase(fleetbench_train_ooms_total[10m]) > 0", "fleetbench_train_ooms_total > 0"),
    ("node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes < 0.05", "node_memory_MemAvailable_bytes < 0.05"),
]


@needs_promtool
@pytest.mark.parametrize(("before", "after"), PLANTED, ids=[f"bug{i}" for i in range(len(PLANTED))])
def test_the_unit_tests_catch_a_planted_bug(tmp_path: Path, before: str, after: str) -> None:
    text = RULES.read_text()
    assert text.count(before) == 1, before
    rules_dir = tmp_path / "benchmarks" / "fleetbench" / "services"
    rules_dir.mkdir(parents=True)
    (rules_dir / RULES.name).write_text(text.replace(before, after))
    (tmp_path / "tests" / "promtool").mkdir(parents=True)
    (tmp_path / "tests" / "promtool" / UNIT_TESTS.name).write_text(UNIT_TESTS.read_text())
    assert promtool("check", "rules", str(rules_dir / RULES.name)).returncode == 0  # still valid PromQL
    result = promtool("test", "rules", str(tmp_path / "tests" / "promtool" / UNIT_TESTS.name))
    assert result.returncode == 1, result.stdout
    assert "FAILED" in result.stdout + result.stderr


@pytest.mark.services
def test_the_local_stack_loads_every_rule(stack: LocalStack) -> None:
    with urllib.request.urlopen(f"{stack.prometheus_url}/api/v1/rules?type=alert", timeout=5) as response:
        groups = json.load(response)["data"]["groups"]
    loaded = {rule["name"] for group in groups for rule in group["rules"]}
    assert loaded == {rule["alert"] for rule in alert_rules()}
    assert all(rule["health"] in {"ok", "unknown"} for group in groups for rule in group["rules"])
