"""The images the suite ships, their variants and what running each one needs. No Docker import here.

Variants:
  cuda  the default, for real clusters and device farms. trainer and profiler build on the local
        offline base with torch's CUDA build: its `nvidia-*` wheels carry the CUDA runtime, cuBLAS,
        cuDNN and NCCL, and the driver comes from the host at run time (`--gpus`), so no registry is
        needed; `--base nvidia/cuda:...` builds them on NVIDIA's image instead. The other images use
        their Dockerfile's BASE_IMAGE default, an official upstream image with a pinned tag (Debian
        slim for the edge runner and the monitoring services, Grafana's own image for Grafana).
  cpu   builds offline on the local base `<namespace>/base:bookworm` (debootstrap of Debian 12 +
        `docker import`, made by the suite when missing), with the CPU build of torch.

Architectures: amd64 (the default) and, for the edge runner, arm64 (Jetson Orin, RK3588 boards),
built on an x86-64 machine under emulation (qemu-user-static through binfmt_misc, images/emulation)
on a base of its own (`<namespace>/base:bookworm-arm64`); its tags end in `-arm64`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleetbench.errors import UserError

VARIANTS = ("cuda", "cpu")
# Docker's architecture name -> the kernel's (uname -m, Ansible's `ansible_architecture`)
ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}
DEFAULT_ARCH = "amd64"
DEFAULT_NAMESPACE = "fleetbench"
LOCAL_BASE_NAME = "base"
LOCAL_BASE_TAG = "bookworm"
# Python of the bases: Ubuntu 24.04 (NVIDIA's CUDA images) has 3.12; Debian 12 has 3.11.
CUDA_BASE = "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
DEBIAN_BASE = "debian:12.11-slim"
GRAFANA_BASE = "grafana/grafana-oss:11.6.0"
LOCAL_BASE_PYTHON = "3.11"
# The Python of a base given with --base, where the suite knows it (else --base-python, else 3.11):
# the wheelhouse must match it.
BASE_PYTHON = {CUDA_BASE: "3.12", DEBIAN_BASE: "3.11"}


@dataclass(frozen=True)
class Wheels:
    """Which host-side wheelhouse an image installs from: the target Python and the torch build."""

    python: str  # "3.11"
    torch_flavor: str  # "cpu" or "cuda"
    arch: str = DEFAULT_ARCH  # the image's architecture (ARCHES), which need not be the host's

    @property
    def key(self) -> str:
        """The wheelhouse folder name, e.g. py311-cpu (amd64), py311-cpu-arm64."""
        suffix = "" if self.arch == DEFAULT_ARCH else f"-{self.arch}"
        return f"py{self.python.replace('.', '')}-{self.torch_flavor}{suffix}"

    @property
    def machine(self) -> str:
        """The kernel's name of the architecture, as wheel platform tags spell it (x86_64, aarch64)."""
        return ARCHES[self.arch]


@dataclass(frozen=True)
class ImageSpec:
    """One image of the suite: its Dockerfile, variants, wheelhouse, and what running it needs."""

    name: str
    summary: str
    dockerfile: str  # relative to the build context (the repository root)
    upstream_base: str  # the BASE_IMAGE of variant cuda where it is not on the local base (a pinned upstream tag)
    variants: tuple[str, ...]
    wheels: dict[str, Wheels] = field(default_factory=dict)  # variant -> wheelhouse; empty: no Python deps
    extras: tuple[str, ...] = ()  # pyproject extras (and containers/<name>/requirements.txt) it installs
    # pyproject extras installed in the image's own stage, on top of the dependency layer it shares
    own_extras: tuple[str, ...] = ()
    parent: str | None = None  # built FROM this image of the suite (build arg PARENT_IMAGE)
    cap_add: tuple[str, ...] = ()  # capabilities `images run` adds (never --privileged)
    run_as_root_with_gpus: bool = False  # added capabilities reach only root's effective set in Docker
    gpu_capabilities: tuple[str, ...] = ("gpu", "compute", "utility")
    shm_size: str | None = None
    service: bool = False  # long-running, has a HEALTHCHECK
    root_reason: str | None = None  # why the image runs as root (the rest run as a non-root user)
    size_budget_mb: dict[str, int] = field(default_factory=dict)  # variant -> budget (docs: containers/README.md)
    local_base_variants: tuple[str, ...] = ("cpu",)  # variants built on the local offline base by default
    target: str | None = None  # the Dockerfile's stage to build where the file holds several images
    arches: tuple[str, ...] = (DEFAULT_ARCH,)  # architectures it builds for (ARCHES)

    def tag_suffix(self, variant: str, arch: str = DEFAULT_ARCH) -> str:
        """The tag suffix of `variant` and `arch`: none for cuda, `-cpu` for cpu; `-arm64` after it for arm64."""
        return ("" if variant == "cuda" else f"-{variant}") + ("" if arch == DEFAULT_ARCH else f"-{arch}")

    def repository(self, namespace: str) -> str:
        """`<namespace>/<name>`."""
        return f"{namespace}/{self.name}"


_CPU311 = Wheels("3.11", "cpu")
_CUDA311 = Wheels("3.11", "cuda")
# torch's CUDA build: measured 6438 MB, of which the nvidia-* wheels 3363 MB (containers/README.md).
CUDA_TRAINER_BUDGET_MB = 7000
# trainer and edge-vulkan are two targets of one Dockerfile: one runtime and dependency stage for both
PYTHON_DOCKERFILE = "containers/python/Dockerfile"

IMAGES: dict[str, ImageSpec] = {
    spec.name: spec
    for spec in (
        ImageSpec(
            name="trainer",
            summary="the suite with torch (NCCL on CUDA); entrypoint: `fleetbench train` (torchrun launch)",
            dockerfile=PYTHON_DOCKERFILE,
            target="trainer",
            upstream_base=CUDA_BASE,
            variants=("cuda", "cpu"),
            wheels={"cuda": _CUDA311, "cpu": _CPU311},
            extras=("train",),
            shm_size="2g",
            size_budget_mb={"cpu": 1700, "cuda": CUDA_TRAINER_BUDGET_MB},
            local_base_variants=("cpu", "cuda"),
        ),
        ImageSpec(
            name="profiler",
            summary="trainer + Nsight Compute (ncu) and the ncu-report reader; needs --cap-add SYS_ADMIN",
            dockerfile="containers/profiler/Dockerfile",
            upstream_base=CUDA_BASE,
            variants=("cuda", "cpu"),
            wheels={"cuda": _CUDA311, "cpu": _CPU311},
            extras=("ncu",),
            parent="trainer",
            cap_add=("SYS_ADMIN",),
            run_as_root_with_gpus=True,
            shm_size="2g",
            size_budget_mb={"cpu": 1800, "cuda": CUDA_TRAINER_BUDGET_MB + 200},
        ),
        ImageSpec(
            name="edge-vulkan",
            summary="the edge runner (wgpu) with the Vulkan loader, Mesa (lavapipe fallback) and glslc",
            dockerfile=PYTHON_DOCKERFILE,
            target="edge-vulkan",
            upstream_base=DEBIAN_BASE,
            variants=("cuda", "cpu"),
            wheels={"cuda": _CPU311, "cpu": _CPU311},
            extras=("edge",),
            own_extras=("llm",),  # `edge llm`'s llama.cpp and MLX; not in the trainer's layer
            gpu_capabilities=("gpu", "graphics", "compute", "utility"),
            size_budget_mb={"cpu": 2100},  # 1987 MB measured with llama.cpp and MLX
            arches=("amd64", "arm64"),  # the arm64 boards of the device farm
        ),
        ImageSpec(
            name="prometheus",
            summary="Prometheus (Debian package) scraping the Pushgateway with honor_labels; HEALTHCHECK",
            dockerfile="containers/monitoring/prometheus/Dockerfile",
            upstream_base=DEBIAN_BASE,
            variants=("cuda", "cpu"),
            service=True,
            size_budget_mb={"cpu": 300},
        ),
        ImageSpec(
            name="pushgateway",
            summary="the Prometheus Pushgateway (Debian package); HEALTHCHECK",
            dockerfile="containers/monitoring/pushgateway/Dockerfile",
            upstream_base=DEBIAN_BASE,
            variants=("cuda", "cpu"),
            service=True,
            size_budget_mb={"cpu": 200},
        ),
        ImageSpec(
            name="node-exporter",
            summary="Prometheus node_exporter (Debian package) with the textfile collector; HEALTHCHECK",
            dockerfile="containers/monitoring/node-exporter/Dockerfile",
            upstream_base=DEBIAN_BASE,
            variants=("cuda", "cpu"),
            service=True,
            size_budget_mb={"cpu": 300},
        ),
        ImageSpec(
            name="node",
            summary="a node of the local test cluster: sshd on loopback, Python and the Docker SDK",
            dockerfile="containers/node/Dockerfile",
            upstream_base=DEBIAN_BASE,
            variants=("cpu",),
            service=True,
            root_reason="it stands in for a machine: sshd runs as root, as on a machine",
            size_budget_mb={"cpu": 400},
        ),
        ImageSpec(
            name="grafana",
            summary="Grafana with the suite's provisioning and dashboards baked in (upstream base only)",
            dockerfile="containers/monitoring/grafana/Dockerfile",
            upstream_base=GRAFANA_BASE,
            variants=("cuda",),
            service=True,
        ),
    )
}

CPU_DEFAULT_IMAGES = ("trainer", "edge-vulkan")


def image_names_text() -> str:
    """The image names, comma-separated, for messages."""
    return ", ".join(IMAGES)


def get_spec(name: str) -> ImageSpec:
    """The spec named `name`; UserError listing the accepted names."""
    try:
        return IMAGES[name]
    except KeyError:
        raise UserError(f"unknown image {name!r}; accepted: {image_names_text()}") from None


def check_variant(variant: str) -> str:
    """`variant` when it is one of VARIANTS; UserError otherwise."""
    if variant not in VARIANTS:
        raise UserError(f"unknown variant {variant!r}; accepted: {', '.join(VARIANTS)}")
    return variant


def check_arch(arch: str) -> str:
    """`arch` when it is one of ARCHES; UserError otherwise."""
    if arch not in ARCHES:
        raise UserError(f"unknown architecture {arch!r}; accepted: {', '.join(ARCHES)}")
    return arch


def arch_of_machine(machine: str) -> str:
    """The Docker architecture of a kernel's machine name (uname -m, `ansible_architecture`); UserError
    naming the accepted ones otherwise."""
    for arch, name in ARCHES.items():
        if machine in (arch, name):
            return arch
    raise UserError(f"no image is built for the architecture {machine!r}; accepted: {', '.join(ARCHES.values())}")


def resolve_build_order(names: list[str], variant: str, arch: str = DEFAULT_ARCH) -> list[ImageSpec]:
    """The images to build, each after the image it is built FROM (added when not asked for)."""
    check_variant(variant)
    check_arch(arch)
    if not names:
        names = list(CPU_DEFAULT_IMAGES) if variant == "cpu" else [n for n, s in IMAGES.items() if "cuda" in s.variants]
        if arch != DEFAULT_ARCH:
            names = [n for n in names if arch in IMAGES[n].arches]
    ordered: list[ImageSpec] = []
    for name in names:
        spec = get_spec(name)
        if arch not in spec.arches:
            raise UserError(
                f"image {name!r} is not built for {arch}; images built for {arch}: "
                + ", ".join(n for n, s in IMAGES.items() if arch in s.arches)
            )
        if variant not in spec.variants:
            raise UserError(
                f"image {name!r} has no {variant!r} variant; accepted for {name}: {', '.join(spec.variants)}"
                + (
                    " (Grafana is not a Debian package and its upstream image cannot be pulled without a registry)"
                    if name == "grafana"
                    else ""
                )
            )
        chain = [spec]
        while chain[-1].parent:
            chain.append(IMAGES[chain[-1].parent])
        for item in reversed(chain):
            if item not in ordered:
                ordered.append(item)
    return ordered


def local_base(namespace: str, arch: str = DEFAULT_ARCH) -> str:
    """The local offline base's reference in `namespace` for `arch` (its tag ends in -arm64 for arm64)."""
    suffix = "" if arch == DEFAULT_ARCH else f"-{arch}"
    return f"{namespace}/{LOCAL_BASE_NAME}:{LOCAL_BASE_TAG}{suffix}"


def base_image_for(spec: ImageSpec, variant: str, namespace: str, arch: str = DEFAULT_ARCH) -> str:
    """The BASE_IMAGE of an image not built FROM another: the local base where the spec builds this
    variant on it (cpu; trainer's cuda too), else its upstream base."""
    return local_base(namespace, arch) if variant in spec.local_base_variants else spec.upstream_base


def wheels_for(
    spec: ImageSpec, variant: str, base_image: str | None, base_python: str | None = None, arch: str = DEFAULT_ARCH
) -> Wheels:
    """The wheelhouse of `spec` for `variant` and `arch` on `base_image` (None: the default base): the
    Python is `base_python`, else the known Python of an upstream base, else the spec's."""
    wheels = spec.wheels[variant]
    python = base_python or (BASE_PYTHON.get(base_image, LOCAL_BASE_PYTHON) if base_image else None)
    return Wheels(python or wheels.python, wheels.torch_flavor, arch)


def check_python(version: str) -> str:
    """`version` when it is a Python version such as 3.11; UserError otherwise."""
    if not re.fullmatch(r"3\.\d{1,2}", version):
        raise UserError(f"--base-python {version!r} is not accepted; use the base's Python as X.Y, e.g. 3.12")
    return version
