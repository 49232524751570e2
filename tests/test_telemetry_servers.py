"""Telemetry against real servers: Pushgateway -> Prometheus, outages, spool and flush, exporters."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from conftest import gateway_groups, run_cli
from fleetbench.config.schema import FleetbenchConfig, TelemetryConfig
from fleetbench.job import RunContext
from fleetbench.probe.run import run as run_probe
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient
from fleetbench.services.stack import LocalStack, free_port
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun
from fleetbench.telemetry.spool import Spool

pytestmark = pytest.mark.services


def selector(record: ResultRecord, sample_name: str, labels: dict[str, str]) -> str:
    matchers = {"run_id": record.run_id, "rank": str(record.rank), "benchmark": record.benchmark, **labels}
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(matchers.items()))
    return f"{sample_name}{{{inner}}}"


def assert_record_in_prometheus(record: ResultRecord, prometheus: PrometheusClient) -> None:
    """Every sample of the record is in Prometheus with exactly the value that was sent."""
    prometheus.wait_for(f'fleetbench_run_success{{run_id="{record.run_id}"}}', timeout_s=20)
    for sample in record.metrics:
        # Polled, not queried once: a gateway scrape that times out on a loaded machine marks every
        # series stale until the next good scrape (half a second later).
        series = prometheus.wait_for(selector(record, sample.name, sample.labels), timeout_s=10)
        assert len(series) == 1, (sample, series)
        assert series[0].value == sample.value, sample
        assert series[0].labels["job"] == "fleetbench"
        assert series[0].labels["instance"] == record.host


def steps_run(
    tmp_path: Path, telemetry: TelemetryConfig, run_id: str, steps: int, during: dict[int, object] | None = None
) -> BenchmarkRun:
    identity = RunIdentity("loop", run_id, "test-host", "cpu-model", "cpu", 0)
    with BenchmarkRun(identity, tmp_path / "results", telemetry, config={"steps": steps}) as run:
        for step in range(steps):
            action = (during or {}).get(step)
            if callable(action):
                action()
            run.metrics.set("fleetbench_step_seconds", 0.001 * (step + 1))
            run.metrics.inc("fleetbench_steps_total")
            run.step_done()
            time.sleep(0.02)
    return run


def test_probe_metrics_arrive_in_prometheus_unchanged(
    tmp_path: Path, stack: LocalStack, prometheus: PrometheusClient
) -> None:
    config = FleetbenchConfig.model_validate(
        {
            "run": {"results_dir": str(tmp_path), "run_id": "probe-push-1"},
            "telemetry": {"pushgateway": stack.pushgateway_url},
            "probe": {"matmul_sizes": [64, 128], "copy_mib": [1], "min_run_time_s": 0.05},
        }
    )
    record = run_probe(config, RunContext.start(config)).record
    assert record.status == "ok"
    assert record.metric("fleetbench_probe_achieved_flop_per_second", probe="matmul", size="128") > 0
    assert_record_in_prometheus(record, prometheus)
    assert read_records(tmp_path / "probe-push-1") == [record]


def test_pushgateway_killed_mid_run_spools_then_flush_delivers(
    tmp_path: Path, prometheus: PrometheusClient, stack: LocalStack
) -> None:
    # A gateway of its own, so killing it leaves the session's stack alone; Prometheus scrapes the
    # session gateway, so the flush is pointed there (as a user does after moving a gateway).
    gateway_port = free_port()
    gateway = subprocess.Popen(
        # In memory only: Debian's default persistence file is shared by every gateway on the machine.
        ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{gateway_port}", "--persistence.file="],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{gateway_port}"
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        telemetry = TelemetryConfig(pushgateway=url, push_timeout_s=1.0, push_retries=2, push_backoff_s=0.1)
        started = time.monotonic()
        run = steps_run(tmp_path, telemetry, "outage-1", steps=40, during={20: gateway.kill})
        elapsed = time.monotonic() - started
    finally:
        gateway.kill()
        gateway.wait()
    assert run.record is not None and run.record.status == "ok"
    assert run.push_outcome is not None and run.push_outcome.spooled and run.push_outcome.pushes_ok >= 1
    # 40 steps of 20 ms plus at most one short final attempt: the outage did not stall the run.
    assert elapsed < 0.8 + 1.0 + 3.0, elapsed
    entries = Spool(tmp_path / "results" / ".spool").entries()
    assert len(entries) == 1
    steps_line = next(
        line for line in entries[0][1].exposition.splitlines() if line.startswith("fleetbench_steps_total{")
    )
    assert 'run_id="outage-1"' in steps_line and steps_line.endswith(" 40.0")

    flushed = run_cli(
        "metrics", "flush", "--results-dir", str(tmp_path / "results"), "--pushgateway", stack.pushgateway_url
    )
    assert flushed.returncode == 0, flushed.stderr
    assert "delivered 1" in flushed.stderr
    assert Spool(tmp_path / "results" / ".spool").entries() == []
    record = read_records(tmp_path / "results" / "outage-1")[0]
    assert record.metric("fleetbench_steps_total") == 40
    assert_record_in_prometheus(record, prometheus)


def test_flush_keeps_what_was_not_accepted(tmp_path: Path) -> None:
    telemetry = TelemetryConfig(pushgateway=f"http://127.0.0.1:{free_port()}", push_timeout_s=0.5, push_retries=0)
    steps_run(tmp_path, telemetry, "refused-1", steps=3)
    spool_dir = tmp_path / "results" / ".spool"
    assert len(Spool(spool_dir).entries()) == 1
    result = run_cli("metrics", "flush", "--spool-dir", str(spool_dir), "--timeout", "0.5")
    assert result.returncode == 1
    assert "still spooled 1" in result.stderr
    assert len(Spool(spool_dir).entries()) == 1


def test_hanging_pushgateway_does_not_stall_the_run(tmp_path: Path) -> None:
    # A listener that never answers: connections succeed, responses never come.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as hang:
        hang.bind(("127.0.0.1", 0))
        hang.listen(64)
        port = hang.getsockname()[1]
        telemetry = TelemetryConfig(
            pushgateway=f"http://127.0.0.1:{port}", push_timeout_s=0.5, push_retries=3, push_backoff_s=0.1
        )
        started = time.monotonic()
        run = steps_run(tmp_path, telemetry, "hang-1", steps=30)
        elapsed = time.monotonic() - started
    # The steps take 0.6 s; the hung gateway may add the final attempt's timeout and a join, no more.
    assert elapsed < 0.6 + 0.5 + 1.5 + 0.5 + 1.0, elapsed
    assert run.push_outcome is not None and run.push_outcome.spooled
    assert "timed out" in (run.push_outcome.last_error or "")
    assert len(Spool(tmp_path / "results" / ".spool").entries()) == 1


def test_textfile_is_read_by_a_real_node_exporter(tmp_path: Path) -> None:
    textfile_dir = tmp_path / "textfile"
    steps_run(tmp_path, TelemetryConfig(textfile_dir=textfile_dir), "textfile-1", steps=2)
    prom_file = textfile_dir / "fleetbench_loop_rank0.prom"
    assert prom_file.is_file()
    assert not [p for p in textfile_dir.iterdir() if p != prom_file], "temporary files left behind"
    port = free_port()
    exporter = subprocess.Popen(
        [
            "prometheus-node-exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--collector.textfile.directory={textfile_dir}",
            "--collector.disable-defaults",
            "--collector.textfile",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        body = ""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "fleetbench_steps_total" not in body:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                time.sleep(0.2)
    finally:
        exporter.terminate()
        exporter.wait()
    assert 'fleetbench_steps_total{backend="cpu",benchmark="loop"' in body
    assert "node_textfile_scrape_error 0" in body


def test_http_metrics_endpoint_serves_the_live_registry(tmp_path: Path) -> None:
    port = free_port()
    identity = RunIdentity("loop", "http-1", "test-host", "cpu-model", "cpu", 0)
    telemetry = TelemetryConfig(http_port=port)
    with BenchmarkRun(identity, tmp_path / "results", telemetry, config={}) as run:
        run.metrics.inc("fleetbench_steps_total", 7)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'fleetbench_steps_total{backend="cpu",benchmark="loop",device="cpu-model",host="test-host",' in body
    assert body.count("fleetbench_steps_total{") == 1
    assert " 7.0" in body.split("fleetbench_steps_total{", 1)[1].splitlines()[0]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_each_stack_keeps_its_own_pushgateway_state(tmp_path: Path) -> None:
    # Debian's gateway persists to one machine-wide file by default; a stack must neither read
    # another's pushes nor lose its own across a restart (the demo's stack is restarted by users).
    def make(name: str) -> LocalStack:
        return LocalStack(tmp_path / name, prometheus_port=free_port(), pushgateway_port=free_port())

    first = make("first").up()
    try:
        registry = CollectorRegistry()
        Gauge("persistence_probe", "a group that must survive the restart", registry=registry).set(7)
        push_to_gateway(first.pushgateway_url, job="fleetbench", registry=registry, grouping_key={"run_id": "kept-1"})
        assert {"job": "fleetbench", "run_id": "kept-1"}.items() <= gateway_groups(first.pushgateway_url)[0].items()
    finally:
        first.down()

    second = make("second").up()
    try:
        assert gateway_groups(second.pushgateway_url) == []
    finally:
        second.down()

    restarted = LocalStack(first.state_dir, prometheus_port=free_port(), pushgateway_port=free_port()).up()
    try:
        assert [group["run_id"] for group in gateway_groups(restarted.pushgateway_url)] == ["kept-1"]
    finally:
        restarted.down()
