"""The profile playbook with Nsight Compute on the local cluster of SSH nodes (node2 is the profiler host).

Before ncu, the profiler role runs `fleetbench ncu permissions --json` in the profiler image on the node
(the driver's folder mounted read-only) and starts the ncu container as it says. The nodes are CPU
containers with no NVIDIA driver, so the real preflight says `no_driver`; for the other states the role
is pointed (profiler_nvidia_params_path) at a params file on the node, written as the driver writes
/proc/driver/nvidia/params.

ncu itself cannot run without a GPU. The ncu container runs the image's real `fleetbench ncu run`, with
profile.ncu.executable set to a test double on the node that records its uid, its effective capabilities
(CapEff of /proc/self/status) and its arguments, and writes a real report from tests/data where ncu
would; the summary, the roofline and the record are the image's own code. What the docker_container
task was given (user, capabilities, command) comes from the ansible-runner events.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetbench.results.store import read_records
from test_deploy_cluster import cluster, deploy  # noqa: F401  (cluster: the three-node fixture, reused)
from testdata import get_test_data_dir

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

PROFILER_HOST = "node2"
SUITE_UID = 10001
CAP_SYS_ADMIN = 21
NCU_TASK = "Run Nsight Compute (fleetbench ncu run) as the preflight chose"
REPORT = get_test_data_dir() / "ncu-rep" / "gtx1660s_naive_gemm.ncu-rep"
NCU_DOUBLE = """#!/usr/bin/env python3
# A test double of Nsight Compute: records who ran it and how, then writes a real report where -o says.
import json, os, shutil, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
with open(os.path.join(here, "calls.jsonl"), "a") as out:
    out.write(json.dumps({"uid": os.getuid(), "cap_eff": status["CapEff"].strip(), "args": args}) + "\\n")
report = args[args.index("-o") + 1]
shutil.copy(os.path.join(here, "report.ncu-rep"), report)
print("==PROF== Report: " + report)
"""


def node_dir(inventory: Path) -> Path:
    """The profiler node's state folder (mounted at the same path inside the node)."""
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())["all"]["hosts"]
    return Path(hosts[PROFILER_HOST]["fleetbench_results_dir"]).parent


def site(cluster_inventory: Path, folder: Path, host_vars: dict[str, Any]) -> Path:
    """A copy of the cluster's inventory with these variables for the profiler host; telemetry off."""
    inventory = folder / "inventory"
    shutil.copytree(cluster_inventory, inventory)
    (inventory / "host_vars").mkdir()
    text = yaml.safe_dump({"fleetbench_pushgateway_url": "", **host_vars})
    (inventory / "host_vars" / f"{PROFILER_HOST}.yml").write_text(text)
    return inventory


def results_dir_ready(inventory: Path, tmp_path: Path) -> Path:
    """The node's results folder, made by the images playbook (docker_host) as a site's first deploy does."""
    rc, log, stats = deploy("images", inventory, tmp_path / "controller", "ncu-images", "--limit", PROFILER_HOST)
    assert rc == 0 and not stats["failures"], log[-4000:]
    results = node_dir(inventory) / "results"
    assert results.stat().st_uid == SUITE_UID
    return results


def params_file(inventory: Path, name: str, value: str) -> Path:
    """A driver params file on the node: a few of the driver's lines and `RmProfilingAdminOnly: value`."""
    path = node_dir(inventory) / "nvidia" / name / "params"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"RmLogonRC: 1\nModifyDeviceFiles: 1\nRmProfilingAdminOnly: {value}\nDynamicPowerManagement: 3\n")
    path.chmod(0o444)
    return path


def ncu_double(results: Path, name: str) -> Path:
    """The test double and the real report it hands out, in a folder of the node's results root."""
    folder = results / f"ncu-double-{name}"
    folder.mkdir()
    shutil.copy(REPORT, folder / "report.ncu-rep")
    (folder / "ncu").write_text(NCU_DOUBLE)
    (folder / "ncu").chmod(0o755)
    os.chown(folder, SUITE_UID, SUITE_UID)  # the non-root run appends its calls.jsonl here
    return folder


def events(results: Path, run_id: str, playbook: str) -> list[dict[str, Any]]:
    """The ansible-runner events of this run's latest `playbook` deploy, in order."""
    runs = sorted((results / run_id / "deploy").glob(f"artifacts/{playbook}-*"))
    files = sorted(runs[-1].glob("job_events/*.json"), key=lambda p: int(p.name.split("-", 1)[0]))
    return [json.loads(p.read_text()) for p in files]


def task_result(found: list[dict[str, Any]], task: str, kind: str = "runner_on_ok") -> dict[str, Any]:
    """The result of `task` on the profiler host (one event of that kind)."""
    matching = [
        e["event_data"]
        for e in found
        if e.get("event") == kind
        and e["event_data"].get("task") == task
        and e["event_data"].get("host") == PROFILER_HOST
    ]
    assert len(matching) == 1, [(e.get("event"), e.get("event_data", {}).get("task")) for e in found]
    result: dict[str, Any] = matching[0].get("res", {})  # a skipped task has none
    return result


def preflight_report(found: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = task_result(found, "Report the counter permission")["msg"]
    return lines


def ncu_flag(args: list[str]) -> str:
    return args[args.index("--set") + 1] if "--set" in args else ""


def test_without_a_driver_a_cpu_host_skips_ncu_and_a_gpu_host_fails_clearly(
    cluster: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    inventory = site(cluster, tmp_path, {"fleetbench_profile_ncu": True})
    controller = tmp_path / "controller"

    # The nodes' real /proc/driver/nvidia/params is absent: the CPU host (profiler_use_gpus false) goes on without ncu.
    rc, log, stats = deploy("profile", inventory, controller, "ncu-cpu", "--skip-tags", "profiler_torch")
    assert rc == 0, log[-4000:]
    found = events(controller, "ncu-cpu", "profile")
    report = preflight_report(found)
    assert report[0].startswith(f"{PROFILER_HOST}: GPU performance counters no_driver (/proc/driver/nvidia/params)")
    assert "no NVIDIA driver is loaded on this host" in report[0]
    assert report[1].startswith("ncu skipped: a CPU host (profiler_use_gpus false) with no NVIDIA driver")
    task_result(found, NCU_TASK, "runner_on_skipped")

    # The same host declared a GPU host: the preflight stops the play before any container runs.
    gpu = site(cluster, tmp_path / "gpu", {"fleetbench_profile_ncu": True, "profiler_use_gpus": True})
    rc, log, stats = deploy("profile", gpu, controller, "ncu-gpu")
    assert rc == 1
    assert PROFILER_HOST in stats["failures"]
    found = events(controller, "ncu-gpu", "profile")
    failed = task_result(found, "Refuse ncu on a GPU host without an NVIDIA driver", "runner_on_failed")
    assert failed["msg"].startswith(
        f"{PROFILER_HOST}: Nsight Compute was asked for (fleetbench_profile_ncu) but this host has no NVIDIA driver "
        "(/proc/driver/nvidia/params does not exist)"
    )
    started = {e.get("event_data", {}).get("task") for e in found}  # verbose and warning events carry none
    assert "Run the profiler" not in started and NCU_TASK not in started


@pytest.mark.realdata
def test_admin_only_runs_ncu_as_root_with_sys_admin_then_collect_brings_the_report_back(
    cluster: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    pytest.importorskip("ncu_report", reason="the report is read back here with NVIDIA's ncu-report package")
    base = site(cluster, tmp_path, {})
    results = results_dir_ready(base, tmp_path)
    double = ncu_double(results, "admin")
    params = params_file(base, "admin", "1")
    inventory = site(
        cluster,
        tmp_path / "admin",
        {
            "fleetbench_profile_ncu": True,
            "profiler_nvidia_params_path": str(params),
            "profiler_ncu_extra_args": ["--set", f"profile.ncu.executable=/results/{double.name}/ncu"],
        },
    )
    controller = tmp_path / "controller"
    rc, log, _ = deploy("profile", inventory, controller, "ncu-admin")
    assert rc == 0, log[-4000:]
    found = events(controller, "ncu-admin", "profile")

    report = preflight_report(found)
    assert report[0].startswith(f"{PROFILER_HOST}: GPU performance counters admin_only ({params})")
    assert report[1] == "ncu container: uid:gid 0:0, capabilities SYS_ADMIN, never --privileged"
    assert "options nvidia NVreg_RestrictProfilingToAdminUsers=0" in report[2]
    given = task_result(found, NCU_TASK)["invocation"]["module_args"]
    assert given["user"] == "0:0" and given["capabilities"] == ["SYS_ADMIN"] and not given.get("privileged")
    assert given["command"] == [
        "fleetbench",
        "ncu",
        "run",
        "--run-id",
        "ncu-admin",
        "--set",
        "run.continues=true",  # every node adds its records to the deploy's one run
        "--results-dir",
        "/results",
        "--set",
        f"profile.ncu.executable=/results/{double.name}/ncu",
    ]

    # Inside: uid 0 with CAP_SYS_ADMIN in its effective set, ncu on the profile workload.
    (call,) = [json.loads(line) for line in (double / "calls.jsonl").read_text().splitlines()]
    assert call["uid"] == 0 and int(call["cap_eff"], 16) & (1 << CAP_SYS_ADMIN)
    assert call["args"][call["args"].index("-o") + 1] == "/results/ncu-admin/ncu/report.ncu-rep"
    assert call["args"][-4:-2] == ["-m", "fleetbench.profile.ncu.target"]
    # What ncu wrote as root belongs to the suite's user again.
    assert {p.stat().st_uid for p in (results / "ncu-admin").rglob("*")} == {SUITE_UID}
    assert (double / "calls.jsonl").stat().st_uid == SUITE_UID

    # collect brings both captures of the run back to the controller.
    rc, log, _ = deploy("collect", inventory, controller, "ncu-admin", "--limit", PROFILER_HOST)
    assert rc == 0, log[-4000:]
    back = controller / "ncu-admin" / "hosts" / PROFILER_HOST
    assert (back / "ncu" / "report.ncu-rep").read_bytes() == REPORT.read_bytes()
    summary = json.loads((back / "ncu" / "ncu_summary.json").read_text())
    assert summary["kernels"] and summary["kernels"][0]["name"].startswith("naive_gemm")
    records = {r.benchmark: r for r in read_records(back)}
    assert set(records) == {"profile", "ncu"} and all(r.status == "ok" for r in records.values())
    assert records["ncu"].host == PROFILER_HOST


@pytest.mark.realdata
def test_unrestricted_runs_ncu_as_the_suite_user_without_capabilities(
    cluster: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    pytest.importorskip("ncu_report", reason="the report is read back here with NVIDIA's ncu-report package")
    base = site(cluster, tmp_path, {})
    results = results_dir_ready(base, tmp_path)
    double = ncu_double(results, "user")
    params = params_file(base, "user", "0")
    inventory = site(
        cluster,
        tmp_path / "user",
        {
            "fleetbench_profile_ncu": True,
            "profiler_nvidia_params_path": str(params),
            "profiler_ncu_extra_args": ["--set", f"profile.ncu.executable=/results/{double.name}/ncu"],
        },
    )
    controller = tmp_path / "controller"
    rc, log, _ = deploy("profile", inventory, controller, "ncu-user", "--skip-tags", "profiler_torch")
    assert rc == 0, log[-4000:]
    found = events(controller, "ncu-user", "profile")

    report = preflight_report(found)
    assert report[0].startswith(f"{PROFILER_HOST}: GPU performance counters unrestricted ({params})")
    assert report[1] == f"ncu container: uid:gid {SUITE_UID}:{SUITE_UID}, no added capability, never --privileged"
    given = task_result(found, NCU_TASK)["invocation"]["module_args"]
    assert given["user"] == f"{SUITE_UID}:{SUITE_UID}" and given["capabilities"] == []
    (call,) = [json.loads(line) for line in (double / "calls.jsonl").read_text().splitlines()]
    assert call["uid"] == SUITE_UID and int(call["cap_eff"], 16) == 0
    task_result(found, "Give what ncu wrote as root back to the suite's user", "runner_on_skipped")
    assert (results / "ncu-user" / "ncu" / "ncu_summary.json").is_file()
