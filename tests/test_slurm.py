"""Slurm for real on the local cluster: Debian's slurmctld, slurmd and munge deployed by the slurm
playbook to 3 nodes (node1 the controller, node2 and node3 compute nodes), and FSDP2 jobs submitted
with `fleetbench slurm submit` through the controller over SSH.

The cluster is the session's (`local_cluster`, shared with the deploy and ncu-deploy modules): the
module deploys monitoring (Prometheus, Pushgateway) and the slurm playbook on it, which after the site
test only starts what its stopped node lost. The tests then run in file order; the fault test stops a
slurmd and starts it again, so later tests find both nodes back, and the last takes the cluster down.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient
from test_deploy_cluster import deploy

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]  # may pay the cold image builds
LONG = "5000"  # steps of a job that is ended on purpose long before it would finish


@dataclass
class SlurmCluster:
    """The module's cluster: its inventory, state folder, image namespace, results and Prometheus."""

    inventory: Path
    state: Path
    namespace: str
    results: Path
    prometheus: PrometheusClient
    client: Any  # the Docker SDK client
    bring_up_s: float

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`fleetbench slurm ARGS` against this cluster, as a user runs it."""
        return run_cli(
            "slurm", *args, "--inventory", str(self.inventory), "--results-dir", str(self.results), timeout=timeout
        )

    def node(self, name: str) -> Any:
        """The node container `name` (node1..node3)."""
        return self.client.containers.get(f"{self.namespace}-{name}")

    def sh(self, name: str, command: str) -> str:
        """Run a shell command inside node `name` as root; its output (asserting success)."""
        code, output = self.node(name).exec_run(["sh", "-c", command])
        assert code == 0, output.decode()
        return str(output.decode())

    def shared(self, job_id: int) -> Path:
        """The job's run folder on the cluster's shared file system (seen from here)."""
        return self.state / "shared" / "results" / f"slurm-{job_id}"


@pytest.fixture(scope="module")
def slurm_cluster(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> SlurmCluster:
    """The session's local cluster with Slurm (and monitoring) deployed, for every test of the module."""
    started = time.monotonic()
    inventory = local_cluster.up()
    results = tmp_path_factory.mktemp("slurm-results")
    # Where the site test ran first, both are there already and this starts what a stopped node lost.
    for playbook in ("monitoring", "slurm"):
        rc, log, _ = deploy(playbook, inventory, results, f"bring-up-{playbook}")
        assert rc == 0, log[-4000:]
    port = yaml.safe_load((inventory / "hosts.yml").read_text())["all"]["vars"]["fleetbench_prometheus_port"]
    cluster = SlurmCluster(
        inventory,
        local_cluster.state,
        local_cluster.images.namespace,
        results,
        PrometheusClient(f"http://127.0.0.1:{port}"),
        local_cluster.images.client,
        time.monotonic() - started,
    )
    print(f"slurm cluster bring-up (nodes, monitoring, slurm): {cluster.bring_up_s:.0f} s")
    return cluster


def submitted_id(result: subprocess.CompletedProcess[str]) -> int:
    """The job id from `submit`'s 'submitted job N ...' line."""
    assert result.returncode == 0, result.stderr[-3000:]
    words = result.stderr.split("submitted job ", 1)[1].split()
    return int(words[0])


def wait_until(predicate: Any, timeout_s: float, what: str) -> None:
    """Poll `predicate` every half second until it is true; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def log_has(cluster: SlurmCluster, job_id: int, text: str) -> bool:
    """Whether a node's log of the job holds `text` yet (rank 0, which prints the steps, may be either)."""
    logs = (cluster.shared(job_id) / "slurm").glob("node*.log")
    return any(text in path.read_text(errors="replace") for path in logs)


def job_json(cluster: SlurmCluster, job_id: int) -> dict[str, Any]:
    """`fleetbench slurm status JOBID --json`."""
    result = cluster.cli("status", str(job_id), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def queued_ids(cluster: SlurmCluster) -> set[str]:
    """Every job id slurmctld knows (any state)."""
    return set(cluster.sh("node1", "squeue --noheader --states=all --format %i").split())


def test_deploy_leaves_the_compute_nodes_idle_and_a_second_deploy_changes_nothing(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    sinfo = slurm_cluster.sh("node1", "sinfo")
    print(sinfo)
    assert "batch*" in sinfo and "idle node[2-3]" in " ".join(sinfo.split())
    result = slurm_cluster.cli("info", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    assert [(n["name"], n["state"], n["usable"]) for n in json.loads(result.stdout)] == [
        ("node2", "idle", True),
        ("node3", "idle", True),
    ]
    rc, log, stats = deploy("slurm", slurm_cluster.inventory, tmp_path, "slurm-again")
    assert rc == 0, log[-4000:]
    assert set(stats["ok"]) == {"node1", "node2", "node3"}
    assert all(count == 0 for count in stats["changed"].values()), stats["changed"]


def test_a_two_node_job_completes_and_its_records_and_metrics_arrive(slurm_cluster: SlurmCluster) -> None:
    result = slurm_cluster.cli("submit", "--nodes", "2", "--steps", "8", "--json")
    job_id = submitted_id(result)
    print(result.stderr)
    job = json.loads(result.stdout)
    assert job["state"] == "COMPLETED" and job["exit_code"] == 0 and job["nodes"] == "node[2-3]"
    # Both ranks' records and metrics files, collected from the shared folder into results/ here.
    run_dir = slurm_cluster.results / f"slurm-{job_id}"
    records = [r for r in read_records(run_dir) if r.benchmark == "train"]
    assert sorted(r.rank for r in records) == [0, 1] and {r.host for r in records} == {"node2", "node3"}
    assert all(r.status == "ok" for r in records)
    assert all(r.summary["final_loss"] < r.summary["first_loss"] for r in records), "the loss falls"
    # The collectives sweep ran first, across the same two nodes (each node's first rank recorded it).
    sweep = [r for r in read_records(run_dir) if r.benchmark == "collectives"]
    assert sorted(r.rank for r in sweep) == [0, 1] and {r.host for r in sweep} == {"node2", "node3"}
    assert all(r.status == "ok" and r.summary["ranks"] == 2 for r in sweep)
    assert max(r.end for r in sweep) <= min(r.start for r in records)
    assert sorted(p.name for p in run_dir.glob("*.prom")) == [
        "fleetbench_collectives_rank0.prom",
        "fleetbench_collectives_rank1.prom",
        "fleetbench_train_rank0.prom",
        "fleetbench_train_rank1.prom",
    ]
    assert {p.name for p in (run_dir / "slurm").iterdir()} >= {"node2.log", "node3.log", "batch.out", "job.sbatch"}
    # Pushed to the cluster's Pushgateway and scraped by its Prometheus, beside the Slurm exporter's series.
    prometheus = slurm_cluster.prometheus
    losses = prometheus.wait_for(f'fleetbench_train_loss{{run_id="slurm-{job_id}"}}', timeout_s=60, min_series=2)
    assert {s.labels["host"] for s in losses} == {"node2", "node3"}
    idle = prometheus.wait_for('fleetbench_slurm_nodes{state="idle"} == 2', timeout_s=60)
    assert idle and idle[0].labels["partition"] == "batch"
    assert prometheus.wait_for('fleetbench_slurm_jobs{state="completed"} >= 1', timeout_s=60)
    from fleetbench.dashboards.overview import slurm as slurm_row

    for panel in slurm_row.panels:
        assert all(prometheus.query(q.expr) for q in panel.queries), panel.title


def test_bad_submits_are_one_line_and_leave_nothing_queued(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    before = queued_ids(slurm_cluster)
    unreachable = tmp_path / "unreachable"
    shutil.copytree(slurm_cluster.inventory, unreachable)
    hosts = yaml.safe_load((unreachable / "hosts.yml").read_text())
    from fleetbench.services.stack import free_port

    hosts["all"]["hosts"]["node1"]["ansible_port"] = free_port()  # nothing listens there
    (unreachable / "hosts.yml").write_text(yaml.safe_dump(hosts))
    cases = [
        (["--nodes", "0"], "--nodes 0 is not accepted; use 1-4294967293"),
        (["--nodes", "3"], "--nodes 3 is more than partition batch has (2: node2, node3); accepted: 1-2"),
        (["--preset", "nope"], "--preset 'nope' is not accepted; accepted: tiny"),
    ]
    for args, fragment in cases:
        result = slurm_cluster.cli("submit", *args, timeout=120)
        assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
        assert result.stderr.startswith("fleetbench: error: ") and fragment in result.stderr, result.stderr
    result = run_cli("slurm", "submit", "--inventory", str(unreachable), "--results-dir", str(tmp_path / "r"))
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert "fleetbench: error: cannot reach the Slurm controller node1 (root@127.0.0.1:" in result.stderr
    assert queued_ids(slurm_cluster) == before, "a refused submit queued a job"


def test_a_task_that_fails_on_one_node_is_reported_with_that_node_then_cancel(slurm_cluster: SlurmCluster) -> None:
    job_id = submitted_id(slurm_cluster.cli("submit", "--steps", LONG, "--no-wait", "--no-collectives"))
    wait_until(lambda: log_has(slurm_cluster, job_id, "Step 2/"), 180, "the job's second step")
    slurm_cluster.client.containers.get(f"{slurm_cluster.namespace}-slurm-{job_id}-node3-r0").kill()
    result = slurm_cluster.cli("wait", str(job_id))
    out = " ".join(result.stderr.split())
    print(result.stderr)
    assert result.returncode == 1, out[-3000:]
    assert f"job {job_id} FAILED (NonZeroExitCode)" in out and "node3: Exited with exit code 137" in out
    assert "node2: Exited" not in out.split("---")[0], "node2 was only ended by Slurm after node3 failed"
    assert "--- node3 log (last lines) ---" in out and "--- batch script output (last lines) ---" in out

    job_id = submitted_id(slurm_cluster.cli("submit", "--steps", LONG, "--no-wait", "--no-collectives"))
    wait_until(lambda: job_json(slurm_cluster, job_id)["state"] == "RUNNING", 120, "the job to run")
    result = slurm_cluster.cli("cancel", str(job_id), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["state"] == "CANCELLED"
    prefix = f"{slurm_cluster.namespace}-slurm-{job_id}-"
    wait_until(
        lambda: not slurm_cluster.client.containers.list(all=True, filters={"name": prefix}),
        60,
        "the cancelled job's trainer containers to go",
    )


def test_a_node_that_dies_fails_its_job_the_rest_runs_the_next_and_requeue_resumes(
    slurm_cluster: SlurmCluster,
) -> None:
    cluster = slurm_cluster
    # slurmd of node3 stops in the middle of a job: slurmctld ends the job as NODE_FAIL.
    job_id = submitted_id(cluster.cli("submit", "--steps", LONG, "--no-wait", "--no-collectives"))
    wait_until(lambda: log_has(cluster, job_id, "Step 2/"), 180, "the job's second step")
    cluster.sh("node3", "fleetbench-slurm-service stop slurmd")
    result = cluster.cli("wait", str(job_id))
    out = " ".join(result.stderr.split())
    print(result.stderr)
    assert result.returncode == 1, out[-3000:]
    assert f"job {job_id} NODE_FAIL (NodeDown)" in out and "node3: down, not responding (Not responding)" in out
    # The next submit: two nodes are refused (one is down), one runs on the node that is left.
    refused = cluster.cli("submit", "--nodes", "2", timeout=120)
    assert refused.returncode == 2
    assert "only 1 of the 2 nodes of partition batch can take a job now (node3 down (not responding))" in refused.stderr
    result = cluster.cli("submit", "--nodes", "1", "--steps", "3", "--json", "--no-collectives")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["nodes"] == "node2"
    # node3 comes back. A requeueable job loses node3 after its first checkpoint (the trainer there
    # frozen, slurmd stopped: a node that hangs), is requeued, waits for node3 and resumes.
    cluster.sh("node3", "fleetbench-slurm-service start slurmd")
    wait_until(lambda: "idle node[2-3]" in " ".join(cluster.sh("node1", "sinfo").split()), 60, "node3 to return")
    job_id = submitted_id(
        cluster.cli("submit", "--steps", "20", "--checkpoint-every", "5", "--requeue", "--no-wait", "--no-collectives")
    )
    wait_until(lambda: any(cluster.shared(job_id).glob("checkpoints/step_*/.metadata")), 180, "the first checkpoint")
    frozen = cluster.client.containers.get(f"{cluster.namespace}-slurm-{job_id}-node3-r0")
    frozen.pause()
    cluster.sh("node3", "fleetbench-slurm-service stop slurmd")
    wait_until(lambda: job_json(cluster, job_id)["restarts"] >= 1, 120, "the job to be requeued")
    frozen.remove(force=True)  # the hung node is restarted: its processes are gone
    cluster.sh("node3", "fleetbench-slurm-service start slurmd")
    result = cluster.cli("wait", str(job_id), "--json")
    print(result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    job = json.loads(result.stdout)
    assert job["state"] == "COMPLETED" and job["restarts"] == 1
    assert log_has(cluster, job_id, "resumed from")
    records = read_records(cluster.results / f"slurm-{job_id}")
    resumed = [r for r in records if r.status == "ok" and r.summary.get("resumed_from_step")]
    assert sorted(r.rank for r in resumed) == [0, 1]


def test_cluster_down_removes_the_nodes_and_the_slurm_state(slurm_cluster: SlurmCluster) -> None:
    from fleetbench.deploy.cluster import LABEL, cluster_down

    cluster_down(slurm_cluster.state, namespace=slurm_cluster.namespace)
    assert not slurm_cluster.client.containers.list(all=True, filters={"label": f"{LABEL}={slurm_cluster.namespace}"})
    assert not slurm_cluster.client.containers.list(all=True, filters={"name": f"^{slurm_cluster.namespace}-"})
    assert not list(slurm_cluster.state.glob("nodes/*/slurm")) and not (slurm_cluster.state / "shared").exists()
