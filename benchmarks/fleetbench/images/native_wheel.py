"""Wheels the images need that PyPI has only as source: built once, in a container on the image's own
base, into a cache outside the repository; the wheelhouse then takes them like any other wheel.

llama-cpp-python is the one today: its sdist builds llama.cpp with CMake (about five minutes on two
cores). Built on the base itself, the wheel links the base's glibc and nothing newer; built without
GGML_NATIVE, it uses the x86-64-v3 instruction set (AVX2, FMA, F16C) that llama.cpp selects then, not
the build machine's, so the image runs on other hosts (`make setup` builds the host venv's the same way).

  ~/.cache/fleetbench/wheels/image-py311-x86_64-<digest>/   digest: requirement, CMake flags, recipe
      llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl
      native-wheel.json                                       what was built, on which base, how long
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.images.wheelhouse import GLIBC, _normal, _req_name, platform_args
from fleetbench.job import Progress, SilentProgress

if TYPE_CHECKING:
    import docker

# requirement name -> CMAKE_ARGS of its build
SOURCE_ONLY = {"llama-cpp-python": "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF"}
CACHE_ENV = "FLEETBENCH_WHEELHOUSE"
RECIPE_VERSION = 1
BUILD_TIMEOUT_S = 3600
STAMP = "native-wheel.json"
# What the build backend needs besides the sdist (scikit-build-core; cmake and ninja where the base's are
# missing or too old): downloaded by the host with the sdist, so the container reaches no index.
BUILD_REQUIREMENTS = ("scikit-build-core[pyproject]>=0.9.2", "cmake>=3.21", "ninja>=1.11")
# Runs as root in a throwaway container on the base: the compilers come from the base's own apt, the
# Python packages from /src only (the host fetched them: its index, proxy and certificates are its own).
SCRIPT = """set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends build-essential python3-dev python3-venv >/dev/null
python3 -m venv /tmp/build
echo "building $REQUIREMENT with CMAKE_ARGS=$CMAKE_ARGS"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) /tmp/build/bin/pip wheel --disable-pip-version-check --no-index \\
  --find-links /src --no-deps --no-binary "$NAME" -w /out "$REQUIREMENT"
chown -R "$OWNER" /out
"""

log = logging.getLogger(__name__)


def requirement_name(requirement: str) -> str:
    """The normalised project name of a requirement line."""
    return _normal(_req_name(requirement))


def source_only(requirements: list[str]) -> list[str]:
    """The requirements among `requirements` that PyPI has no wheel of."""
    return [r for r in requirements if requirement_name(r) in SOURCE_ONLY]


def cache_root() -> Path:
    """$FLEETBENCH_WHEELHOUSE, else ~/.cache/fleetbench/wheels (shared with `make setup`'s host wheels)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "fleetbench" / "wheels")


def wheel_folder(requirement: str, python: str) -> Path:
    """Where the wheel of `requirement` for images of `python` is kept."""
    flags = SOURCE_ONLY[requirement_name(requirement)]
    digest = hashlib.sha256(f"{RECIPE_VERSION}\n{requirement.strip()}\n{flags}\n{SCRIPT}".encode()).hexdigest()[:12]
    return cache_root() / f"image-py{python.replace('.', '')}-{platform.machine()}-{digest}"


def cached(requirement: str, python: str) -> Path | None:
    """The folder holding a built wheel of `requirement`, or None."""
    folder = wheel_folder(requirement, python)
    prefix = requirement_name(requirement).replace("-", "_")
    return folder if (folder / STAMP).is_file() and any(folder.glob(f"{prefix}-*.whl")) else None


def ensure_native_wheels(
    client: docker.DockerClient, base: str, python: str, requirements: list[str], progress: Progress | None = None
) -> list[Path]:
    """A folder with a wheel for each source-only requirement, built on `base` where not cached yet."""
    folders = []
    for requirement in source_only(requirements):
        folder = cached(requirement, python) or _build(client, base, python, requirement, progress or SilentProgress())
        folders.append(folder)
    return folders


def _build(client: docker.DockerClient, base: str, python: str, requirement: str, progress: Progress) -> Path:
    folder = wheel_folder(requirement, python)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "src").mkdir(parents=True)
    name = requirement_name(requirement)
    started = time.monotonic()
    _download_sources(requirement, python, partial / "src", progress)
    log.info("building %s on %s for the images (once, cached in %s)", requirement, base, folder)
    environment = {
        "REQUIREMENT": requirement,
        "NAME": name,
        "CMAKE_ARGS": SOURCE_ONLY[name],
        "OWNER": f"{os.getuid()}:{os.getgid()}",
    }
    container = client.containers.run(
        base,
        ["bash", "-c", SCRIPT],
        environment=environment,
        volumes={str(partial): {"bind": "/out", "mode": "rw"}, str(partial / "src"): {"bind": "/src", "mode": "ro"}},
        user="0:0",
        detach=True,
        labels={"io.fleetbench.purpose": "native-wheel"},
        network_mode="host",  # the base's apt mirror; engines started without a bridge (scripts/dockerd.sh) have no other
    )
    tail: list[str] = []
    try:
        with progress.task("images", f"building {requirement} on {base} (once)") as task:
            for chunk in container.logs(stream=True, follow=True):
                for line in chunk.decode(errors="replace").splitlines():
                    tail = [*tail[-39:], line]
                    if line.strip():
                        task.update(f"{requirement}: {line.strip()[:80]}")
            code = int(container.wait(timeout=BUILD_TIMEOUT_S).get("StatusCode", 1))
    finally:
        container.remove(force=True)
    shutil.rmtree(partial / "src", ignore_errors=True)
    wheels = sorted(p.name for p in partial.glob("*.whl"))
    if code != 0 or not wheels:
        shutil.rmtree(partial, ignore_errors=True)
        log.error("the build's last lines:%s", "".join(f"\n  {line}" for line in tail[-15:]))
        why = next((line for line in reversed(tail) if "error" in line.lower()), f"exit status {code}")
        raise UserError(f"building {requirement} for the images on {base} failed: {why.strip()[:200]}")
    seconds = time.monotonic() - started
    stamp = {"requirement": requirement, "cmake_args": SOURCE_ONLY[name], "base": base, "python": python,
             "wheels": wheels, "seconds": round(seconds, 1)}  # fmt: skip
    (partial / STAMP).write_text(jsonio.dumps(stamp, indent=1) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    log.info("built %s in %.0f s: %s", requirement, seconds, ", ".join(wheels))
    return folder


def _download_sources(requirement: str, python: str, dest: Path, progress: Progress) -> None:
    """The sdist of `requirement` and wheels of its build backend for the base's Python, into `dest`."""
    target = ["--python-version", python, "--implementation", "cp", "--abi", f"cp{python.replace('.', '')}"]
    target += ["--abi", "abi3", "--abi", "none", *platform_args(GLIBC.get(python, 28), platform.machine())]
    with progress.task("images", f"fetching the sources of {requirement}"):
        for argv in (
            ["--no-deps", "--no-binary", ":all:", requirement],
            ["--only-binary", ":all:", *target, *BUILD_REQUIREMENTS],
        ):
            pip = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--dest", str(dest)]
            done = subprocess.run(
                [*pip, *argv],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
                why = errors[-1] if errors else f"pip exited with status {done.returncode}"
                raise UserError(f"fetching the sources of {requirement} for the images failed: {why}")
