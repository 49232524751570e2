"""The metric catalogue obeys Prometheus naming rules, and promtool accepts what the suite writes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from fleetbench.catalogue import CATALOGUE, COMMON_LABELS, MetricSpec, naming_problems
from fleetbench.telemetry.recorder import MetricRecorder, RunIdentity

IDENTITY = RunIdentity(benchmark="probe", run_id="t-1", host="h", device="cpu-model", backend="cpu", rank=0)


def promtool_problems(exposition: bytes) -> str:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    result = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=30)
    return (result.stdout + result.stderr).decode().strip() if result.returncode else ""


@pytest.mark.parametrize("metric", list(CATALOGUE.values()), ids=list(CATALOGUE))
def test_every_metric_follows_the_naming_rules(metric: MetricSpec) -> None:
    assert naming_problems(metric) == []


def test_naming_rules_catch_bad_names() -> None:
    bad = [
        MetricSpec("fleetbench_latency_ms", "gauge", "seconds", "Latency"),
        MetricSpec("fleetbench_steps", "counter", "count", "Steps"),
        MetricSpec("fleetbench_step_seconds", "gauge", "seconds", "x", ("step",)),
        MetricSpec("probe_seconds", "gauge", "seconds", "Probe"),
        MetricSpec("fleetbench_sol_percent", "gauge", "ratio", "Speed of light"),
        MetricSpec("fleetbench_x_seconds", "gauge", "seconds", "X", ("rank",)),
    ]
    for metric in bad:
        assert naming_problems(metric), metric.name


def test_exposition_of_every_catalogue_metric_passes_promtool() -> None:
    recorder = MetricRecorder(IDENTITY)
    for metric in CATALOGUE.values():
        labels = {name: f"v-{name}" for name in metric.labels}
        if metric.kind == "counter":
            recorder.inc(metric.name, 2, **labels)
        elif metric.kind in ("histogram", "summary"):
            recorder.observe(metric.name, 0.5, **labels)
        else:
            recorder.set(metric.name, 1.5, **labels)
    text = recorder.exposition()
    assert promtool_problems(text) == ""
    for metric in CATALOGUE.values():
        assert metric.exposed_names[0].encode() in text


def test_promtool_is_a_real_check() -> None:
    # The same tool must object to what the conventions forbid, or the test above proves nothing.
    assert "counter metrics should have" in promtool_problems(
        b"# HELP x_requests R\n# TYPE x_requests counter\nx_requests 1\n"
    )


def test_recorder_rejects_undeclared_metrics_and_labels() -> None:
    recorder = MetricRecorder(IDENTITY)
    with pytest.raises(KeyError, match="not in the catalogue"):
        recorder.set("fleetbench_made_up_seconds", 1)
    with pytest.raises(ValueError, match="takes labels"):
        recorder.set("fleetbench_probe_op_seconds", 1, probe="matmul")
    recorder.set("fleetbench_step_seconds", 0.25)
    sample = next(s for s in recorder.samples() if s["name"] == "fleetbench_step_seconds")
    assert sample == {"name": "fleetbench_step_seconds", "labels": {}, "value": 0.25}
    assert tuple(IDENTITY.labels()) == COMMON_LABELS
