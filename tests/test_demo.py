"""`fleetbench demo` end to end: real Prometheus and Pushgateway, a real probe, a run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DemoRun, run_cli
from fleetbench.catalogue import HEADLINES
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient
from fleetbench.services.stack import free_port

pytestmark = pytest.mark.services


def test_demo_runs_end_to_end_into_the_prometheus_it_finds(demo: DemoRun, prometheus: PrometheusClient) -> None:
    """The session's one `fleetbench demo` (conftest.demo): it used the services on its ports, and left them up."""
    results = demo.run_dir.parent
    assert "what Prometheus holds for this run" in demo.done.stderr
    assert f"{demo.run_dir}/" in demo.done.stderr
    records = read_records(demo.run_dir)
    assert {r.benchmark for r in records} >= {"probe"}
    assert all(r.status == "ok" for r in records)
    probe = next(r for r in records if r.benchmark == "probe")
    # Every stage's record carries the headline its benchmark declares, each figure named there.
    for record in records:
        declared = set(HEADLINES[record.benchmark])
        assert record.headline and {f.metric for f in record.headline} <= declared, record.benchmark
    train = next(r for r in records if r.benchmark == "train" and r.rank == 0)
    step = next(f for f in train.headline if f.metric == "fleetbench_step_seconds")
    assert len(step.samples) >= 10 and min(step.samples) <= step.value <= max(step.samples)
    assert {f.metric for f in train.headline} >= {
        "fleetbench_train_device_tokens_per_second",
        "fleetbench_process_peak_rss_bytes",
        "fleetbench_train_loss",
    }
    assert (demo.run_dir / "fleetbench_probe_rank0.prom").is_file()
    # The services stay up after the demo, holding the run's series.
    run_id = demo.run_dir.name
    flops = prometheus.wait_for(
        f'fleetbench_probe_achieved_flop_per_second{{run_id="{run_id}",size="128"}}', timeout_s=10
    )
    assert [s.value for s in flops] == [probe.metric("fleetbench_probe_achieved_flop_per_second", size="128")]
    shown = run_cli("results", "--results-dir", str(results), "show", run_id, "--json")
    assert shown.returncode == 0
    assert json.loads(shown.stdout.splitlines()[0])["run_id"] == run_id


def test_stack_up_starts_both_services_and_down_stops_them(tmp_path: Path) -> None:
    """What the demo does where nothing runs yet: `stack up` (the demo calls the same `LocalStack.up`)."""
    env = {
        "FLEETBENCH_PROMETHEUS_PORT": str(free_port()),
        "FLEETBENCH_PUSHGATEWAY_PORT": str(free_port()),
        "FLEETBENCH_STATE_DIR": str(tmp_path / "state"),
    }
    try:
        up = run_cli("stack", "up", env=env, cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        prometheus = PrometheusClient(f"http://127.0.0.1:{env['FLEETBENCH_PROMETHEUS_PORT']}")
        assert prometheus.wait_for('up{job="pushgateway"}', timeout_s=15)
    finally:
        down = run_cli("stack", "down", env=env, cwd=tmp_path)
    assert "stopped: prometheus, pushgateway" in down.stderr
