"""The Slurm exporter: node and job states from `sinfo` and `squeue` as Prometheus gauges.

Standalone on purpose: it imports only the standard library and prometheus_client, so the slurm role
copies this one file to the controller and runs it with Debian's python3-prometheus-client, beside
slurmctld, where the Slurm commands and munge are:

    python3 slurm_exporter.py --listen-address 127.0.0.1 --port 9341 [--partition batch]

Every scrape runs `sinfo` and `squeue` once (parsable formats every Slurm version has). Series:

    fleetbench_slurm_up                                   1 when both commands answered, else 0
    fleetbench_slurm_nodes{partition,state}               nodes per state (idle, allocated, mixed, down, ...)
    fleetbench_slurm_node_state{node,partition,state}     1 per node, labelled with its state
    fleetbench_slurm_cpus{partition,state}                CPUs allocated, idle, other (down, drained), total
    fleetbench_slurm_jobs{partition,state}                jobs per state (squeue --states=all: running,
                                                          pending, and the finished ones slurmctld still
                                                          remembers: completed, failed, node_fail, ...)

A state word keeps Slurm's name in lower case; flags after it (`*` not responding, `~` powered off,
`#`, `!`, `%`, `$`, `@`, `^`, `-`, `+`) are dropped.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # prometheus_client loads when the exporter serves, not when its names are read
    from prometheus_client.metrics_core import Metric

UP = "fleetbench_slurm_up"
NODES = "fleetbench_slurm_nodes"
NODE_STATE = "fleetbench_slurm_node_state"
CPUS = "fleetbench_slurm_cpus"
JOBS = "fleetbench_slurm_jobs"
METRICS = (UP, NODES, NODE_STATE, CPUS, JOBS)

# Always exported (0 when absent), so a dashboard's series do not come and go.
NODE_STATES = ("idle", "allocated", "mixed", "completing", "down", "drained", "draining")
JOB_STATES = ("pending", "running", "completed", "failed", "cancelled", "node_fail", "timeout", "out_of_memory")
CPU_STATES = ("allocated", "idle", "other", "total")
STATE_FLAGS = "*~#!%$@^-+"
COMMAND_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class NodeRow:
    """One line of `sinfo --Node`: a node in one partition, its state and its CPUs (A/I/O/T)."""

    node: str
    partition: str
    state: str
    cpus: tuple[int, int, int, int]


@dataclass(frozen=True)
class JobRow:
    """One line of `squeue`: a job's id, partition and state."""

    job_id: str
    partition: str
    state: str


def state_word(raw: str) -> str:
    """Slurm's state in lower case without its flag characters (`down*` -> `down`)."""
    return raw.strip().rstrip(STATE_FLAGS).lower()


def parse_sinfo(text: str) -> list[NodeRow]:
    """Rows of `sinfo --noheader --Node --format %N|%P|%T|%C`; malformed lines are skipped."""
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        node, partition, state, cpus = parts
        counts = cpus.split("/")
        if len(counts) != 4 or not all(c.isdigit() for c in counts):
            continue
        a, i, o, t = (int(c) for c in counts)
        rows.append(NodeRow(node, partition.rstrip("*"), state_word(state), (a, i, o, t)))
    return rows


def parse_squeue(text: str) -> list[JobRow]:
    """Rows of `squeue --noheader --states=all --format %i|%P|%T`; malformed lines are skipped."""
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            rows.append(JobRow(parts[0], parts[1], state_word(parts[2])))
    return rows


def run(argv: Sequence[str]) -> str | None:
    """The stdout of a Slurm command, or None when it failed or did not answer in time."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def read_cluster(partition: str) -> tuple[list[NodeRow], list[JobRow]] | None:
    """The nodes and jobs of `partition` ("" = every partition), or None when Slurm did not answer."""
    where = ["--partition", partition] if partition else []
    nodes = run(["sinfo", "--noheader", "--Node", "--format", "%N|%P|%T|%C", *where])
    jobs = run(["squeue", "--noheader", "--states=all", "--format", "%i|%P|%T", *where])
    if nodes is None or jobs is None:
        return None
    return parse_sinfo(nodes), parse_squeue(jobs)


def samples(nodes: list[NodeRow], jobs: list[JobRow]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every series of one scrape: metric name -> [(labels, value)]."""
    partitions = sorted({n.partition for n in nodes} | {j.partition for j in jobs})
    node_counts = Counter((n.partition, n.state) for n in nodes)
    job_counts = Counter((j.partition, j.state) for j in jobs)
    out: dict[str, list[tuple[dict[str, str], float]]] = {UP: [({}, 1.0)]}
    out[NODES] = [
        ({"partition": p, "state": s}, float(node_counts[(p, s)]))
        for p in partitions
        for s in sorted(set(NODE_STATES) | {state for part, state in node_counts if part == p})
    ]
    out[NODE_STATE] = [({"node": n.node, "partition": n.partition, "state": n.state}, 1.0) for n in nodes]
    cpus: dict[str, list[int]] = {p: [0, 0, 0, 0] for p in partitions}
    for n in nodes:
        cpus[n.partition] = [a + b for a, b in zip(cpus[n.partition], n.cpus, strict=True)]
    out[CPUS] = [
        ({"partition": p, "state": s}, float(v)) for p in partitions for s, v in zip(CPU_STATES, cpus[p], strict=True)
    ]
    out[JOBS] = [
        ({"partition": p, "state": s}, float(job_counts[(p, s)]))
        for p in partitions
        for s in sorted(set(JOB_STATES) | {state for part, state in job_counts if part == p})
    ]
    return out


HELP = {
    UP: "1 when sinfo and squeue answered at this scrape, else 0",
    NODES: "Slurm nodes per partition and state (sinfo)",
    NODE_STATE: "1 for each Slurm node, labelled with its partition and state (sinfo)",
    CPUS: "CPUs per partition: allocated, idle, other (down or drained) and total (sinfo %C)",
    JOBS: "Slurm jobs per partition and state, finished ones while slurmctld remembers them (squeue --states=all)",
}
LABELS = {UP: (), NODES: ("partition", "state"), NODE_STATE: ("node", "partition", "state")}
LABELS |= {CPUS: ("partition", "state"), JOBS: ("partition", "state")}


class SlurmCollector:
    """A prometheus_client collector that asks Slurm at every scrape."""

    def __init__(self, partition: str = "") -> None:
        self.partition = partition

    def collect(self) -> Iterator[Metric]:
        """One gauge family per metric; only `fleetbench_slurm_up 0` when Slurm did not answer."""
        from prometheus_client.core import GaugeMetricFamily

        cluster = read_cluster(self.partition)
        series = samples(*cluster) if cluster is not None else {UP: [({}, 0.0)]}
        for name, values in series.items():
            family = GaugeMetricFamily(name, HELP[name], labels=LABELS[name])
            for labels, value in values:
                family.add_metric([labels[key] for key in LABELS[name]], value)
            yield family


def main(argv: Sequence[str] | None = None) -> int:
    """Serve /metrics on --listen-address:--port until killed."""
    from prometheus_client import start_http_server
    from prometheus_client.core import REGISTRY

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen-address", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9341, help="port to serve on (default 9341)")
    parser.add_argument("--partition", default="", help="only this partition (default: every partition)")
    args = parser.parse_args(argv)
    REGISTRY.register(SlurmCollector(args.partition))
    start_http_server(args.port, addr=args.listen_address)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
