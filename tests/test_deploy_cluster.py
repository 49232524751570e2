"""The playbooks end to end on a local cluster of real SSH nodes (containers on 127.0.0.1).

node1 runs monitoring (Prometheus, Pushgateway), slurmctld and the edge playbook; node2 and node3 run
one 2-node FSDP2 job (gloo) through torchrun's c10d rendezvous, and slurmd. Every node runs
node_exporter. The cluster is the session's (`local_cluster`), shared with the ncu-deploy and Slurm
modules, so the site playbook here is also the Slurm cluster's first deploy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]  # may pay the cold image builds


@pytest.fixture
def cluster(local_cluster: Any) -> Path:
    """The inventory of the session's local cluster (`local_cluster` in conftest.py), every node up."""
    inventory: Path = local_cluster.up()
    return inventory


def deploy(playbook: str, inventory: Path, results: Path, run_id: str, *extra: str) -> tuple[int, str, dict[str, Any]]:
    result = run_cli(
        "deploy",
        playbook,
        "--inventory",
        str(inventory),
        "--results-dir",
        str(results),
        "--run-id",
        run_id,
        *extra,
        timeout=1500,
    )
    return result.returncode, result.stderr, host_stats(results / run_id / "deploy", playbook)


def host_stats(deploy_dir: Path, playbook: str) -> dict[str, Any]:
    """ok/changed/failures/dark per host, from the playbook_on_stats event of this playbook's latest run
    (a run id's deploys share deploy/; each runner's artifacts are artifacts/<playbook>-<time>/)."""
    runs = sorted(deploy_dir.glob(f"artifacts/{playbook}-*"))
    for event_file in sorted(runs[-1].glob("job_events/*.json")) if runs else []:
        event = json.loads(event_file.read_text())
        if event.get("event") == "playbook_on_stats":
            data = event["event_data"]
            return {key: data.get(key) or {} for key in ("ok", "changed", "failures", "dark")}
    return {}


def test_site_end_to_end_then_idempotent_then_a_dead_node(cluster: Path, local_cluster: Any, tmp_path: Path) -> None:
    hosts = yaml.safe_load((cluster / "hosts.yml").read_text())["all"]
    prometheus = PrometheusClient(f"http://127.0.0.1:{hosts['vars']['fleetbench_prometheus_port']}")

    rc, log, stats = deploy("site", cluster, tmp_path, "site-1")
    assert rc == 0, log[-4000:]
    assert set(stats["ok"]) == {"node1", "node2", "node3"} and not stats["failures"] and not stats["dark"]

    # One 2-node training job: metrics from both nodes in Prometheus (pushed, scraped) ...
    train = prometheus.wait_for('fleetbench_run_success{benchmark="train",run_id="site-1"}', timeout_s=60, min_series=2)
    assert {s.labels["host"] for s in train} == {"node2", "node3"}
    assert all(s.value == 1 for s in train)
    # Polled, like every series here: one scrape that times out on a loaded machine marks its series stale.
    losses = prometheus.wait_for('fleetbench_train_loss{run_id="site-1"}', timeout_s=30)
    assert losses and all(s.value > 0 for s in losses)
    # ... node_exporter on every node scraped through file_sd targets from the inventory ...
    up = prometheus.wait_for('up{job="node"} == 1', timeout_s=30, min_series=3)
    assert len(up) == 3
    # ... and results collected on the controller: both ranks' records, and the edge run from node1.
    collected = tmp_path / "site-1" / "hosts"
    # c10d hands out global ranks in join order: one rank per node, in either order.
    records = [r for node in ("node2", "node3") for r in read_records(collected / node) if r.benchmark == "train"]
    assert sorted(r.rank for r in records) == [0, 1] and {r.host for r in records} == {"node2", "node3"}
    assert all(r.status == "ok" for r in records)
    edge = read_records(collected / "node1")
    assert [r.benchmark for r in edge] == ["edge"] and edge[0].status == "ok"
    assert len(list(collected.glob("node[23]/fleetbench_train_rank[01].prom"))) == 2
    # The collectives sweep ran first over the same two nodes, into the same run's folder.
    sweep = [r for node in ("node2", "node3") for r in read_records(collected / node) if r.benchmark == "collectives"]
    assert sorted(r.rank for r in sweep) == [0, 1] and all(r.status == "ok" for r in sweep)
    assert max(r.start for r in sweep) < min(r.start for r in records)

    # A second run changes no configuration (jobs, which always act, are skipped by tag).
    rc, log, stats = deploy("site", cluster, tmp_path, "site-2", "--skip-tags", "fleetbench_job")
    assert rc == 0, log[-4000:]
    assert all(count == 0 for count in stats["changed"].values()), stats["changed"]

    # A node stopped before the run: reported unreachable, the others finish and are collected.
    local_cluster.node("node3").stop(timeout=2)
    try:
        rc, log, _ = deploy("edge", cluster, tmp_path, "fault-1")
        assert rc == 0, log[-4000:]
        started = time.monotonic()
        rc, log, stats = deploy("collect", cluster, tmp_path, "fault-1")
        assert rc == 1
        assert "node3" in stats["dark"] and {"node1", "node2"} <= set(stats["ok"])
        assert "unreachable" in log
        assert time.monotonic() - started < 120
        assert [r.benchmark for r in read_records(tmp_path / "fault-1" / "hosts" / "node1")] == ["edge"]
    finally:  # the next modules on this cluster find node3 back (its Slurm daemons restart on their deploy)
        local_cluster.start_again("node3")
