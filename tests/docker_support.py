"""Shared pieces of the image tests: the Docker engine, a per-session image namespace, cold builds of
the cpu images, the monitoring images running as containers on free loopback ports, and the session's
local cluster.

The engine is started by `scripts/dockerd.sh` (as `make test` does); tests skip only when it cannot
start, with the script's reason. Every image a session builds lives in its own namespace
(`fbtest<pid>/...`) on top of a base made from scratch, so the builds are cold, sessions running side
by side do not meet, and the session removes its images at the end (and those of dead sessions).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from fleetbench.services.stack import free_port, port_in_use

NAMESPACE_PREFIX = "fbtest"
SESSION_NAMESPACE = f"{NAMESPACE_PREFIX}{os.getpid()}"
COLD_IMAGES = ("trainer", "profiler", "edge-vulkan", "prometheus", "pushgateway")


def start_engine() -> Any:
    """A Docker SDK client; the engine is started by scripts/dockerd.sh when none answers."""
    try:
        import docker
    except ImportError:
        pytest.skip("the Docker SDK for Python is not installed (dev dependency `docker`)")
    started = subprocess.run(
        ["bash", str(REPO / "scripts" / "dockerd.sh")], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        pytest.skip(f"no Docker engine could be started: {' '.join(started.stderr.split())[-400:]}")
    client = docker.from_env(timeout=900)
    client.ping()
    return client


def remove_namespace(client: Any, namespace: str) -> None:
    """Its tagged images (with their untagged parents), then its dangling intermediate stages."""
    from fleetbench.images.base import NAMESPACE_LABEL

    for tag in all_tags(client):
        if tag.startswith(f"{namespace}/"):
            with contextlib.suppress(Exception):  # already gone with another tag of the same image
                client.images.remove(tag, force=True)
    client.images.prune(filters={"dangling": True, "label": f"{NAMESPACE_LABEL}={namespace}"})


def remove_dead_sessions(client: Any) -> None:
    """Namespaces of test sessions whose process is gone (killed runs) are removed too."""
    pattern = re.compile(rf"^{NAMESPACE_PREFIX}(\d+)/")
    dead: set[str] = set()
    for tag in all_tags(client):
        match = pattern.match(tag)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            dead.add(f"{NAMESPACE_PREFIX}{match.group(1)}")
    for namespace in dead:
        remove_namespace(client, namespace)


def all_tags(client: Any) -> list[str]:
    """Every tag on the engine from one listing: `images.list()` asks for each image again, which
    fails when a session beside this one removes an image in between (a shared engine)."""
    return [tag for image in client.api.images() for tag in image.get("RepoTags") or [] if tag != "<none>:<none>"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SNAPSHOT_ITEMS = ("pyproject.toml", "README.md", ".dockerignore", "benchmarks", "mobile", "grafana", "containers")


def snapshot_context(target: Path) -> Path:
    """A copy of what the images are built from, so edits made to the checkout while the tests run
    (other people's work in a shared tree) cannot change a build halfway; the wheelhouse is hard-linked."""
    import shutil

    from fleetbench.images.wheelhouse import WHEELHOUSE_DIR

    for item in SNAPSHOT_ITEMS:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, target / item, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif source.exists():
            shutil.copy2(source, target / item)
    wheels = REPO / WHEELHOUSE_DIR
    if wheels.is_dir():
        shutil.copytree(wheels, target / WHEELHOUSE_DIR, copy_function=_link_or_copy)
    return target


def _link_or_copy(source: str, target: str) -> None:
    import shutil

    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@dataclass
class SessionImages:
    client: Any
    namespace: str
    context: Path
    source: Any  # SourceInfo of the checkout the snapshot was taken from
    base_seconds: float
    results: dict[str, Any]  # name -> BuildResult
    cold_seconds: float

    def ref(self, name: str) -> str:
        return f"{self.namespace}/{name}:latest-cpu"


def make_base(client: Any) -> float:
    from fleetbench.images.base import ensure_base

    started = time.monotonic()
    _, built = ensure_base(client, SESSION_NAMESPACE, REPO / "build", rebuild=True)
    assert built
    return time.monotonic() - started


def build_cold(client: Any, base_seconds: float, context: Path) -> SessionImages:
    from fleetbench.images.build import build_images, source_info

    source = source_info(REPO)
    started = time.monotonic()
    results = build_images(
        list(COLD_IMAGES),
        "cpu",
        context=context,
        namespace=SESSION_NAMESPACE,
        client=client,
        source=source,
    )
    return SessionImages(
        client,
        SESSION_NAMESPACE,
        context,
        source,
        base_seconds,
        {r.name: r for r in results},
        time.monotonic() - started,
    )


@dataclass
class Monitoring:
    pushgateway_url: str
    prometheus_url: str
    containers: list[Any]


def start_monitoring(images: SessionImages) -> Monitoring:
    """The pushgateway and prometheus images as containers (host network, free loopback ports), healthy."""
    client = images.client
    gateway_port, prometheus_port = free_port(), free_port()
    containers = [
        client.containers.run(
            images.ref("pushgateway"),
            detach=True,
            network_mode="host",
            environment={"LISTEN_ADDRESS": f"127.0.0.1:{gateway_port}"},
            name=f"{images.namespace}-pushgateway",
        ),
        client.containers.run(
            images.ref("prometheus"),
            detach=True,
            network_mode="host",
            environment={
                "LISTEN_ADDRESS": f"127.0.0.1:{prometheus_port}",
                "PUSHGATEWAY_TARGET": f"127.0.0.1:{gateway_port}",
                "SCRAPE_INTERVAL": "1s",
            },
            name=f"{images.namespace}-prometheus",
        ),
    ]
    deadline = time.monotonic() + 90
    for container in containers:
        while True:
            container.reload()
            health = container.attrs["State"].get("Health", {}).get("Status")
            if health == "healthy":
                break
            if container.status == "exited" or time.monotonic() > deadline:
                logs = container.logs(tail=20).decode(errors="replace")
                stop_monitoring(containers)
                raise AssertionError(f"{container.name} did not become healthy ({health}): {logs}")
            time.sleep(0.5)
    return Monitoring(f"http://127.0.0.1:{gateway_port}", f"http://127.0.0.1:{prometheus_port}", containers)


def stop_monitoring(containers: list[Any]) -> None:
    for container in containers:
        with contextlib.suppress(Exception):
            container.remove(force=True)


# The images the local cluster's playbooks start (site: monitoring, a 2-node job, the edge run; Slurm).
CLUSTER_IMAGES = ("trainer", "edge-vulkan", "prometheus", "pushgateway", "node-exporter", "node")


@dataclass
class LocalCluster:
    """The session's one local cluster of 3 SSH nodes, with the slurm playbook's groups in its inventory.

    The deploy, ncu-deploy and Slurm modules share it (each bring-up costs the nodes, then every
    playbook's first run on them). `up()` brings it up on first use, and again after a test took it
    down, so that any one module runs on its own too.
    """

    images: SessionImages
    state: Path
    images_built: bool = False

    @property
    def inventory(self) -> Path:
        return self.state / "inventory"

    def node(self, name: str) -> Any:
        """The node container `name` (node1..node3)."""
        return self.images.client.containers.get(f"{self.images.namespace}-{name}")

    def up(self) -> Path:
        """The cluster's inventory folder, with every node running (brought up when none is)."""
        from fleetbench.deploy.cluster import LABEL, cluster_up
        from fleetbench.images.build import build_images

        running = self.images.client.containers.list(filters={"label": f"{LABEL}={self.images.namespace}"})
        if len(running) == 3 and (self.inventory / "hosts.yml").is_file():
            return self.inventory
        missing = [name for name in CLUSTER_IMAGES if name not in self.images.results]
        # The session built the job images; these build on the same base in seconds. They are not added
        # to the session's built images: those are the job images the image tests check (non-root, size
        # budget), and `node` is an SSH host that runs as root on purpose.
        if missing and not self.images_built:
            build_images(
                missing,
                "cpu",
                context=self.images.context,
                namespace=self.images.namespace,
                client=self.images.client,
                source=self.images.source,
            )
            self.images_built = True
        return cluster_up(3, self.state, namespace=self.images.namespace, slurm=True)

    def start_again(self, name: str, timeout_s: float = 60) -> None:
        """Start a stopped node again and wait until its sshd answers (its daemons stay stopped)."""
        hosts = yaml.safe_load((self.inventory / "hosts.yml").read_text())["all"]["hosts"]
        self.node(name).start()
        deadline = time.monotonic() + timeout_s
        while not port_in_use(hosts[name]["ansible_port"]):
            assert time.monotonic() < deadline, f"{name}: sshd did not answer within {timeout_s:.0f} s"
            time.sleep(0.2)

    def down(self) -> None:
        from fleetbench.deploy.cluster import cluster_down

        cluster_down(self.state, namespace=self.images.namespace)
