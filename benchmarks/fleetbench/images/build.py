"""`fleetbench images build`: build the suite's images through the Docker SDK, with a progress display.

Each Dockerfile takes its base as BASE_IMAGE: the local offline base (made first when missing) for
the `cpu` variant and for the `cuda` trainer and profiler (torch's CUDA wheels carry CUDA), else the
Dockerfile's pinned upstream default, or `--base`. Python images get the host-side wheelhouse as
WHEELHOUSE: its pins through the context, its wheels over loopback HTTP while the build runs.
Builds use host networking (no bridge on these engines).
`--arch arm64` builds the edge runner for linux/arm64 on its own base, emulated where the host is
not arm64 (images/emulation). Tags: `<ns>/<name>:<version>-<git sha>[-dirty][-cpu][-arm64]` and
`<ns>/<name>:latest[-cpu][-arm64]`; OCI labels
come in as build args. A failed step ends in one line (UserError) after the step's output tail.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from fleetbench.errors import UserError
from fleetbench.images import emulation
from fleetbench.images.base import ensure_base
from fleetbench.images.engine import connect
from fleetbench.images.native_wheel import ensure_native_wheels
from fleetbench.images.specs import (
    DEFAULT_ARCH,
    DEFAULT_NAMESPACE,
    IMAGES,
    ImageSpec,
    Wheels,
    base_image_for,
    check_python,
    resolve_build_order,
    wheels_for,
)
from fleetbench.images.wheelhouse import (
    WHEELHOUSE_DIR,
    WHEELHOUSE_HOST,
    all_requirements,
    ensure_wheelhouse,
    left_out,
    serve_wheelhouse,
)
from fleetbench.job import Progress, SilentProgress, Task

if TYPE_CHECKING:
    import docker

STEP = re.compile(r"^Step (?P<n>\d+)/(?P<m>\d+) : (?P<instruction>.*)$")
DEFAULT_SOURCE = "https://github.com/fleetbench/fleetbench"
TAIL_LINES = 25
# Nsight Compute in the CUDA apt repository of NVIDIA's CUDA 12.8 base.
NSIGHT_COMPUTE_PACKAGE = "cuda-nsight-compute-12-8"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceInfo:
    """What the images are built from: project version, git revision, the tag part and the source URL."""

    version: str
    revision: str  # full commit, or "unknown" outside git
    short: str  # tag part: 12-char sha, "-dirty" when modified; "nogit" outside git
    source: str

    @property
    def tag_version(self) -> str:
        """The version tag: `<version>-<short sha>[-dirty]`."""
        return f"{self.version}-{self.short}"


@dataclass
class BuildResult:
    """One image built: tags, id, size in bytes, build seconds, steps from cache, size budget (MB) and log."""

    name: str
    variant: str
    tags: list[str]
    image_id: str
    size_bytes: int
    seconds: float
    steps: int
    cached_steps: int
    budget_mb: int | None
    log_path: Path


@dataclass
class _StreamState:
    step: int = 0
    steps: int = 0
    instruction: str = ""
    step_lines: list[str] = field(default_factory=list)
    cached: int = 0
    image_id: str = ""


def default_context() -> Path:
    """The checkout this package runs from (editable install), else the current directory."""
    source_root = Path(__file__).resolve().parents[3]
    if (source_root / "pyproject.toml").is_file() and (source_root / "containers").is_dir():
        return source_root
    return Path.cwd()


def source_info(context: Path) -> SourceInfo:
    """Version and source URL from pyproject.toml, revision from git (`nogit` outside a checkout)."""
    try:
        project = tomllib.loads((context / "pyproject.toml").read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    version = str(project.get("version", "0.0.0"))
    source = str(project.get("urls", {}).get("Source", DEFAULT_SOURCE))

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(context), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        revision = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return SourceInfo(version, "unknown", "nogit", source)
    return SourceInfo(version, revision, revision[:12] + ("-dirty" if dirty else ""), source)


def check_context(context: Path, specs: list[ImageSpec]) -> Path:
    """The context as an absolute path; UserError when it is no folder or lacks a Dockerfile of `specs`."""
    if not context.is_dir():
        raise UserError(f"build context {context} is not a directory; pass the repository root (--context)")
    for spec in specs:
        if not (context / spec.dockerfile).is_file():
            raise UserError(f"build context {context} has no {spec.dockerfile}; pass the repository root (--context)")
    return context.resolve()


def declared_args(dockerfile: Path) -> set[str]:
    """The ARG names a Dockerfile declares (only those are passed: Docker warns about the others)."""
    return set(re.findall(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", dockerfile.read_text(), flags=re.MULTILINE))


def read_dockerignore(context: Path) -> list[str]:
    """The patterns of the context's .dockerignore (none when it has none)."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def context_archive(
    context: Path, dockerfile: str, wheelhouse_key: str | None, extra_files: dict[str, str] | None = None
) -> Any:  # a seekable binary file (docker.utils.build.create_archive)
    """The build context as a tar: .dockerignore, plus only this image's wheelhouse (or none).

    `extra_files` replace files of the context by path (used to measure a rebuild after a code change
    without touching the working tree).
    """
    from docker.utils.build import create_archive, exclude_paths

    patterns = read_dockerignore(context)
    patterns.append(f"{WHEELHOUSE_DIR}/*")
    if wheelhouse_key:
        patterns.append(f"!{WHEELHOUSE_DIR}/{wheelhouse_key}")
        patterns.append(f"{WHEELHOUSE_DIR}/{wheelhouse_key}.partial")
        # The wheels themselves come over loopback HTTP (serve_wheelhouse); the folder of an image built
        # FROM another stays (its Dockerfile copies it), that of an image's own stage is served too.
        patterns.append(f"{WHEELHOUSE_DIR}/{wheelhouse_key}/*.whl")
        patterns += [f"{WHEELHOUSE_DIR}/{wheelhouse_key}/{s.name}/*.whl" for s in IMAGES.values() if s.own_extras]
    files = sorted(exclude_paths(str(context), patterns, dockerfile=dockerfile))
    extras = sorted((extra_files or {}).items())
    return create_archive(root=str(context), files=files, extra_files=extras)


def _ensure_upstream_base(client: docker.DockerClient, ref: str, arch: str = DEFAULT_ARCH) -> None:
    from docker.errors import APIError, ImageNotFound

    try:
        client.images.get(ref)
        return
    except ImageNotFound:
        pass
    log.info("pulling base image %s ...", ref)
    try:
        repository, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
        platform = None if arch == DEFAULT_ARCH else f"linux/{arch}"
        for _ in client.api.pull(repository, tag=tag, stream=True, decode=True, platform=platform):
            pass
        client.images.get(ref)
    except (APIError, ImageNotFound) as exc:
        reason = getattr(exc, "explanation", None) or str(exc)
        raise UserError(
            f"base image {ref} is not on this engine and cannot be pulled ({' '.join(str(reason).split())[:200]}); "
            "without a registry build the cpu variant (--variant cpu, `make images-cpu`), "
            "or `fleetbench images load` an archive that has it"
        ) from None


def build_images(  # noqa: PLR0913 - the `images build` flags, plus the engine, source, replaced files and progress that tests and scripts pass by name
    names: list[str],
    variant: str,
    *,
    progress: Progress | None = None,
    context: Path | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    base_image: str | None = None,
    base_python: str | None = None,
    nsight_compute: str | None = None,
    no_cache: bool = False,
    extra_files: dict[str, str] | None = None,
    client: docker.DockerClient | None = None,
    source: SourceInfo | None = None,
    arch: str = DEFAULT_ARCH,
) -> list[BuildResult]:
    """Build `names` (and the images they are built FROM) of `variant`; `source` overrides what the
    context's git says (version, revision, tag), e.g. for a snapshot of a checkout.

    `base_python` is the Python of `base_image` where the suite does not know it; `nsight_compute`
    the apt package of Nsight Compute for the cuda profiler (default: one on NVIDIA's CUDA base,
    none on the offline base, which has no CUDA apt repository: mount the host's with --ncu-dir).
    """
    progress = progress or SilentProgress()
    specs = resolve_build_order(names, variant, arch)
    if base_python:
        check_python(base_python)
    emulation.require(arch)  # another architecture's RUN steps need qemu; none for the host's own
    root = check_context((context or default_context()), specs)
    client = client or connect()
    info = source or source_info(root)
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    results: list[BuildResult] = []
    built: dict[str, str] = {}
    for spec in specs:
        if spec.parent:
            base = built.get(spec.parent) or f"{namespace}/{spec.parent}:latest{spec.tag_suffix(variant, arch)}"
        elif base_image:
            base = base_image
            _ensure_upstream_base(client, base, arch)
        elif variant in spec.local_base_variants:
            base, _ = ensure_base(client, namespace, root / "build", progress=progress, arch=arch)
        else:
            base = base_image_for(spec, variant, namespace, arch)
            _ensure_upstream_base(client, base, arch)
        wheel_key = None
        house_path: Path | None = None
        buildargs = {
            "BASE_IMAGE": base,
            "PARENT_IMAGE": base,
            "SOURCE": info.source,
            "REVISION": info.revision,
            "VERSION": info.version,
            "CREATED": created,
        }
        if spec.wheels:
            wheels = wheels_for(spec, variant, base_image, base_python, arch)
            _warn_left_out(spec, wheels)
            native = ensure_native_wheels(client, base, wheels.python, all_requirements(root, wheels), progress)
            house = ensure_wheelhouse(root, wheels, progress, native)
            wheel_key = wheels.key
            house_path = house.path
            buildargs["WHEELHOUSE"] = house.context_path
            buildargs["TORCH_FLAVOR"] = wheels.torch_flavor
        if spec.name == "profiler":
            buildargs["NSIGHT_COMPUTE"] = profiler_nsight_package(variant, base_image, nsight_compute)
        declared = declared_args(root / spec.dockerfile)
        repository = spec.repository(namespace)
        suffix = spec.tag_suffix(variant, arch)
        job = _BuildJob(
            spec=spec,
            variant=variant,
            root=root,
            tags=(f"{repository}:{info.tag_version}{suffix}", f"{repository}:latest{suffix}"),
            buildargs={key: value for key, value in buildargs.items() if key in declared},
            wheel_key=wheel_key,
            no_cache=no_cache,
            extra_files=extra_files,
            arch=arch,
        )
        if house_path is None:
            result = _build_one(client, job, progress)
        else:
            with serve_wheelhouse(house_path) as address:
                result = _build_one(client, job, progress, {WHEELHOUSE_HOST: address})
        built[spec.name] = result.tags[0]
        results.append(result)
    return results


def _warn_left_out(spec: ImageSpec, wheels: Wheels) -> None:
    """Say which requirements an emulated build leaves out of `spec`, and why."""
    for requirement, why in left_out(wheels).items():
        log.warning("%s (%s): built without %s: %s", spec.name, wheels.arch, requirement, why)


@dataclass(frozen=True)
class _BuildJob:
    """One image to build: what it is, its two tags (version, latest), its build args and context."""

    spec: ImageSpec
    variant: str
    root: Path  # the build context
    tags: tuple[str, str]
    buildargs: dict[str, str]
    wheel_key: str | None  # the wheelhouse folder the context carries, if any
    no_cache: bool
    extra_files: dict[str, str] | None
    arch: str = DEFAULT_ARCH

    @property
    def label(self) -> str:
        return f"{self.spec.name} ({self.variant}{'' if self.arch == DEFAULT_ARCH else ', ' + self.arch})"


def profiler_nsight_package(variant: str, base_image: str | None, asked: str | None) -> str:
    """The Nsight Compute apt package the profiler installs ('' for none): `asked` when given, the
    CUDA apt repository's package on NVIDIA's base, none on the offline base or for cpu."""
    if asked is not None:
        return asked
    if variant == "cuda" and base_image and base_image.startswith("nvidia/cuda:"):
        return NSIGHT_COMPUTE_PACKAGE
    return ""


def _build_one(
    client: docker.DockerClient, job: _BuildJob, progress: Progress, extra_hosts: dict[str, str] | None = None
) -> BuildResult:
    from docker.errors import APIError

    tag = job.tags[0]
    log_dir = job.root / "build" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{job.spec.name}-{job.variant}{job.spec.tag_suffix('cuda', job.arch)}.log"
    started = time.monotonic()
    log.info("build %s from %s", tag, job.buildargs.get("BASE_IMAGE", "?"))
    with (
        log_path.open("w") as log_file,
        progress.task("build", f"{job.label}: sending context", total=0) as task,
    ):
        reader = _BuildStream(job, log_path, log_file, task)
        archive = context_archive(job.root, job.spec.dockerfile, job.wheel_key, job.extra_files)
        try:
            stream = client.api.build(
                fileobj=archive,
                custom_context=True,
                dockerfile=job.spec.dockerfile,
                target=job.spec.target,
                tag=tag,
                buildargs=job.buildargs,
                network_mode="host",
                rm=True,
                forcerm=True,
                nocache=job.no_cache,
                pull=False,
                decode=True,
                extra_hosts=extra_hosts,
                # Only where asked: an engine checks the base's platform against it.
                platform=None if job.arch == DEFAULT_ARCH else f"linux/{job.arch}",
            )
            for chunk in stream:
                reader.consume(chunk)
        except APIError as exc:
            reason = " ".join(str(exc.explanation or exc).split())
            raise UserError(f"building {tag} failed: {reason} (log: {log_path})") from None
        finally:
            archive.close()
    state = reader.state
    if not state.image_id:
        raise UserError(f"building {tag} ended without an image (log: {log_path})")
    latest_repository, latest_tag = job.tags[1].rsplit(":", 1)
    client.api.tag(state.image_id, latest_repository, latest_tag)
    image = client.images.get(tag)
    seconds = time.monotonic() - started
    size = int(image.attrs.get("Size", 0))
    log.info(
        "built %s: %.0f MB in %.1f s (%d/%d steps from cache)", tag, size / 1e6, seconds, state.cached, state.steps
    )
    return BuildResult(
        job.spec.name,
        job.variant,
        list(job.tags),
        str(image.id),
        size,
        seconds,
        state.steps,
        state.cached,
        job.spec.size_budget_mb.get(job.variant),
        log_path,
    )


class _BuildStream:
    """The engine's build stream, chunk by chunk: into the log file, the progress bar and the log.

    Step lines are logged at info, their output at debug (the log file keeps all of it); a failed
    step's last TAIL_LINES lines are logged as an error before the one-line UserError.
    """

    def __init__(self, job: _BuildJob, log_path: Path, log_file: TextIO, task: Task) -> None:
        self.job = job
        self.log_path = log_path
        self.log_file = log_file
        self.task = task
        self.state = _StreamState()

    def consume(self, chunk: dict[str, Any]) -> None:
        if "error" in chunk:
            self._fail(chunk)
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("ID"):
            self.state.image_id = str(aux["ID"])
        text = chunk.get("stream")
        if not isinstance(text, str):
            return
        self.log_file.write(text)
        for raw in text.splitlines():
            line = raw.rstrip()
            if line:
                self._line(line)

    def _line(self, line: str) -> None:
        state = self.state
        match = STEP.match(line)
        if match:
            state.step, state.steps = int(match["n"]), int(match["m"])
            state.instruction = match["instruction"]
            state.step_lines = []
            self.task.update(
                f"{self.job.label}: {_short(state.instruction, 60)}", completed=state.step - 1, total=state.steps
            )
            log.info("%s %s", self.job.spec.name, line)
            return
        if line.strip() == "---> Using cache":
            state.cached += 1
        state.step_lines.append(line)
        if line.startswith("Successfully built "):
            self.task.update(f"{self.job.label}: built", completed=state.steps)
            state.image_id = state.image_id or line.split()[-1]
        log.debug("  %s", line)

    def _fail(self, chunk: dict[str, Any]) -> NoReturn:
        state = self.state
        error = " ".join(str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).split())
        self.log_file.write(f"ERROR: {error}\n")
        self.log_file.flush()
        tail = "".join(f"\n  {line}" for line in state.step_lines[-TAIL_LINES:])
        log.error("step %d/%d failed: %s%s", state.step, state.steps, state.instruction, tail)
        where = f"step {state.step}/{state.steps} `{_short(state.instruction)}`" if state.step else "the start"
        raise UserError(f"building {self.job.tags[0]} failed at {where}: {error} (log: {self.log_path})")


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
