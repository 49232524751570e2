"""The CUDA images without an engine: which base and wheelhouse a build picks, the GPU arguments that
`images run --gpus` and the Ansible roles hand to Docker, the profiler's host Nsight Compute mount
(`--ncu-dir`) and the counter-permission preflight that decides its user."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from conftest import REPO
from fleetbench.images.build import NSIGHT_COMPUTE_PACKAGE, profiler_nsight_package
from fleetbench.images.container import NCU_IN_IMAGE, RunOptions, gpu_requests, ncu_mount, profiler_user
from fleetbench.images.specs import CUDA_BASE, IMAGES, base_image_for, local_base, wheels_for

# What `docker run --gpus all` sends to the engine (docker/cli opts.GpuOpts): every GPU, capability gpu.
DOCKER_CLI_GPUS_ALL = {"Count": -1, "Capabilities": [["gpu"]]}


def test_cuda_trainer_and_profiler_build_on_the_offline_base_with_the_py311_cuda_wheelhouse() -> None:
    trainer, profiler = IMAGES["trainer"], IMAGES["profiler"]
    assert base_image_for(trainer, "cuda", "ns") == local_base("ns") == base_image_for(trainer, "cpu", "ns")
    assert wheels_for(trainer, "cuda", None).key == "py311-cuda"
    assert wheels_for(profiler, "cuda", None).key == "py311-cuda"  # the layer under it is the trainer's
    # NVIDIA's base (Ubuntu 24.04) has Python 3.12: its wheelhouse must match; an unknown base says so.
    assert wheels_for(trainer, "cuda", CUDA_BASE).key == "py312-cuda"
    assert wheels_for(trainer, "cuda", "registry.example/any:1", "3.13").key == "py313-cuda"
    assert wheels_for(trainer, "cpu", None).key == "py311-cpu"
    # The edge runner keeps its upstream Debian base for the cuda variant.
    assert base_image_for(IMAGES["edge-vulkan"], "cuda", "ns") == IMAGES["edge-vulkan"].upstream_base


def test_nsight_compute_comes_from_apt_only_where_the_base_has_nvidias_repository() -> None:
    assert profiler_nsight_package("cuda", None, None) == ""  # offline base: the host's, with --ncu-dir
    assert profiler_nsight_package("cuda", CUDA_BASE, None) == NSIGHT_COMPUTE_PACKAGE
    assert profiler_nsight_package("cpu", None, None) == ""
    assert profiler_nsight_package("cuda", None, "cuda-nsight-compute-13-0") == "cuda-nsight-compute-13-0"


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ("all", {"Count": -1, "DeviceIDs": []}),
        ("2", {"Count": 2, "DeviceIDs": []}),
        ("0,3", {"Count": 0, "DeviceIDs": ["0", "3"]}),
    ],
)
def test_images_run_gpus_become_docker_device_requests(gpus: str, expected: dict[str, Any]) -> None:
    (request,) = gpu_requests(gpus, IMAGES["trainer"])
    assert {key: request[key] for key in expected} == expected
    assert request["Capabilities"] == [["gpu", "compute", "utility"]]  # gpu, as --gpus; the driver's libraries
    assert request["Driver"] == ""  # as `docker run --gpus`: the engine picks NVIDIA's for capability gpu
    assert gpu_requests(None, IMAGES["trainer"]) == []


def _render(expression: str, **variables: Any) -> Any:
    """An Ansible task value rendered as Ansible would for these variables (its `bool` filter included)."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["bool"] = lambda value: str(value).strip().lower() in {"1", "true", "yes", "on"}
    return ast.literal_eval(env.from_string(expression).render(**variables).strip())


@pytest.mark.parametrize("role", ["trainer", "profiler"])
def test_ansible_roles_pass_every_gpu_the_way_docker_run_gpus_all_does(role: str) -> None:
    tasks = yaml.safe_load((REPO / "deploy/roles" / role / "tasks/main.yml").read_text())

    def containers(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found = []
        for task in items:
            found += containers(task.get("block", []))
            if "community.docker.docker_container" in task:
                found.append(task["community.docker.docker_container"])
        return found

    runs = [c for c in containers(tasks) if "device_requests" in c]
    assert runs, role
    for run in runs:
        on = _render(run["device_requests"], **{f"{role}_use_gpus": True})
        assert [{key.capitalize(): value for key, value in r.items() if key != "driver"} for r in on] == [
            DOCKER_CLI_GPUS_ALL
        ]
        assert on[0]["driver"] == "nvidia"
        assert _render(run["device_requests"], **{f"{role}_use_gpus": "false"}) == []


def test_profiler_role_mounts_the_hosts_nsight_compute_read_only_when_given() -> None:
    tasks = yaml.safe_load((REPO / "deploy/roles/profiler/tasks/main.yml").read_text())
    block = next(t for t in tasks if t.get("name") == "Nsight Compute on the profile workload")["block"]
    ncu = block[0]["community.docker.docker_container"]
    given = _render(ncu["volumes"], fleetbench_results_dir="/srv/results", profiler_ncu_dir="/opt/nvidia/ncu/2025.1")
    assert given == ["/srv/results:/results", f"/opt/nvidia/ncu/2025.1:{NCU_IN_IMAGE}:ro"]
    assert _render(ncu["volumes"], fleetbench_results_dir="/srv/results", profiler_ncu_dir="") == [
        "/srv/results:/results"
    ]
    defaults = yaml.safe_load((REPO / "deploy/roles/profiler/defaults/main.yml").read_text())
    assert defaults["profiler_ncu_dir"] == ""


def stand_in_ncu(folder: Path, version: str = "2025.1.0.0") -> Path:
    """A folder laid out like a host's Nsight Compute install whose `ncu` only reports its version."""
    folder.mkdir(parents=True, exist_ok=True)
    ncu = folder / "ncu"
    ncu.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then\n'
        '  echo "NVIDIA (R) Nsight Compute Command Line Profiler"\n'
        f'  echo "Version {version} (stand-in)"\n'
        "  exit 0\n"
        "fi\n"
        'echo "stand-in ncu: only --version" >&2\n'
        "exit 1\n"
    )
    ncu.chmod(0o755)
    return folder


def test_ncu_dir_is_mounted_read_only_where_the_image_looks_for_ncu(tmp_path: Path) -> None:
    folder = stand_in_ncu(tmp_path / "nsight-compute" / "2025.1.0")
    assert ncu_mount(IMAGES["profiler"], folder) == {str(folder.resolve()): {"bind": NCU_IN_IMAGE, "mode": "ro"}}
    assert ncu_mount(IMAGES["profiler"], None) == {}
    dockerfile = (REPO / "containers/profiler/Dockerfile").read_text()
    assert f":{NCU_IN_IMAGE} " in dockerfile.replace("\\", " ")  # on the image's PATH


@pytest.mark.parametrize(("value", "root"), [("0", False), ("1", True), ("garbled", True)])
def test_profiler_user_follows_the_hosts_counter_permission(tmp_path: Path, value: str, root: bool) -> None:
    params = tmp_path / "params"
    params.write_text(f"ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: {value}\n")
    user = profiler_user(RunOptions(gpus="all", counter_params=params))
    assert user == ("0:0" if root else None), user  # None: the caller's uid:gid, no capability needed
    assert profiler_user(RunOptions(gpus="all", counter_params=tmp_path / "absent")) == "0:0"


def test_the_wheelhouse_is_served_on_loopback_quietly_and_only_while_the_build_runs(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import urllib.error
    import urllib.request

    from fleetbench.images.wheelhouse import WHEELHOUSE_PORT, serve_wheelhouse

    (tmp_path / "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
    with serve_wheelhouse(tmp_path) as address:
        assert address.startswith("127.")  # loopback only
        url = f"http://{address}:{WHEELHOUSE_PORT}/"
        listing = urllib.request.urlopen(url, timeout=10).read().decode()  # what pip --find-links reads
        assert "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl" in listing
        with pytest.raises(urllib.error.HTTPError):  # GET and HEAD only: nothing can be written
            urllib.request.urlopen(urllib.request.Request(url + "x.whl", data=b"x", method="PUT"), timeout=10)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)
    assert capfd.readouterr().err == ""  # requests go to the debug log, never to the terminal
