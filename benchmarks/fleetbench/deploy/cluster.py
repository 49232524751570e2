"""`fleetbench cluster up/down`: a local cluster of real SSH nodes for tests and demos.

Each node is a container of the `node` image (the local base + sshd + Python + the Docker SDK) on
host networking, with sshd on its own 127.0.0.1 port and a key made for this cluster. Nodes drive the
host's Docker engine through the mounted socket, so a path a node hands to `docker run` must exist on
the host: each node's state folder is mounted at the same absolute path inside it.
"""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.console import Console

from fleetbench.errors import UserError
from fleetbench.services.stack import LOOPBACK, free_port, port_in_use

LABEL = "io.fleetbench.cluster"
NODE_IMAGE = "node"
DOCKER_SOCKET = "/var/run/docker.sock"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Node:
    """A node container: its name, its sshd port on 127.0.0.1 and its state folder."""

    name: str
    ssh_port: int
    state_dir: Path  # mounted at the same path inside the node


def node_names(count: int) -> list[str]:
    """Node names node1..nodeN, in order."""
    return [f"node{i}" for i in range(1, count + 1)]


def ensure_key(state_dir: Path) -> Path:
    """The cluster's SSH private key, made with ssh-keygen the first time."""
    key = state_dir / "id_ed25519"
    if not key.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fleetbench-cluster", "-f", str(key)], check=True
        )
    return key


def inventory(
    nodes: list[Node], state_dir: Path, key: Path, ports: dict[str, int], namespace: str = "fleetbench"
) -> dict[str, object]:
    """Groups for the end-to-end run: monitoring + edge on node1, a 2-node job on the rest."""
    hosts = {
        n.name: {
            "ansible_host": LOOPBACK,
            "ansible_port": n.ssh_port,
            "fleetbench_results_dir": str(n.state_dir / "results"),
            "node_exporter_textfile_dir": str(n.state_dir / "textfile"),
            "images_cache_dir": str(n.state_dir / "images"),
            "monitoring_dir": str(n.state_dir / "monitoring"),
            "fleetbench_node_exporter_port": ports[f"node_exporter_{n.name}"],
        }
        for n in nodes
    }
    first, rest = nodes[0].name, [n.name for n in nodes[1:]] or [nodes[0].name]
    return {
        "all": {
            "hosts": hosts,
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={state_dir / 'known_hosts'}",
                "ansible_python_interpreter": "/usr/bin/python3",
                "fleetbench_image_tag": "latest-cpu",
                "fleetbench_name_prefix": namespace,
                "fleetbench_images": {
                    key: f"{namespace}/{name}"
                    for key, name in (
                        ("trainer", "trainer"),
                        ("profiler", "profiler"),
                        ("edge_vulkan", "edge-vulkan"),
                        ("prometheus", "prometheus"),
                        ("pushgateway", "pushgateway"),
                        ("node_exporter", "node-exporter"),
                        ("grafana", "grafana"),
                    )
                },
                "fleetbench_pushgateway_port": ports["pushgateway"],
                "fleetbench_prometheus_port": ports["prometheus"],
                "monitoring_grafana_enabled": False,  # Grafana's upstream image cannot be pulled here
                "fleetbench_dcgm_exporter_enabled": False,
                "trainer_use_gpus": False,
                "profiler_use_gpus": False,
                "fleetbench_profile_ncu": False,  # no NVIDIA driver on the nodes (tests point the role at a params file)
                "trainer_gpus_per_node": 1,
                "trainer_preset": "tiny",
                "trainer_steps": 4,
                "trainer_rdzv_port": ports["rdzv"],
                "trainer_gloo_ifname": "lo",
                "trainer_pid_mode": "host",  # the nodes share this kernel and hostname
                "edge_vulkan_pass_dri": False,
                "edge_vulkan_extra_args": ["--quick"],  # seconds on lavapipe; the full set is `make edge`
            },
            "children": {
                "monitoring": {"hosts": {first: {}}},
                "edge_vulkan": {"hosts": {first: {}}},
                "gpu_nodes": {"hosts": {name: {} for name in rest}},
                "profilers": {"hosts": {rest[0]: {}}},
                "edge_metal": {"hosts": {}},
            },
        }
    }


def _ports(names: list[str]) -> dict[str, int]:
    wanted = ["pushgateway", "prometheus", "rdzv", *(f"node_exporter_{n}" for n in names)]
    ports: dict[str, int] = {}
    while len(ports) < len(wanted):
        port = free_port()
        if port not in ports.values():
            ports[wanted[len(ports)]] = port
    return ports


def cluster_up(count: int, state_dir: Path, console: Console, namespace: str = "fleetbench") -> Path:
    """Start `count` nodes (building the node image first when missing); returns the inventory folder."""
    if not 1 <= count <= 16:
        raise UserError(f"--nodes {count} is not accepted; use 1-16 (2 or more for a multi-node job)")
    from fleetbench.images.build import build_images
    from fleetbench.images.engine import connect

    client = connect()
    state_dir = state_dir.resolve()
    existing = client.containers.list(all=True, filters={"label": f"{LABEL}={namespace}"})
    if existing:
        raise UserError(f"a local cluster is already up ({len(existing)} nodes); `make cluster-down` first")
    image = f"{namespace}/{NODE_IMAGE}:latest-cpu"
    if not client.images.list(name=image):
        log.info("%s is not on this engine: building it", image)
        build_images([NODE_IMAGE], "cpu", console, client=client, namespace=namespace)
    key = ensure_key(state_dir)
    names = node_names(count)
    nodes = []
    for name in names:
        port = free_port()
        node_dir = state_dir / "nodes" / name
        node_dir.mkdir(parents=True, exist_ok=True)
        client.containers.run(
            image,
            name=f"{namespace}-{name}",
            detach=True,
            network_mode="host",
            labels={LABEL: namespace, f"{LABEL}.node": name},
            environment={"SSH_PORT": str(port)},
            volumes={
                DOCKER_SOCKET: {"bind": DOCKER_SOCKET, "mode": "rw"},
                str(node_dir): {"bind": str(node_dir), "mode": "rw"},
                str(key.with_suffix(".pub")): {"bind": "/etc/fleetbench/authorized_keys", "mode": "ro"},
            },
        )
        nodes.append(Node(name, port, node_dir))
    _wait_for_ssh(nodes, state_dir)
    inventory_dir = state_dir / "inventory"
    inventory_dir.mkdir(exist_ok=True)
    (inventory_dir / "hosts.yml").write_text(
        "# Generated by `fleetbench cluster up`: the local cluster's nodes on 127.0.0.1.\n"
        + yaml.safe_dump(inventory(nodes, state_dir, key, _ports(names), namespace), sort_keys=False)
    )
    console.print(
        f"cluster: {count} nodes up ({', '.join(f'{n.name}:{n.ssh_port}' for n in nodes)}); inventory {inventory_dir}"
    )
    return inventory_dir


def _wait_for_ssh(nodes: list[Node], state_dir: Path, timeout_s: float = 60) -> None:
    """Wait until every sshd answers, and record the host keys it offers (host key checking stays on)."""
    deadline = time.monotonic() + timeout_s
    keys = []
    for node in nodes:
        while not port_in_use(node.ssh_port):
            if time.monotonic() > deadline:
                raise UserError(
                    f"{node.name}: sshd did not answer on {LOOPBACK}:{node.ssh_port} within {timeout_s:.0f} s"
                )
            time.sleep(0.2)
        scan = subprocess.run(
            ["ssh-keyscan", "-p", str(node.ssh_port), "-T", "5", LOOPBACK], capture_output=True, text=True, timeout=30
        )
        if not scan.stdout.strip():
            raise UserError(f"{node.name}: ssh-keyscan got no host key from {LOOPBACK}:{node.ssh_port}")
        keys.append(scan.stdout)
    (state_dir / "known_hosts").write_text("".join(keys))


def cluster_down(state_dir: Path, console: Console, namespace: str = "fleetbench") -> list[str]:
    """Remove the nodes and the containers the playbooks started on them; returns the node names removed."""
    from fleetbench.images.engine import connect

    client = connect()
    removed = []
    # The nodes, and the services and jobs the playbooks started on them (named after the cluster).
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={namespace}"}):
        container.remove(force=True)
        removed.append(str(container.labels.get(f"{LABEL}.node") or container.name))
    for container in client.containers.list(all=True, filters={"name": f"^{namespace}-"}):
        container.remove(force=True)
    inventory_file = state_dir / "inventory" / "hosts.yml"
    inventory_file.unlink(missing_ok=True)
    console.print(f"cluster: removed {', '.join(sorted(removed)) or 'nothing (no nodes were up)'}")
    return removed
