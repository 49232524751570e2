"""Host-side wheelhouse: every Python dependency of an image, downloaded by pip on the host.

The images install from it with `--no-index --find-links`, so the torch build is the one the host
chose (TORCH_SPEC; the CPU build for the `cpu` variant) and a multi-GB CUDA build can never sneak in
through a loose requirement. Layout, inside the build context (gitignored, sent by .dockerignore):

  build/wheelhouse/<key>/            key = py<XY>-<cpu|cuda>[-arm64], e.g. py311-cpu, py311-cpu-arm64
      *.whl
      requirements.txt               pins of the common set: project deps + extras of the images
                                     built on a base (identical for trainer and edge-vulkan, so the
                                     dependency layer is shared)
      <image>/                       wheels and requirements.txt of an image built FROM another
                                     (profiler: ncu-report), so its layer holds only those
      wheelhouse.json                inputs and file list; a matching one skips the download
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.images import emulation
from fleetbench.images.specs import DEFAULT_ARCH, IMAGES, ImageSpec, Wheels
from fleetbench.job import Progress, SilentProgress

DEFAULT_TORCH_SPEC = "torch==2.13.0"
# torch's CUDA build (PyPI's default Linux wheel) with its nvidia-* wheels (CUDA 13, cuDNN 9, NCCL 2).
DEFAULT_TORCH_CUDA_SPEC = "torch==2.14.1"
TORCH_SPEC_ENV = {"cpu": "TORCH_SPEC", "cuda": "TORCH_CUDA_SPEC"}
# arm64 (cpu): PyPI's aarch64 torch wheels from 2.13 on are CUDA builds (cuda-toolkit, nvidia-* wheels for
# Jetson-class sbsa); 2.9.1's is the CPU build (104 MB, no nvidia-* requirement on aarch64).
DEFAULT_TORCH_ARM64_SPEC = "torch==2.9.1"
TORCH_ARM64_SPEC_ENV = "TORCH_ARM64_SPEC"
WHEELHOUSE_DIR = "build/wheelhouse"
# Oldest glibc of the bases: Debian 12 has 2.36, Ubuntu 24.04 2.39; pip also accepts older manylinux tags.
GLIBC = {"3.11": 36, "3.12": 39}
SAVED = re.compile(r"^\s*(?:Saved|File was already downloaded)\s+(?P<path>\S+\.whl)\s*$")
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")

# Source-only requirements an emulated build leaves out, and why: llama-cpp-python compiles llama.cpp,
# which under qemu-user on this 2-core machine is measured in containers/README.md (arm64 images).
LEFT_OUT_UNDER_EMULATION = {
    "llama-cpp-python": "llama.cpp would be compiled under qemu (hours on 2 cores); build on an arm64 host"
}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Wheelhouse:
    """A wheelhouse on disk: path, WHEELHOUSE build arg, whether it was just downloaded, file count, bytes."""

    path: Path  # absolute
    context_path: str  # relative to the build context, for the WHEELHOUSE build arg
    downloaded: bool
    files: int
    size_bytes: int


def torch_spec(flavor: str = "cpu", arch: str = DEFAULT_ARCH) -> str:
    """The torch requirement of a `flavor` wheelhouse: $TORCH_SPEC (cpu) or $TORCH_CUDA_SPEC (cuda), and
    $TORCH_ARM64_SPEC for arm64's cpu one, else the default; UserError when it is not a torch requirement."""
    env = TORCH_SPEC_ENV.get(flavor, "TORCH_SPEC")
    default = DEFAULT_TORCH_CUDA_SPEC if flavor == "cuda" else DEFAULT_TORCH_SPEC
    if arch != DEFAULT_ARCH and flavor == "cpu":
        env, default = TORCH_ARM64_SPEC_ENV, DEFAULT_TORCH_ARM64_SPEC
    spec = os.environ.get(env, default).strip()
    if not re.fullmatch(r"torch\s*(==|~=|>=|<=|>|<)?\s*[A-Za-z0-9.+!*]*", spec):
        raise UserError(f"{env}={spec!r} is not accepted; use a torch requirement such as {default}")
    return spec


def _pyproject(context: Path) -> dict[str, object]:
    path = context / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"build context {context} has no pyproject.toml; pass the repository root") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path} is not valid TOML: {exc}") from None
    return data


def _image_requirements(context: Path, spec: ImageSpec, optional: dict[str, list[str]]) -> list[str]:
    reqs: list[str] = []
    for extra in spec.extras:
        reqs += optional.get(extra, [])
    extra_file = context / Path(spec.dockerfile).parent / "requirements.txt"
    if extra_file.is_file():
        for line in extra_file.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                reqs.append(line)
    return reqs


def requirement_sets(context: Path, wheels: Wheels, torch: str) -> tuple[list[str], dict[str, list[str]]]:
    """(common requirements, additions per image built FROM another) for one wheelhouse key."""
    data = _pyproject(context)
    project = data.get("project", {})
    build_system = data.get("build-system", {})
    assert isinstance(project, dict) and isinstance(build_system, dict)
    optional: dict[str, list[str]] = dict(project.get("optional-dependencies", {}))
    common = [torch, *project.get("dependencies", []), *build_system.get("requires", [])]
    additions: dict[str, list[str]] = {}
    for spec in IMAGES.values():
        # By torch build, not Python: a --base with another Python gets the same packages.
        if wheels.torch_flavor not in {w.torch_flavor for w in spec.wheels.values()} or wheels.arch not in spec.arches:
            continue
        reqs = _image_requirements(context, spec, optional)
        if spec.parent:
            additions[spec.name] = reqs
        else:
            common += reqs
        own = [req for extra in spec.own_extras for req in optional.get(extra, [])]
        if own:
            additions[spec.name] = [*additions.get(spec.name, []), *own]
    if emulation.host_arch() != wheels.arch:
        common = [r for r in common if _normal(_req_name(r)) not in LEFT_OUT_UNDER_EMULATION]
        additions = {
            name: [r for r in reqs if _normal(_req_name(r)) not in LEFT_OUT_UNDER_EMULATION]
            for name, reqs in additions.items()
        }
    return list(dict.fromkeys(common)), additions


def left_out(wheels: Wheels) -> dict[str, str]:
    """The requirements the `wheels` wheelhouse leaves out on this host, with why (emulated builds)."""
    return dict(LEFT_OUT_UNDER_EMULATION) if emulation.host_arch() != wheels.arch else {}


def all_requirements(context: Path, wheels: Wheels) -> list[str]:
    """Every requirement of the `wheels` wheelhouse, the images' own additions included."""
    common, additions = requirement_sets(context, wheels, torch_spec(wheels.torch_flavor, wheels.arch))
    return [*common, *(req for reqs in additions.values() for req in reqs)]


def _pip_target_args(wheels: Wheels) -> list[str]:
    arch = wheels.machine
    abi = f"cp{wheels.python.replace('.', '')}"
    return [
        "--only-binary=:all:",
        "--python-version",
        wheels.python,
        "--implementation",
        "cp",
        "--abi",
        abi,
        "--abi",
        "abi3",
        "--abi",
        "none",
        *platform_args(GLIBC.get(wheels.python, 28), arch),
    ]


def _native_args(folders: list[Path], machine: str) -> list[str]:
    """pip arguments that admit the wheels built on the base (platform tag linux_<arch>) from `folders`."""
    if not folders:
        return []
    return ["--platform", f"linux_{machine}", *(f"--find-links={folder}" for folder in folders)]


def platform_args(glibc_minor: int, arch: str) -> list[str]:
    """pip takes only the platforms it is given: list every manylinux tag the base's glibc runs."""
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc_minor, 16, -1)]
    tags += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return [arg for tag in tags for arg in ("--platform", tag)]


def pins(files: list[str]) -> list[str]:
    """`name==version` of each wheel file name, sorted by file name."""
    out = []
    for name in sorted(files):
        match = WHEEL_NAME.match(name)
        if match:
            out.append(f"{match['name']}=={match['version']}")
    return out


def ensure_wheelhouse(
    context: Path, wheels: Wheels, progress: Progress | None = None, native: list[Path] | None = None
) -> Wheelhouse:
    """The wheelhouse of `wheels`, downloaded with pip unless its stamp matches the current inputs.
    `native`: folders of wheels built from source for these images (native_wheel), which pip takes too."""
    torch = torch_spec(wheels.torch_flavor, wheels.arch)
    common, additions = requirement_sets(context, wheels, torch)
    target = [*_pip_target_args(wheels), *_native_args(native or [], wheels.machine)]
    inputs = {"layout": 2, "common": common, "additions": additions, "target": target}
    digest = hashlib.sha256(jsonio.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    rel = f"{WHEELHOUSE_DIR}/{wheels.key}"
    path = (context / rel).resolve()
    kept = _unchanged(path, rel, digest)
    if kept is not None:
        log.debug("wheelhouse %s: reusing %d wheels (inputs unchanged)", rel, kept.files)
        return kept

    started = time.monotonic()
    log.info("wheelhouse %s: pip download for Python %s (%s)", rel, wheels.python, torch)
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    if path.is_dir():  # keep what is already here: pip then only checks it instead of fetching again
        for old in path.glob("**/*.whl"):
            if not (partial / old.name).exists():
                os.link(old, partial / old.name)
    foreign = wheels if emulation.host_arch() != wheels.arch else None
    downloads = _Downloads(partial, target, rel, progress or SilentProgress(), foreign)
    common_files = downloads.fetch(common, "common")
    per_image = {name: downloads.image_additions(name, reqs, common_files) for name, reqs in additions.items()}
    if wheels.torch_flavor == "cpu":
        _refuse_cuda_torch(set(common_files) | {f for _, own in per_image.values() for f in own})
    layout = _lay_out(partial, common_files, per_image)
    (partial / "wheelhouse.json").write_text(
        jsonio.dumps({"digest": digest, "inputs": inputs, "files": layout}, indent=1) + "\n"
    )
    shutil.rmtree(path, ignore_errors=True)
    partial.rename(path)
    size = _size(path, layout)
    log.info("wheelhouse %s: %d wheels, %.0f MB in %.0f s", rel, len(layout), size / 1e6, time.monotonic() - started)
    return Wheelhouse(path, rel, True, len(layout), size)


def _unchanged(path: Path, rel: str, digest: str) -> Wheelhouse | None:
    """The wheelhouse at `path` when its stamp records `digest` and every file it lists is there."""
    try:
        recorded = json.loads((path / "wheelhouse.json").read_text())
        if recorded.get("digest") == digest and all((path / f).is_file() for f in recorded["files"]):
            return Wheelhouse(path, rel, False, len(recorded["files"]), _size(path, recorded["files"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


@dataclass(frozen=True)
class _Downloads:
    """pip downloads into the wheelhouse being made (`partial`) for one target platform."""

    partial: Path
    target: list[str]  # pip's platform, Python and ABI arguments
    rel: str  # the wheelhouse's path in the context, for labels
    progress: Progress
    foreign: Wheels | None = None  # another architecture's wheelhouse: resolved by uv for its platform

    def fetch(self, reqs: list[str], label: str, constraints: list[str] | None = None) -> list[str]:
        """Download `reqs` (pinned by `constraints` when given); the wheel file names pip saved."""
        extra: list[str] = []
        constraints_file = self.partial / f"constraints-{label}.txt"
        if constraints is not None:
            constraints_file.write_text("\n".join(constraints) + "\n")
            extra = ["--constraint", str(constraints_file)]
        try:
            if self.foreign is not None:
                # pip evaluates markers (platform_machine == "x86_64": torch's nvidia-* wheels) on this host
                # whatever --platform says; uv resolves for the target, pip then fetches exactly those.
                reqs = _resolve_foreign(reqs, extra, self.foreign)
                extra = ["--no-deps"]
            return _download(self.partial, reqs, [*self.target, *extra], f"{self.rel} {label}", self.progress)
        finally:
            if constraints is not None:
                constraints_file.unlink()

    def image_additions(self, name: str, reqs: list[str], common_files: list[str]) -> tuple[list[str], list[str]]:
        """(requirement lines, its own wheels) of an image built FROM another, pinned to the common set."""
        if not reqs:
            return [], []
        extra = self.fetch(reqs, name, constraints=pins(common_files))
        own = sorted(set(extra) - set(common_files))
        if own:
            # Every wheel of its own, pinned: a request's extras (mlx[cpu] -> mlx-cpu) and dependencies too.
            return pins(own), own
        resolved = {_normal(p.split("==")[0]): p for p in pins(extra)}
        return [resolved.get(_normal(_req_name(r)), r) for r in reqs], own


# Another architecture's wheelhouse is resolved as PyPI stood at this time, so that a fresh clone gets
# the same pins, the same wheels and so the image layers cached under emulation (about 40 minutes cold
# for the arm64 edge image): a newer release of any dependency would otherwise rebuild them. It is left
# out of the wheelhouse's stamp (that stamp is in the image's dependency layer too): after moving it
# forward, remove build/wheelhouse/py311-cpu-arm64 to resolve again.
FOREIGN_EXCLUDE_NEWER = "2026-12-08T00:00:00Z"


def _resolve_foreign(reqs: list[str], constraint_args: list[str], wheels: Wheels) -> list[str]:
    """`reqs` resolved to pins for `wheels`' architecture and Python by `uv pip compile`, which
    evaluates environment markers for the target platform (pip cannot)."""
    uv = Path(sys.executable).with_name("uv")
    command = str(uv) if uv.is_file() else shutil.which("uv")
    if command is None:
        raise UserError(f"the {wheels.key} wheelhouse is resolved by uv, which is not installed: run `make setup`")
    platform_tag = f"{wheels.machine}-manylinux_2_{GLIBC.get(wheels.python, 28)}"
    argv = [command, "pip", "compile", "-", "--python-platform", platform_tag, "--python-version", wheels.python,
            "--only-binary", ":all:", "--no-header", "--no-annotate", "--quiet", "--exclude-newer", FOREIGN_EXCLUDE_NEWER,
            *constraint_args]  # fmt: skip
    done = subprocess.run(argv, input="\n".join(reqs) + "\n", capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = next((line for line in done.stderr.splitlines() if line.strip()), f"exit status {done.returncode}")
        raise UserError(f"resolving the {wheels.key} wheelhouse for {platform_tag} failed: {why.strip()[:300]}")
    return [line.strip() for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]


def _refuse_cuda_torch(files: set[str]) -> None:
    """A cpu wheelhouse must hold no nvidia-* wheels: they come with a CUDA build of torch."""
    cuda = sorted(f for f in files if f.startswith("nvidia_"))
    if cuda:
        raise UserError(
            f"the cpu wheelhouse got a CUDA build of torch ({len(cuda)} nvidia-* wheels, e.g. {cuda[0]}): "
            "set TORCH_SPEC to a CPU build and its index, e.g. "
            "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu TORCH_SPEC=torch==2.13.0+cpu"
        )


def _lay_out(partial: Path, common_files: list[str], per_image: dict[str, tuple[list[str], list[str]]]) -> list[str]:
    """Move each image's own wheels into its folder, drop stale wheels, write the pins; the file list."""
    files = set(common_files)
    # An image built FROM another gets a folder of its own wheels, so its layer holds only those.
    layout: list[str] = sorted(files)
    for name, (lines, own) in per_image.items():
        folder = partial / name
        folder.mkdir()
        for wheel in own:
            (partial / wheel).rename(folder / wheel)
        (folder / "requirements.txt").write_text("".join(f"{line}\n" for line in lines))
        layout += [f"{name}/{wheel}" for wheel in own]
    for stale in partial.glob("*.whl"):
        if stale.name not in files:
            stale.unlink()
    (partial / "requirements.txt").write_text("\n".join(pins(common_files)) + "\n")
    return layout


def _download(dest: Path, reqs: list[str], target: list[str], label: str, progress: Progress) -> list[str]:
    argv = [sys.executable, "-m", "pip", "download", "--dest", str(dest), "--progress-bar", "off", *target, *reqs]
    saved: list[str] = []
    tail: list[str] = []
    with progress.task("wheelhouse", label) as task:
        env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip()
            tail = [*tail[-39:], line]
            match = SAVED.match(line)
            if match:
                saved.append(Path(match["path"]).name)
                task.update(f"{label}: {len(saved)} wheels ({saved[-1][:60]})")
        code = process.wait()
    if code != 0:
        errors = [line for line in tail if line.startswith("ERROR:")]
        log.error("pip download's last lines:%s", "".join(f"\n  {line}" for line in tail[-15:]))
        why = errors[-1] if errors else f"pip exited with status {code}"
        raise UserError(f"pip download for the wheelhouse ({label}) failed: {why}")
    return saved


def _req_name(requirement: str) -> str:
    match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return match.group(1) if match else requirement


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _size(path: Path, files: list[str]) -> int:
    return sum((path / f).stat().st_size for f in files if (path / f).is_file())


# The wheels reach a build over loopback HTTP instead of through the build context: a multi-GB CUDA
# wheelhouse would otherwise be sent with every build (a code change too) and stored in a layer. The
# host name is mapped by the build's extra_hosts, and the port is fixed, because both stand in the
# deps step's RUN line and so in its cache key; the address varies (random 127.x.y.z).
WHEELHOUSE_HOST = "fleetbench-wheelhouse"
WHEELHOUSE_PORT = 38517


@contextmanager
def serve_wheelhouse(path: Path) -> Iterator[str]:
    """Serve `path` read-only over HTTP at WHEELHOUSE_PORT on a free loopback address; yields that address."""
    handler = functools.partial(_QuietHandler, directory=str(path))
    server: ThreadingHTTPServer | None = None
    # Random addresses keep builds side by side apart; 127.0.0.1 last, for hosts that route only it.
    addresses = ["127.{}.{}.{}".format(*(secrets.randbelow(254) + 1 for _ in range(3))) for _ in range(7)]
    for address in [*addresses, "127.0.0.1"]:
        try:
            server = ThreadingHTTPServer((address, WHEELHOUSE_PORT), handler)
            break
        except OSError:
            continue
    if server is None:
        raise UserError(f"no loopback address could serve the wheelhouse on port {WHEELHOUSE_PORT}")
    thread = threading.Thread(target=server.serve_forever, name="wheelhouse-http", daemon=True)
    thread.start()
    log.debug("wheelhouse %s served at http://%s:%d/", path, address, WHEELHOUSE_PORT)
    try:
        yield address
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of the wheelhouse's files; requests go to the debug log, not to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("wheelhouse http: " + format, *args)
