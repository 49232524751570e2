"""`fleetbench images run NAME -- ARGS`: a benchmark in its image, results mounted back into results/.

Host networking (a Pushgateway on 127.0.0.1 is reachable as is), the caller's uid:gid (files the
container writes into the results folder belong to whoever ran the command; the image's own user is
the non-root `fleetbench`, uid 10001, for deployments), GPUs through the NVIDIA runtime's device
requests when asked, and the profiler's SYS_ADMIN capability (never --privileged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetbench.errors import UserError
from fleetbench.images.engine import connect
from fleetbench.images.specs import DEFAULT_NAMESPACE, ImageSpec, get_spec
from fleetbench.results.store import DEFAULT_RESULTS_DIR
from fleetbench.telemetry.push import PUSHGATEWAY_ENV

if TYPE_CHECKING:
    import docker

RESULTS_IN_IMAGE = "/workspace/results"
# Where the profiler image looks for a host's Nsight Compute (on its PATH): `--ncu-dir DIR`.
NCU_IN_IMAGE = "/opt/nvidia/nsight-compute"
NCU_DIR_EXAMPLE = "/opt/nvidia/nsight-compute/2025.1.0"
GPUS_RULE = "'all', a count such as 2, or device ids such as 0,1"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPlan:
    """The container `images run` starts: image, command, user, environment, mounts, capabilities, devices."""

    image: str
    command: list[str]
    user: str
    environment: dict[str, str]
    volumes: dict[str, dict[str, str]]
    cap_add: list[str]
    device_requests: list[Any]
    devices: list[str]
    shm_size: str | None


def find_image(
    client: docker.DockerClient, spec: ImageSpec, namespace: str, variant: str | None, tag: str | None, gpus: bool
) -> str:
    """The image to run: `tag` when given, else the latest of `variant` (cuda first when unset).

    Raises UserError, with the command that builds it, when none is on the engine.
    """
    from docker.errors import ImageNotFound

    repository = spec.repository(namespace)
    if tag:
        candidates = [f"{repository}:{tag}"]
    else:
        variants = [variant] if variant else (["cuda"] if gpus else [v for v in ("cuda", "cpu") if v in spec.variants])
        candidates = [f"{repository}:latest{spec.tag_suffix(v)}" for v in variants if v in spec.variants]
        if not candidates:
            raise UserError(f"image {spec.name!r} has no {variant!r} variant; accepted: {', '.join(spec.variants)}")
    for ref in candidates:
        try:
            client.images.get(ref)
            return ref
        except ImageNotFound:
            continue
    hint = f"--variant {variant or 'cpu'}" if (variant or "cpu") == "cpu" else ""
    raise UserError(
        f"image {' or '.join(candidates)} is not on this engine: build it with "
        f"`fleetbench images build {spec.name} {hint}`".rstrip()
        + " or load it with `fleetbench images load`"
    )


def gpu_requests(gpus: str | None, spec: ImageSpec) -> list[Any]:
    """Docker device requests for `--gpus` (all, a count or ids); none without it."""
    if not gpus:
        return []
    from docker.types import DeviceRequest

    capabilities = [list(spec.gpu_capabilities)]
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=capabilities)]
    if gpus.isdigit() and int(gpus) > 0:
        return [DeviceRequest(count=int(gpus), capabilities=capabilities)]
    if re.fullmatch(r"\d+(,\d+)*", gpus):
        return [DeviceRequest(device_ids=gpus.split(","), capabilities=capabilities)]
    raise UserError(f"--gpus {gpus!r} is not accepted; use {GPUS_RULE}")


def parse_env(pairs: list[str]) -> dict[str, str]:
    """NAME=VALUE pairs as a dict; UserError for a malformed pair."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not ENV_NAME.fullmatch(key):
            raise UserError(f"--env {pair!r} is not accepted; use NAME=VALUE with NAME of letters, digits and _")
        env[key] = value
    return env


@dataclass(frozen=True)
class RunOptions:
    """The `images run` options: which image, where results go, and what the container gets."""

    namespace: str = DEFAULT_NAMESPACE
    variant: str | None = None  # None: cuda when present (or with GPUs), else cpu
    tag: str | None = None  # run NAMESPACE/NAME:TAG instead of the latest build
    results_dir: Path = DEFAULT_RESULTS_DIR
    pushgateway: str | None = None  # None: $FLEETBENCH_PUSHGATEWAY
    gpus: str | None = None  # all, a count or device ids
    devices: list[str] | None = None
    env: dict[str, str] | None = None
    user: str | None = None  # None: the caller's uid:gid (root for the profiler with GPUs)
    ncu_dir: Path | None = None  # the host's Nsight Compute install, mounted read-only (profiler)
    counter_params: Path | None = None  # the driver's parameters the counter preflight reads (tests)


def ncu_mount(spec: ImageSpec, ncu_dir: Path | None) -> dict[str, dict[str, str]]:
    """The read-only volume of `--ncu-dir` (none without it); UserError when it holds no ncu."""
    if ncu_dir is None:
        return {}
    if spec.name != "profiler":
        raise UserError(f"--ncu-dir is for the profiler image, not {spec.name!r}; accepted with: profiler")
    folder = ncu_dir.expanduser().resolve()
    if not folder.is_dir():
        raise UserError(
            f"--ncu-dir {ncu_dir} is no folder; pass the host's Nsight Compute install, e.g. {NCU_DIR_EXAMPLE}"
        )
    ncu = folder / "ncu"
    if not (ncu.is_file() and os.access(ncu, os.X_OK)):
        raise UserError(
            f"--ncu-dir {ncu_dir} has no executable 'ncu'; pass the folder that holds Nsight Compute's ncu, "
            f"e.g. {NCU_DIR_EXAMPLE}"
        )
    return {str(folder): {"bind": NCU_IN_IMAGE, "mode": "ro"}}


def profiler_user(options: RunOptions) -> str | None:
    """The user of a profiler run with GPUs, from the host's counter permission (the deploy's
    preflight): the caller where any user may read the counters, else root (with SYS_ADMIN)."""
    from fleetbench.profile.ncu.permissions import DEFAULT_PARAMS_PATH, read_counter_permissions

    permissions = read_counter_permissions(options.counter_params or DEFAULT_PARAMS_PATH)
    log.info("ncu counters: %s", permissions.explanation)
    container = permissions.container
    # Unknown or restricted: root, since added capabilities reach only root's effective set in Docker.
    return None if container is not None and not container.root else "0:0"


def plan_run(client: docker.DockerClient | None, name: str, args: list[str], options: RunOptions) -> RunPlan:
    """Check the options and settle image, results folder, user and environment, before anything starts."""
    spec = benchmark_spec(name)
    requests = gpu_requests(options.gpus, spec)
    ncu_volume = ncu_mount(spec, options.ncu_dir)
    devices = options.devices or []
    for device in devices:
        if not Path(device.split(":", 1)[0]).exists():
            raise UserError(f"--device {device!r}: no such device on this host (e.g. /dev/dri for Mesa GPUs)")
    image = find_image(client or connect(), spec, options.namespace, options.variant, options.tag, bool(options.gpus))
    results = options.results_dir.expanduser().resolve()
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--results-dir {options.results_dir} cannot be created: {exc.strerror}") from None
    user = options.user
    if user is None and spec.run_as_root_with_gpus and options.gpus:
        user = profiler_user(options)
    if user is None:
        user = f"{os.getuid()}:{os.getgid()}"
    return RunPlan(
        image=image,
        command=list(args),
        user=user,
        environment=_environment(options),
        volumes={str(results): {"bind": RESULTS_IN_IMAGE, "mode": "rw"}, **ncu_volume},
        cap_add=list(spec.cap_add),
        device_requests=requests,
        devices=[d if ":" in d else f"{d}:{d}:rwm" for d in devices],
        shm_size=spec.shm_size,
    )


def _environment(options: RunOptions) -> dict[str, str]:
    """HOME, the --env pairs, and the Pushgateway and host label this process would use."""
    environment = {"HOME": "/tmp", **(options.env or {})}
    gateway = options.pushgateway or os.environ.get(PUSHGATEWAY_ENV)
    if gateway:
        environment[PUSHGATEWAY_ENV] = gateway
    if os.environ.get("FLEETBENCH_HOST") and "FLEETBENCH_HOST" not in environment:
        environment["FLEETBENCH_HOST"] = os.environ["FLEETBENCH_HOST"]
    return environment


def benchmark_spec(name: str) -> ImageSpec:
    """The spec of a benchmark image; UserError for a service, which `images run` does not start."""
    from fleetbench.images.specs import IMAGES

    spec = get_spec(name)
    if spec.service:
        raise UserError(
            f"image {name!r} is a service, not a benchmark; accepted for `images run`: "
            + ", ".join(n for n, s in IMAGES.items() if not s.service)
            + " (run the services with docker or the deploy playbooks)"
        )
    return spec


def run_image(
    name: str,
    args: list[str],
    *,
    client: docker.DockerClient | None = None,
    **options: Any,
) -> int:
    """Run the benchmark image to completion, streaming its output; returns the container's exit status.

    `options` are the fields of RunOptions, by name.
    """
    from docker.errors import APIError

    # Bad input is reported as such even where no engine runs.
    run_options = RunOptions(**options)
    gpu_requests(run_options.gpus, benchmark_spec(name))
    ncu_mount(benchmark_spec(name), run_options.ncu_dir)
    client = client or connect()
    plan = plan_run(client, name, args, run_options)
    extras = []
    if plan.cap_add:
        extras.append(f"cap-add {','.join(plan.cap_add)}")
    if plan.device_requests:
        extras.append("GPUs")
    log.info(
        "run %s %s as %s, host network, results -> %s%s",
        plan.image,
        " ".join(plan.command) or "(default command)",
        plan.user,
        next(iter(plan.volumes)),
        f", {', '.join(extras)}" if extras else "",
    )
    try:
        container = client.containers.create(
            plan.image,
            plan.command or None,
            name=f"fleetbench-{name}-{secrets.token_hex(3)}",
            network_mode="host",
            user=plan.user,
            environment=plan.environment,
            volumes=plan.volumes,
            cap_add=plan.cap_add or None,
            device_requests=plan.device_requests or None,
            devices=plan.devices or None,
            shm_size=plan.shm_size,
            init=True,
            labels={"io.fleetbench.image": name},
        )
    except APIError as exc:
        raise UserError(f"could not start {plan.image}: {_reason(exc, plan)}") from None
    try:
        # Attached before it starts, as `docker run` does: a short program's output cannot be missed.
        output = container.attach(stdout=True, stderr=True, stream=True, logs=True, demux=True)
        pump = threading.Thread(target=_pump, args=(output,), daemon=True)
        pump.start()
        try:
            container.start()
        except APIError as exc:
            raise UserError(f"could not start {plan.image}: {_reason(exc, plan)}") from None
        status = container.wait()
        pump.join(timeout=60)  # the stream ends with the container; this only bounds a stuck engine
        code = int(status.get("StatusCode", 1))
    except KeyboardInterrupt:
        container.stop(timeout=10)
        raise
    finally:
        with contextlib.suppress(APIError):
            container.remove(force=True)
    log.info("run %s exited with status %d", plan.image, code)
    return code


def _reason(exc: Any, plan: RunPlan) -> str:
    reason = " ".join(str(exc.explanation or exc).split())
    if plan.device_requests and "device driver" in reason:
        reason += " (GPUs need the NVIDIA Container Toolkit on the host)"
    return reason


def _pump(output: Any) -> None:
    """Copy the container's stdout/stderr to ours as it comes."""
    for out, err in output:
        if out:
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
        if err:
            sys.stderr.buffer.write(err)
            sys.stderr.flush()
