"""Slurm without a cluster: the batch script's rendering, the readers of what Slurm 22.05 printed on the
local cluster (sinfo, squeue --json, scontrol, the job completion log, srun's messages), the exporter's
series, and submits refused before any Slurm command runs. The real daemons are in test_slurm.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli
from fleetbench.errors import UserError
from fleetbench.slurm import exporter, queries
from fleetbench.slurm.controller import Controller, ssh_command
from fleetbench.slurm.follow import TAIL_LINES, failing_nodes, job_id_of, log_tail
from fleetbench.slurm.script import JobRequest, render
from fleetbench.slurm.submit import check_capacity

TEMPLATE = (REPO / "deploy" / "slurm" / "fleetbench-train.sbatch").read_text()

# Printed by Debian's Slurm 22.05.8 on the local cluster (`make cluster-up SLURM=1`).
SINFO = "node2|batch*|idle|(null)|2|none\nnode3|batch*|down*|(null)|2|Not responding\n"
SQUEUE_JSON = {
    "meta": {"Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}},
    "errors": [],
    "jobs": [
        {
            "batch_host": "node2",
            "derived_exit_code": 36608,
            "end_time": 1796146786,
            "exit_code": 36608,
            "job_id": 7,
            "job_state": "FAILED",
            "name": "fleetbench-train",
            "node_count": 2,
            "nodes": "node[2-3]",
            "partition": "batch",
            "requeue": False,
            "restart_cnt": 0,
            "start_time": 1796146762,
            "state_reason": "NonZeroExitCode",
        }
    ],
}
JOBCOMP = (
    "JobId=6 UserId=root(0) GroupId=root(0) Name=fleetbench-train JobState=COMPLETED Partition=batch "
    "TimeLimit=UNLIMITED StartTime=2026-12-01T17:35:42 EndTime=2026-12-01T17:37:35 NodeList=node[2-3] NodeCnt=2 "
    "ProcCnt=4 WorkDir=/tmp/shared/results ReservationName= Tres=cpu=2,mem=46162M,node=2,billing=2 Account= QOS= "
    "WcKey= Cluster=unknown SubmitTime=2026-12-01T17:33:40 EligibleTime=2026-12-01T17:35:41 DerivedExitCode=143:0 "
    "ExitCode=0:0"
)
FAILED_BATCH = """\
fleetbench: job 7, restart 0, nodes node[2-3], rendezvous 127.0.0.1:48065, 0 GPU(s) per node, fbslurm/trainer:latest-cpu
srun: error: node3: task 1: Exited with exit code 137
srun: launch/slurm: _step_signal: Terminating StepId=7.0
slurmstepd-node2: error: *** STEP 7.0 ON node2 CANCELLED AT 2026-12-01T17:39:46 ***
srun: error: node2: task 0: Exited with exit code 143
"""


def test_render_replaces_the_directives_and_settings() -> None:
    script = render(TEMPLATE, JobRequest(nodes=3, preset="small", steps=7, requeue=True), "/shared/results")
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --nodes=3" in directives and "#SBATCH --requeue" in directives
    assert "#SBATCH --output=/shared/results/slurm-logs/slurm-%j.out" in directives
    assert not any("--gpus-per-node" in line for line in directives), "a CPU job asks for no GPUs"
    assert "PRESET=small" in script.splitlines() and "STEPS=7" in script.splitlines()
    gpu = render(TEMPLATE, JobRequest(gpus_per_node=8, time_limit="02:00:00"), "/r")
    assert "#SBATCH --gpus-per-node=8" in gpu and "#SBATCH --time=02:00:00" in gpu
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        (JobRequest(nodes=0), "--nodes 0 is not accepted"),
        (JobRequest(gpus_per_node=-1), "--gpus-per-node -1 is not accepted"),
        (JobRequest(preset="huge"), "--preset 'huge' is not accepted; accepted: tiny"),
        (JobRequest(steps=0), "--steps 0 is not accepted"),
        (JobRequest(time_limit="soon"), "--time 'soon' is not accepted"),
        (JobRequest(partition="a b"), "--partition 'a b' is not accepted"),
    ],
)
def test_a_bad_request_is_refused(request_: JobRequest, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        request_.validate()


def test_the_partition_is_asked_before_submitting() -> None:
    nodes = queries.parse_sinfo(SINFO)
    assert [(n.name, n.state, n.responding, n.usable) for n in nodes] == [
        ("node2", "idle", True, True),
        ("node3", "down", False, False),
    ]
    assert check_capacity(JobRequest(nodes=1), nodes) == "batch"
    with pytest.raises(UserError, match=r"--nodes 3 is more than partition batch has \(2: node2, node3\)"):
        check_capacity(JobRequest(nodes=3), nodes)
    with pytest.raises(UserError, match=r"only 1 of the 2 nodes of partition batch can take a job now \(node3 down"):
        check_capacity(JobRequest(nodes=2), nodes)
    with pytest.raises(UserError, match="--gpus-per-node 1: 0 usable node"):
        check_capacity(JobRequest(nodes=1, gpus_per_node=1), nodes)
    with pytest.raises(UserError, match="--partition 'gpu' does not exist; accepted: batch"):
        check_capacity(JobRequest(nodes=1, partition="gpu"), nodes)


def test_gres_counts() -> None:
    assert [queries.gres_gpus(g) for g in ("(null)", "gpu:8", "gpu:h100:8(S:0-1)", "gpu:2,shard:4")] == [0, 8, 8, 2]


def test_job_state_from_squeue_json_and_the_completion_log() -> None:
    job = queries.parse_squeue_json(json.dumps(SQUEUE_JSON), 7)
    assert job is not None
    assert (job.state, job.reason, job.exit_code, job.signal, job.nodes, job.final) == (
        "FAILED",
        "NonZeroExitCode",
        143,
        None,
        "node[2-3]",
        True,
    )
    assert queries.parse_squeue_json(json.dumps(SQUEUE_JSON), 8) is None
    done = queries.parse_key_values(JOBCOMP, 6, "jobcomp")
    assert (done.state, done.exit_code, done.nodes, done.node_count, done.name) == (
        "COMPLETED",
        0,
        "node[2-3]",
        2,
        "fleetbench-train",
    )


def test_the_first_failing_task_is_named_not_those_slurm_ended_after_it() -> None:
    job = queries.parse_squeue_json(json.dumps(SQUEUE_JSON), 7)
    assert job is not None
    assert failing_nodes(Controller("unused", ("false",)), job, FAILED_BATCH) == {"node3": "Exited with exit code 137"}


def test_a_log_tail_leaves_out_native_stack_frames() -> None:
    log = "\n".join(
        [*(f"Step {i}/50 | Loss 2.5" for i in range(1, 31)), "RuntimeError: Connection closed by peer"]
        + [f"frame #{i}: <unknown function> + 0x3d2825 (0x7f in libtorch_python.so)" for i in range(20)]
        + ["<omitting python frames>", "fleetbench: error: rendezvous at 127.0.0.1:1 failed"]
    )
    tail = log_tail(log).splitlines()
    assert len(tail) == TAIL_LINES and not any(line.startswith("frame #") for line in tail)
    assert tail[-2:] == [
        "RuntimeError: Connection closed by peer",
        "fleetbench: error: rendezvous at 127.0.0.1:1 failed",
    ]


def test_the_exporter_counts_states_and_keeps_zero_series() -> None:
    nodes = exporter.parse_sinfo("node2|batch*|allocated|2/0/0/2\nnode3|batch*|down*|0/0/2/2\n")
    jobs = exporter.parse_squeue("5|batch|RUNNING\n4|batch|NODE_FAIL\n")
    series = exporter.samples(nodes, jobs)
    counts = {(labels["state"]): value for labels, value in series[exporter.NODES]}
    assert counts["allocated"] == 1 and counts["down"] == 1 and counts["idle"] == 0
    assert {labels["state"]: value for labels, value in series[exporter.JOBS]}["node_fail"] == 1
    assert {labels["state"]: value for labels, value in series[exporter.CPUS]} == {
        "allocated": 2,
        "idle": 0,
        "other": 2,
        "total": 4,
    }


def test_the_exporter_file_runs_alone() -> None:
    """The role copies exporter.py to the controller: it imports the standard library and prometheus_client."""
    import ast

    path = REPO / "benchmarks" / "fleetbench" / "slurm" / "exporter.py"
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"prometheus_client"}
    done = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and "--listen-address" in done.stdout


def test_ssh_command_reaches_the_host_as_ansible_does() -> None:
    argv = ssh_command(
        "node1",
        {
            "ansible_host": "127.0.0.1",
            "ansible_port": 2222,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": "/k/id",
            "ansible_ssh_common_args": "-o UserKnownHostsFile=/k/known_hosts",
        },
    )
    assert argv[-1] == "root@127.0.0.1" and argv[argv.index("-p") + 1] == "2222"
    assert "BatchMode=yes" in argv and "UserKnownHostsFile=/k/known_hosts" in argv


def test_job_ids() -> None:
    assert job_id_of("42") == 42
    for bad in ("0", "-1", "42a", ""):
        with pytest.raises(UserError, match="is not accepted"):
            job_id_of(bad)


def _unreachable_inventory(folder: Path) -> Path:
    from fleetbench.services.stack import free_port

    hosts = {
        "all": {
            "hosts": {"node1": {"ansible_host": "127.0.0.1", "ansible_port": free_port(), "ansible_user": "root"}},
            "children": {"slurm_controller": {"hosts": {"node1": {}}}, "slurm_compute": {"hosts": {"node1": {}}}},
        }
    }
    (folder / "inventory").mkdir()
    (folder / "inventory" / "hosts.yml").write_text(yaml.safe_dump(hosts))
    return folder / "inventory"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["submit", "--nodes", "0"], "--nodes 0 is not accepted; use 1-4294967293"),
        (["submit", "--preset", "nope"], "--preset 'nope' is not accepted; accepted: tiny"),
        (["submit", "--steps", "-3"], "--steps -3 is not accepted"),
        (["status", "x1"], "job id 'x1' is not accepted"),
        (["submit", "--inventory", "{tmp}/missing"], "inventory {tmp}/missing does not exist"),
        (["submit", "--inventory", "{unreachable}"], "cannot reach the Slurm controller node1 (root@127.0.0.1:"),
        (["info", "--inventory", "{unreachable}"], "cannot reach the Slurm controller node1"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_submitted(args: list[str], fragment: str, tmp_path: Path) -> None:
    inventory = _unreachable_inventory(tmp_path) if "{unreachable}" in args else None
    words = [a.replace("{tmp}", str(tmp_path)).replace("{unreachable}", str(inventory)) for a in args]
    results = tmp_path / "results"
    result = run_cli("slurm", *words, "--results-dir", str(results), timeout=120)
    assert result.returncode == 2, result
    assert result.stderr.startswith("fleetbench: error: ") and result.stderr.strip().count("\n") == 0, result.stderr
    assert fragment.replace("{tmp}", str(tmp_path)) in result.stderr
    assert not results.exists()
