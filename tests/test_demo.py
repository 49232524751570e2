"""`fleetbench demo` end to end: real Prometheus and Pushgateway, a real probe, a run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.catalogue import HEADLINES
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient
from fleetbench.services.stack import free_port

pytestmark = pytest.mark.services


def test_demo_runs_end_to_end_and_leaves_prometheus_up(tmp_path: Path) -> None:
    env = {
        "FLEETBENCH_PROMETHEUS_PORT": str(free_port()),
        "FLEETBENCH_PUSHGATEWAY_PORT": str(free_port()),
        "FLEETBENCH_STATE_DIR": str(tmp_path / "state"),
    }
    args = [
        "--results-dir",
        str(tmp_path / "results"),
        "--run-id",
        "demo-1",
        "--set",
        "probe.matmul_sizes=[128]",
        "--set",
        "probe.min_run_time_s=0.05",
        "--set",
        "train.steps=30",
    ]
    try:
        result = run_cli("demo", *args, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "what Prometheus holds for this run" in result.stderr
        assert f"{tmp_path / 'results' / 'demo-1'}/" in result.stderr
        records = read_records(tmp_path / "results" / "demo-1")
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
        assert (tmp_path / "results" / "demo-1" / "fleetbench_probe_rank0.prom").is_file()
        # The services stay up after the demo, holding the run's series.
        prometheus = PrometheusClient(f"http://127.0.0.1:{env['FLEETBENCH_PROMETHEUS_PORT']}")
        flops = prometheus.wait_for(
            'fleetbench_probe_achieved_flop_per_second{run_id="demo-1",size="128"}', timeout_s=10
        )
        assert [s.value for s in flops] == [probe.metric("fleetbench_probe_achieved_flop_per_second", size="128")]
        shown = run_cli("results", "--results-dir", str(tmp_path / "results"), "show", "demo-1", "--json")
        assert shown.returncode == 0
        assert json.loads(shown.stdout.splitlines()[0])["run_id"] == "demo-1"
    finally:
        down = run_cli("stack", "down", env=env, cwd=tmp_path)
    assert "stopped: prometheus, pushgateway" in down.stderr
