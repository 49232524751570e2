"""`fleetbench cluster up/down`: a local cluster of real SSH nodes for tests and demos.

Each node is a container of the `node` image (the local base + sshd + Python + the Docker SDK) on
host networking, with sshd on its own 127.0.0.1 port and a key made for this cluster. Nodes drive the
host's Docker engine through the mounted socket, so a path a node hands to `docker run` must exist on
the host: each node's state folder is mounted at the same absolute path inside it.

With `slurm=True` the inventory also has the groups of the slurm playbook: node1 is the controller
(slurmctld, and the Slurm exporter), the other nodes are compute nodes (slurmd). The nodes share the
host's network namespace and its hostname, so each slurmd has its own port (slurm.conf `Port=`), its
own NodeName (`slurmd -N`), and binds 127.0.0.1 only (NodeAddr, CommunicationParameters
NoInAddrAny); Debian's Slurm is built without multiple-slurmd support, which this does not need.
There is no init system in a node: the role starts the daemons itself (slurm_service_manager:
direct), and every node runs docker-init as PID 1 to reap what they leave. A node's Slurm state
and logs are folders of its state folder (mounted at /var/lib/slurm and /var/log/slurm); `shared/`
is mounted in every node at the same path, the cluster's shared file system for job results and
checkpoints; the host's docker CLI is mounted so that jobs run in the trainer image.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleetbench.errors import UserError
from fleetbench.job import Progress
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
) -> dict[str, Any]:
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
                "trainer_collectives_rdzv_port": ports["collectives_rdzv"],
                # the sweep before training: its path end to end, at sizes gloo on this VM takes in seconds
                "trainer_collectives_args": ["--ops", "all_reduce,all_gather", "--max-bytes", "4096", "--iters", "3"],
                "trainer_gloo_ifname": "lo",
                "trainer_pid_mode": "host",  # the nodes share this kernel and hostname
                "trainer_memlock_unlimited": False,  # this VM's engine cannot raise its 8 MiB memlock limit
                "edge_vulkan_pass_dri": False,
                "edge_vulkan_extra_args": ["--quick"],  # seconds on lavapipe; the full set is `make edge`
                # edge llm exports three runtimes' models (minutes on this VM); tests/test_edge_llm*.py run it
                "edge_vulkan_llm": False,
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


def slurm_inventory(base: dict[str, Any], nodes: list[Node], state_dir: Path, ports: dict[str, int]) -> dict[str, Any]:
    """`base` with the slurm playbook's groups and knobs: node1 the controller, the rest compute nodes."""
    group = base["all"]
    for node in nodes[1:]:
        group["hosts"][node.name]["slurm_slurmd_port"] = ports[f"slurmd_{node.name}"]
    group["vars"].update(
        {
            "slurm_service_manager": "direct",  # no init system in a node container
            "slurm_proctrack_type": "proctrack/linuxproc",  # cgroups are not delegated to the nodes
            "slurm_task_plugin": "task/none",
            "slurm_communication_parameters": ["NoInAddrAny", "NoCtldInAddrAny"],  # 127.0.0.1 only
            "slurm_slurmctld_port": ports["slurmctld"],
            "slurm_slurmd_timeout": 10,  # a stopped slurmd fails its job within about half a minute
            "slurm_kill_wait": 5,
            "slurm_cred_expire": 15,  # a requeued job starts again after 15 s instead of 2 minutes
            "slurm_results_dir": str(shared_dir(state_dir) / "results"),
            "fleetbench_slurm_exporter_port": ports["slurm_exporter"],
            "slurm_collectives_rdzv_port": ports["collectives_rdzv"],
            "slurm_collectives_args": ["--ops", "all_reduce,all_gather", "--max-bytes", "4096", "--iters", "3"],
        }
    )
    group["children"]["slurm_controller"] = {"hosts": {nodes[0].name: {}}}
    group["children"]["slurm_compute"] = {"hosts": {n.name: {} for n in nodes[1:]}}
    return base


def shared_dir(state_dir: Path) -> Path:
    """The cluster's shared file system: mounted in every node at this same path."""
    return state_dir / "shared"


def _node_volumes(node_dir: Path, state_dir: Path, key: Path, slurm: bool) -> dict[str, dict[str, str]]:
    """What a node container mounts: the Docker socket, its state folder and the key; for Slurm also its
    Slurm state and logs, the shared folder and the host's docker CLI (jobs run in the trainer image)."""
    volumes = {
        DOCKER_SOCKET: {"bind": DOCKER_SOCKET, "mode": "rw"},
        str(node_dir): {"bind": str(node_dir), "mode": "rw"},
        str(key.with_suffix(".pub")): {"bind": "/etc/fleetbench/authorized_keys", "mode": "ro"},
    }
    if slurm:
        for sub, target in (("lib", "/var/lib/slurm"), ("log", "/var/log/slurm")):
            (node_dir / "slurm" / sub).mkdir(parents=True, exist_ok=True)
            volumes[str(node_dir / "slurm" / sub)] = {"bind": target, "mode": "rw"}
        shared = shared_dir(state_dir)
        volumes[str(shared)] = {"bind": str(shared), "mode": "rw"}
        docker_cli = shutil.which("docker")
        if docker_cli:
            volumes[str(Path(docker_cli).resolve())] = {"bind": "/usr/local/bin/docker", "mode": "ro"}
        else:
            log.warning("no docker CLI on this host: Slurm jobs on the local cluster cannot start the trainer image")
    return volumes


def _ports(names: list[str], slurm: bool = False) -> dict[str, int]:
    wanted = ["pushgateway", "prometheus", "rdzv", "collectives_rdzv", *(f"node_exporter_{n}" for n in names)]
    if slurm:
        wanted += ["slurmctld", "slurm_exporter", *(f"slurmd_{n}" for n in names[1:])]
    ports: dict[str, int] = {}
    while len(ports) < len(wanted):
        port = free_port()
        if port not in ports.values():
            ports[wanted[len(ports)]] = port
    return ports


def cluster_up(
    count: int, state_dir: Path, namespace: str = "fleetbench", slurm: bool = False, progress: Progress | None = None
) -> Path:
    """Start `count` nodes (building the node image first when missing); returns the inventory folder.

    `slurm`: the inventory has the slurm playbook's groups (node1 controller, the rest compute nodes)
    and the nodes mount what Slurm needs (see the module docstring); deploy `slurm` to start it.
    """
    if not 1 <= count <= 16:
        raise UserError(f"--nodes {count} is not accepted; use 1-16 (2 or more for a multi-node job)")
    if slurm and count < 2:
        raise UserError(f"--nodes {count} with --slurm is not accepted; use 2-16 (a controller and compute nodes)")
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
        build_images([NODE_IMAGE], "cpu", progress=progress, client=client, namespace=namespace)
    key = ensure_key(state_dir)
    names = node_names(count)
    if slurm:  # a new cluster starts with no jobs and no node states of an earlier one
        remove_slurm_state(state_dir)
        shared_dir(state_dir).mkdir(parents=True, exist_ok=True)
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
            init=slurm,  # docker-init as PID 1 reaps the daemons' orphans
            labels={LABEL: namespace, f"{LABEL}.node": name},
            environment={"SSH_PORT": str(port)},
            volumes=_node_volumes(node_dir, state_dir, key, slurm),
        )
        nodes.append(Node(name, port, node_dir))
    _wait_for_ssh(nodes, state_dir)
    inventory_dir = state_dir / "inventory"
    inventory_dir.mkdir(exist_ok=True)
    ports = _ports(names, slurm)
    hosts = inventory(nodes, state_dir, key, ports, namespace)
    if slurm:
        hosts = slurm_inventory(hosts, nodes, state_dir, ports)
    (inventory_dir / "hosts.yml").write_text(
        "# Generated by `fleetbench cluster up`: the local cluster's nodes on 127.0.0.1.\n"
        + yaml.safe_dump(hosts, sort_keys=False)
    )
    log.info(
        "cluster: %d nodes up (%s); inventory %s",
        count,
        ", ".join(f"{n.name}:{n.ssh_port}" for n in nodes),
        inventory_dir,
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


def cluster_down(state_dir: Path, namespace: str = "fleetbench") -> list[str]:
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
    remove_slurm_state(state_dir)
    return removed


def remove_slurm_state(state_dir: Path) -> None:
    """Remove the Slurm state, logs and shared folder of the cluster in `state_dir` (written as root and
    as the nodes' slurm user); UserError when they cannot be removed."""
    folders = [*state_dir.glob("nodes/*/slurm"), shared_dir(state_dir)]
    for folder in folders:
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UserError(
                f"cannot remove {folder} ({exc.strerror or exc}): the nodes wrote it as root; remove it with sudo"
            ) from None
