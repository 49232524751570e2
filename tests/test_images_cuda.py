"""The CUDA trainer and profiler images built for real with no registry and no GPU: torch's CUDA
build and its nvidia-* wheels from the host-side wheelhouse on the offline Debian base, checked
inside the image (CUDA, cuDNN and NCCL versions, every library torch links resolves, no GPU seen and
the entrypoint says why, the trainer's CPU fallback, non-root, OCI labels, size), the profiler with
a stand-in Nsight Compute mounted from the host, and a rebuild after a code change.

Cost on a 2-core machine: the wheelhouse (3.1 GB) and the image's dependency layer are kept between
sessions (build/wheelhouse/py311-cuda in the checkout, the namespace CACHE on the engine), so a warm
session builds only the code layers; a fresh machine pays the wheelhouse download, the base
(debootstrap, about a minute) and the dependency layer (pip install of the wheels) once.
`docker image rm` of CACHE's images (or `docker image prune`) gives the disk back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import REPO, run_cli
from docker_support import all_tags, snapshot_context
from fleetbench.results.store import read_records
from test_images_cuda_config import stand_in_ncu

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3000)]

# Kept between sessions (not a per-session namespace): its base and dependency layer make the next
# session's build warm.
CACHE = "fbcudacache"
NS = ["--namespace", CACHE]
BUDGET_NVIDIA_MB = 6000  # the nvidia-* wheels as installed; the image's budget is the spec's

# Run inside the image as its own user: versions, what ldd says of torch's libraries, the nvidia-* size.
# The driver's own libraries are never in an image: the NVIDIA Container Toolkit mounts the host's.
INSIDE = r"""
import glob, json, os, subprocess, torch
DRIVER = {"libcuda.so.1", "libnvidia-ml.so.1"}
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
missing, from_driver = {}, {}
for path in sorted(glob.glob(os.path.join(lib, "*.so*"))):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    absent = {line.split()[0] for line in out.splitlines() if "not found" in line}
    if absent - DRIVER:
        missing[os.path.basename(path)] = sorted(absent - DRIVER)
    if absent & DRIVER:
        from_driver[os.path.basename(path)] = sorted(absent & DRIVER)
site = os.path.dirname(os.path.dirname(torch.__file__))
def size(top):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(top) for f in fs
               if not os.path.islink(os.path.join(d, f)))
print(json.dumps({
    "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
    "nccl": ".".join(map(str, torch.cuda.nccl.version())), "available": torch.cuda.is_available(),
    "uid": os.getuid(), "libs": len(glob.glob(os.path.join(lib, "*.so*"))), "missing": missing,
    "from_driver": from_driver,
    "nvidia_bytes": size(os.path.join(site, "nvidia")), "torch_bytes": size(os.path.dirname(torch.__file__)),
    "triton_bytes": size(os.path.join(site, "triton")),
}))
"""


@dataclass
class CudaImages:
    client: Any
    context: Path
    source: Any
    results: dict[str, Any]  # name -> BuildResult
    wheelhouse_seconds: float
    wheelhouse_downloaded: bool

    def ref(self, name: str) -> str:
        return f"{CACHE}/{name}:latest"


@pytest.fixture(scope="module")
def cuda(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CudaImages]:
    from fleetbench.images.base import NAMESPACE_LABEL
    from fleetbench.images.build import build_images, source_info
    from fleetbench.images.specs import Wheels
    from fleetbench.images.wheelhouse import ensure_wheelhouse

    started = time.monotonic()
    house = ensure_wheelhouse(REPO, Wheels("3.11", "cuda"))  # kept in the checkout's build/ between sessions
    wheelhouse_seconds = time.monotonic() - started
    context = snapshot_context(tmp_path_factory.mktemp("cuda-context"))
    source = source_info(REPO)
    results = build_images(
        ["trainer", "profiler"], "cuda", context=context, namespace=CACHE, client=engine, source=source
    )
    yield CudaImages(engine, context, source, {r.name: r for r in results}, wheelhouse_seconds, house.downloaded)
    # Keep the latest build (the next session's cache); drop older tags and what they alone held.
    keep = {tag for r in results for tag in r.tags}
    for tag in all_tags(engine):
        if tag.startswith(f"{CACHE}/") and tag not in keep and "/base:" not in tag:
            engine.images.remove(tag)
    engine.images.prune(filters={"dangling": True, "label": f"{NAMESPACE_LABEL}={CACHE}"})


def run_inside(client: Any, image: str, command: list[str]) -> tuple[int, str, str]:
    """Run `command` through the image's entrypoint, no GPU, host network; (status, stdout, stderr)."""
    container = client.containers.create(image, command, network_mode="host")
    try:
        container.start()
        status = int(container.wait(timeout=600).get("StatusCode", 1))
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    return status, out, err


def test_cuda_trainer_inside_cuda_cudnn_nccl_resolve_and_no_gpu_is_said(
    cuda: CudaImages, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_inside(cuda.client, cuda.ref("trainer"), ["python", "-c", INSIDE])
    assert status == 0, err[-3000:]
    found = json.loads(out.strip().splitlines()[-1])
    assert found["cuda"] and found["cuda"].split(".")[0] >= "12", found
    assert found["cudnn"] and found["cudnn"] >= 90000, found  # cuDNN 9
    assert found["nccl"].startswith("2."), found
    assert found["libs"] >= 5 and found["missing"] == {}, found["missing"]  # every library torch links resolves
    assert set(found["from_driver"]) <= {"libcaffe2_nvrtc.so"}, found["from_driver"]  # the host's libcuda only
    assert found["available"] is False and found["uid"] == 10001
    assert "no GPU was passed to this container" in err and "--gpus all" in err  # the entrypoint's one line
    assert found["nvidia_bytes"] / 1e6 <= BUDGET_NVIDIA_MB
    result = cuda.results["trainer"]
    with capsys.disabled():
        print(
            f"\nCUDA trainer image: {result.size_bytes / 1e6:.0f} MB (budget {result.budget_mb} MB; nvidia-* wheels "
            f"{found['nvidia_bytes'] / 1e6:.0f} MB, torch {found['torch_bytes'] / 1e6:.0f} MB, triton "
            f"{found['triton_bytes'] / 1e6:.0f} MB); torch {found['torch']}, CUDA {found['cuda']}, cuDNN "
            f"{found['cudnn']}, NCCL {found['nccl']}; the driver's libraries (host) for {found['from_driver']}; wheelhouse {cuda.wheelhouse_seconds:.0f} s "
            f"({'downloaded' if cuda.wheelhouse_downloaded else 'warm'}), build "
            + ", ".join(
                f"{r.name} {r.seconds:.0f} s ({r.cached_steps}/{r.steps} cached)" for r in cuda.results.values()
            )
        )


def test_cuda_images_are_non_root_labelled_and_within_budget(cuda: CudaImages) -> None:
    for name, result in cuda.results.items():
        config = cuda.client.images.get(result.tags[0]).attrs["Config"]
        assert config["User"] == "10001:10001", name
        labels = config["Labels"]
        assert labels["org.opencontainers.image.title"] == f"fleetbench-{name}"
        assert labels["org.opencontainers.image.revision"] == cuda.source.revision
        assert labels["org.opencontainers.image.source"].startswith("https://")
        assert result.tags[1] == f"{CACHE}/{name}:latest"
        assert "FLEETBENCH_TORCH_FLAVOR=cuda" in config["Env"]
        assert result.budget_mb and result.size_bytes / 1e6 <= result.budget_mb, (name, result.size_bytes)


def test_cuda_trainer_falls_back_to_the_cpu_without_a_gpu(cuda: CudaImages, tmp_path: Path) -> None:
    results, run_id = tmp_path / "results", "cuda-img-cpu"
    done = run_cli(
        "images", "run", "trainer", "--variant", "cuda", *NS, "--results-dir", str(results), "--",
        "--nproc", "1", "--preset", "tiny", "--steps", "3", "--run-id", run_id,
        cwd=REPO, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = read_records(results / run_id)
    assert record.status == "ok" and record.backend == "cpu", record
    assert record.packages["torch"].startswith("2.14")  # the CUDA build ran, on the CPU
    assert "no GPU was passed to this container" in done.stderr


def test_profiler_runs_the_hosts_ncu_mounted_read_only(cuda: CudaImages, tmp_path: Path) -> None:
    folder = stand_in_ncu(tmp_path / "nsight-compute" / "2025.1.0")
    done = run_cli(
        "images", "run", "profiler", "--variant", "cuda", *NS, "--ncu-dir", str(folder), "--",
        "bash", "-c", "command -v ncu; ncu --version; touch /opt/nvidia/nsight-compute/x 2>&1 || echo read-only",
        cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "/opt/nvidia/nsight-compute/ncu" in done.stdout
    assert "Version 2025.1.0.0 (stand-in)" in done.stdout and "read-only" in done.stdout
    status, _, err = run_inside(cuda.client, cuda.ref("profiler"), ["python", "-c", "import ncu_report"])
    assert status == 0, err[-2000:]


def test_rebuild_after_a_code_change_reuses_every_dependency_layer(
    cuda: CudaImages, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.images.build import build_images

    first = cuda.results["trainer"]
    source = (cuda.context / "benchmarks/fleetbench/__init__.py").read_text()
    (rebuilt,) = build_images(
        ["trainer"], "cuda", context=cuda.context, namespace=CACHE, client=cuda.client, source=cuda.source,
        extra_files={"benchmarks/fleetbench/__init__.py": source + "# a one-line change\n"},
    )  # fmt: skip
    before = cuda.client.images.get(first.image_id).attrs["RootFS"]["Layers"]
    after = cuda.client.images.get(rebuilt.image_id).attrs["RootFS"]["Layers"]
    shared = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), len(before))
    assert rebuilt.image_id != first.image_id
    assert shared >= len(after) - 2, (shared, len(after))  # only the code layers differ
    # The wheels never travel with the context: a rebuild costs the code layers, not the 3 GB.
    assert rebuilt.seconds < 120, rebuilt.seconds
    cold = first.cached_steps <= 1
    if cold:  # measured against a cold build only; a warm session's first build is itself a rebuild
        assert rebuilt.seconds / first.seconds <= 0.05, (rebuilt.seconds, first.seconds)
    # Put back the tagged build of the checkout (the next session's cache).
    build_images(["trainer"], "cuda", context=cuda.context, namespace=CACHE, client=cuda.client, source=cuda.source)
    with capsys.disabled():
        Console(width=120).print(
            f"\nCUDA trainer: first build {first.seconds:.1f} s ({'cold' if cold else 'warm'}), rebuild after a "
            f"one-line change {rebuilt.seconds:.1f} s (ratio {rebuilt.seconds / first.seconds:.3f}; "
            f"{shared}/{len(after)} layers reused)"
        )
