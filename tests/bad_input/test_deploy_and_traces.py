"""Bad input to `deploy`, `trace summarize`, `stack`, `images` and `cluster`.

Each case runs the real entry point in a subprocess through tests/badinput.py:check: one
`fleetbench: error: ...` line naming the problem, exit 2, no traceback, nothing written. Deploy cases
fail in the checks that run before the playbook (the inventory as `ansible-inventory` reads it, the
plays, --limit and --tags as `ansible-playbook --list-hosts --list-tags` lists them), so no host is
contacted and no Docker is needed; images and cluster cases fail before the Docker engine is asked.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from badinput import BadInput, check
from testdata import OWN_DATA_DIR

GZ_TRACE = OWN_DATA_DIR / "fsdp2-cpu" / "rank-0.fsdp2.pt.trace.json.gz"
GOOD_INVENTORY = """all:
  hosts:
    node1: {ansible_host: 127.0.0.1, ansible_port: 2222}
  children:
    gpu_nodes:
      hosts:
        node1: {}
    monitoring:
      hosts:
        node1: {}
"""
ONLY_EDGE = "all:\n  children:\n    edge_vulkan:\n      hosts:\n        board1: {ansible_host: 127.0.0.1}\n"
DEPLOY_ACCEPTED = "accepted: a YAML or INI inventory file, or a folder of them"


def deploy(*args: str, inventory: str = "{tmp}/inv.yml") -> tuple[str, ...]:
    """`fleetbench deploy ARGS --inventory INVENTORY` (PLAYBOOK first in ARGS)."""
    return ("deploy", *args, "--inventory", inventory)


def inventory(case_id: str, text: str | bytes, fragment: str, name: str = "inv.yml") -> BadInput:
    """A case: `deploy site` on an inventory file NAME holding `text`."""
    return BadInput(case_id, deploy("site", inventory=f"{{tmp}}/{name}"), fragment, files={name: text})


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "fifo.yml")


def trace_event(rank: object) -> str:
    """A small trace of one rank (`rank` as distributedInfo writes it): one CPU op."""
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "pid": 1, "tid": 1}
    return json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": [event]})


INVENTORY_CASES = [
    inventory(
        "deploy-inventory-yaml-syntax-error",
        "all:\n  hosts:\n    a: {ansible_host: 127.0.0.1\n",
        "inv.yml is not a valid Ansible inventory: Ansible's yaml plugin: YAML parsing failed",
    ),
    inventory("deploy-inventory-empty-file", "", "inv.yml is empty: it names no hosts"),
    inventory("deploy-inventory-blank-lines", "\n   \n", "inv.yml is empty"),
    inventory("deploy-inventory-comments-only", "# nothing here yet\n", "inv.yml holds no hosts"),
    inventory("deploy-inventory-yaml-list", "- node1\n- node2\n", "it should be a dictionary, got: list"),
    inventory("deploy-inventory-yaml-scalar", "node1\n", "inv.yml is YAML holding the text 'node1', not a mapping"),
    inventory("deploy-inventory-ini-syntax-error", "[gpu_nodes\nnode1\n", "Ansible's ini plugin", name="hosts.ini"),
    inventory("deploy-inventory-bad-port", "all:\n  hosts:\n    node1: {ansible_port: ssh}\n", "ansible_port 'ssh'"),
    inventory(
        "deploy-inventory-ini-port-zero",
        "[gpu_nodes]\nnode1 ansible_host=127.0.0.1 ansible_port=0\n",
        "host node1 has ansible_port 0; accepted: a port number in 1-65535",
        name="hosts.ini",
    ),
    inventory(
        "deploy-inventory-port-above-65535",
        "all:\n  hosts:\n    node1: {ansible_port: 70000}\n",
        "has ansible_port 70000",
    ),
    inventory(
        "deploy-inventory-unknown-plugin", "plugin: no.such.plugin\n", "specifies unknown plugin 'no.such.plugin'"
    ),
    inventory("deploy-inventory-binary", b"\x00\xff\xfe\x01 not text\n", "inv.yml is not a valid Ansible inventory"),
    BadInput(
        "deploy-inventory-folder-bad-hosts",
        deploy("site", inventory="{tmp}/site"),
        "(its file hosts.yml line ",
        files={
            "site/hosts.yml": "all:\n  hosts:\n    a: {ansible_host: 127.0.0.1\n",
            "site/group_vars/all.yml": "x: 1\n",
        },
    ),
    BadInput(
        "deploy-inventory-folder-without-hosts",
        deploy("site", inventory="{tmp}/site"),
        "site holds no hosts file (hosts.yml or *.ini)",
        files={"site/group_vars/all.yml": "x: 1\n"},
    ),
    BadInput(
        "deploy-inventory-folder-of-empty-hosts",
        deploy("site", inventory="{tmp}/site"),
        "site holds no hosts",
        files={"site/hosts.yml": "all:\n  hosts: {}\n"},
    ),
    BadInput("deploy-inventory-missing", deploy("site", inventory="{tmp}/nope.yml"), "nope.yml does not exist"),
    BadInput("deploy-inventory-fifo", deploy("site", inventory="{tmp}/fifo.yml"), "not a regular file", prepare=_fifo),
]

PLAYBOOK_CASES = [
    BadInput("deploy-unknown-playbook", deploy("nope"), "unknown playbook 'nope'; accepted: ", files={"inv.yml": ""}),
    BadInput(
        "deploy-playbook-targets-no-host",
        deploy("train"),
        "playbook train targets no host of inventory",
        files={"inv.yml": ONLY_EDGE},
    ),
    BadInput(
        "deploy-limit-matches-nothing",
        deploy("site", "--limit", "nosuch"),
        "--limit 'nosuch' matches no host of inventory",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-limit-with-a-typo",
        deploy("site", "--limit", "node1,nodee2"),
        "'nodee2' matches no host or group of inventory",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-limit-outside-the-playbook",
        deploy("edge", "--limit", "node1"),
        "playbook edge targets no host of inventory",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-limit-empty",
        deploy("site", "--limit", " "),
        "--limit ' ' names no host or group",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-check-unknown-tag",
        deploy("site", "--check", "--tags", "nosuch"),
        "no task of playbook site is tagged nosuch",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-check-tag-run-and-skipped",
        deploy("site", "--check", "--tags", "fleetbench_job", "--skip-tags", "fleetbench_job"),
        "--tags and --skip-tags both name fleetbench_job",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-check-skip-tag-typo",
        deploy("monitoring", "--check", "--skip-tags", "fleetbench_jobs"),
        "no task under deploy/ is tagged fleetbench_jobs",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-check-empty-tags",
        deploy("site", "--check", "--tags", ","),
        "--tags ',' names no tag",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-check-vault-password-missing",
        deploy("site", "--check", "--vault-password-file", "{tmp}/no-password"),
        "no-password does not exist",
        files={"inv.yml": GOOD_INVENTORY},
    ),
    BadInput(
        "deploy-dir-missing",
        deploy("site"),
        "no-deploy (FLEETBENCH_DEPLOY_DIR) is not a folder",
        files={"inv.yml": GOOD_INVENTORY},
        env={"FLEETBENCH_DEPLOY_DIR": "{tmp}/no-deploy"},
    ),
    BadInput(
        "deploy-dir-without-playbooks",
        deploy("site"),
        "holds no ansible.cfg and playbooks",
        files={"inv.yml": GOOD_INVENTORY, "mydeploy/README.md": "not the deploy folder\n"},
        env={"FLEETBENCH_DEPLOY_DIR": "{tmp}/mydeploy"},
    ),
]


def summarize(*args: str) -> tuple[str, ...]:
    """`fleetbench trace summarize ARGS`."""
    return ("trace", "summarize", *args)


TRACE_CASES = [
    BadInput("trace-missing-file", summarize("{tmp}/gone.json"), "gone.json not found"),
    BadInput(
        "trace-empty-file",
        summarize("{tmp}/rank-0.json"),
        "rank-0.json is not a readable Chrome trace JSON",
        files={"rank-0.json": ""},
    ),
    BadInput(
        "trace-truncated-gz",
        summarize("{tmp}/cut.json.gz"),
        "cut.json.gz is not a readable Chrome trace JSON",
        files={"cut.json.gz": GZ_TRACE.read_bytes()[:5000]},
    ),
    BadInput(
        "trace-gz-cut-inside-the-json",
        summarize("{tmp}/half.json.gz"),
        "half.json.gz is not a readable Chrome trace JSON",
        files={"half.json.gz": gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1')},
    ),
    BadInput(
        "trace-plain-json-named-gz",
        summarize("{tmp}/plain.json.gz"),
        "plain.json.gz is not a readable Chrome trace JSON",
        files={"plain.json.gz": trace_event(0)},
    ),
    BadInput("trace-not-json", summarize("{tmp}/notes.txt"), "notes.txt is not a readable", files={"notes.txt": "hi"}),
    BadInput(
        "trace-not-utf8",
        summarize("{tmp}/latin.json"),
        "latin.json is not a readable Chrome trace JSON",
        files={"latin.json": b'{"traceEvents": [], "name": "caf\xe9"}'},
    ),
    BadInput(
        "trace-without-trace-events",
        summarize("{tmp}/x.json"),
        "x.json has no traceEvents list",
        files={"x.json": '{"schemaVersion": 1}'},
    ),
    BadInput(
        "trace-events-not-a-list",
        summarize("{tmp}/y.json"),
        "y.json has no traceEvents list",
        files={"y.json": '{"traceEvents": {"ph": "X"}}'},
    ),
    BadInput(
        "trace-json-a-number", summarize("{tmp}/n.json"), "n.json has no traceEvents list", files={"n.json": "42"}
    ),
    BadInput(
        "trace-nested-too-deep",
        summarize("{tmp}/deep.json"),
        "deep.json is not a Chrome trace: its JSON is nested too deep",
        files={"deep.json": "[" * 100_000 + "]" * 100_000},
    ),
    BadInput("trace-empty-folder", summarize("{tmp}/ranks"), "no traces in folder", files={"ranks/.keep": ""}),
    BadInput(
        "trace-folder-without-traces",
        summarize("{tmp}/run"),
        "no traces in folder",
        files={"run/trace_summary.json": "{}", "run/roofline.json": "{}"},
    ),
    BadInput(
        "trace-folder-with-duplicate-ranks",
        summarize("{tmp}/mixed"),
        "are both rank 0: a folder holds one trace per rank of one run",
        files={"mixed/rank-0.a.pt.trace.json": trace_event(0), "mixed/rank-1.b.pt.trace.json": trace_event(0)},
    ),
    BadInput(
        "trace-record-duplicate-ranks",
        summarize("{tmp}/a.json", "{tmp}/b.json", "--record", "--results-dir", "{tmp}/results"),
        "are both rank 3: --record takes one trace per rank",
        files={"a.json": trace_event(3), "b.json": trace_event(3)},
    ),
    BadInput(
        "trace-rank-as-text",
        summarize("{tmp}/rank-2.json"),
        "distributedInfo.rank is 'two', not a rank; expected an integer from 0 to 1048575",
        files={"rank-2.json": trace_event("two")},
    ),
    BadInput(
        "trace-rank-negative",
        summarize("{tmp}/rank-2.json"),
        "distributedInfo.rank is -1, not a rank",
        files={"rank-2.json": trace_event(-1)},
    ),
    BadInput(
        "trace-rank-a-bool",
        summarize("{tmp}/t.json"),
        "distributedInfo.rank is True, not a rank",
        files={"t.json": trace_event(True)},
    ),
    BadInput(
        "trace-rank-huge",
        summarize("{tmp}/t.json"),
        "distributedInfo.rank is 1e+300, not a rank",
        files={"t.json": trace_event(1e300)},
    ),
    BadInput("trace-top-zero", summarize("{tmp}/t.json", "--top", "0"), "argument --top: 0 is below 1"),
    BadInput("trace-top-negative", summarize("{tmp}/t.json", "--top", "-3"), "argument --top: -3 is below 1"),
    BadInput("trace-top-word", summarize("{tmp}/t.json", "--top", "ten"), "'ten' is not a whole number"),
    BadInput("trace-top-fraction", summarize("{tmp}/t.json", "--top", "2.5"), "'2.5' is not a whole number"),
]


def _file_in_the_way(tmp: Path) -> None:
    (tmp / "afile").write_text("a file, not a folder\n")


STACK_CASES = [
    BadInput(
        "stack-down-state-dir-under-a-file",
        ("stack", "down"),
        "afile is a file, not a folder; point FLEETBENCH_STATE_DIR at a folder",
        env={"FLEETBENCH_STATE_DIR": "{tmp}/afile/state"},
        prepare=_file_in_the_way,
    ),
    BadInput(
        "stack-up-state-dir-under-a-file",
        ("stack", "up"),
        "afile is a file, not a folder",
        env={"FLEETBENCH_STATE_DIR": "{tmp}/afile/state"},
        prepare=_file_in_the_way,
    ),
    BadInput(
        "stack-status-port-word",
        ("stack", "status"),
        "FLEETBENCH_PROMETHEUS_PORT='prom' is not accepted; use a port number in 1-65535",
        env={"FLEETBENCH_PROMETHEUS_PORT": "prom"},
    ),
    BadInput(
        "stack-up-port-zero",
        ("stack", "up"),
        "FLEETBENCH_PUSHGATEWAY_PORT='0' is not accepted",
        env={"FLEETBENCH_PUSHGATEWAY_PORT": "0", "FLEETBENCH_STATE_DIR": "{tmp}/state"},
    ),
    BadInput(
        "stack-up-superscript-port",
        ("stack", "up"),
        "FLEETBENCH_PROMETHEUS_PORT='⁹⁰⁹⁰' is not accepted",
        env={"FLEETBENCH_PROMETHEUS_PORT": "⁹⁰⁹⁰", "FLEETBENCH_STATE_DIR": "{tmp}/state"},
    ),
    BadInput(
        "stack-up-one-port-for-both",
        ("stack", "up"),
        "are both 19555; Prometheus and the Pushgateway need a port each",
        env={
            "FLEETBENCH_PROMETHEUS_PORT": "19555",
            "FLEETBENCH_PUSHGATEWAY_PORT": "19555",
            "FLEETBENCH_STATE_DIR": "{tmp}/state",
        },
    ),
]

IMAGES_CASES = [
    BadInput("images-build-bad-variant", ("images", "build", "--variant", "tpu"), "invalid choice: 'tpu'"),
    BadInput("images-run-bad-variant", ("images", "run", "trainer", "--variant", "rocm"), "invalid choice: 'rocm'"),
    BadInput("images-build-unknown-image", ("images", "build", "trainr", "--variant", "cpu"), "unknown image 'trainr'"),
    BadInput("images-run-unknown-image", ("images", "run", "nosuch", "--", "probe"), "unknown image 'nosuch'"),
    BadInput("images-run-a-service", ("images", "run", "grafana"), "image 'grafana' is a service, not a benchmark"),
    BadInput(
        "images-run-pushgateway-not-http",
        ("images", "run", "trainer", "--pushgateway", "127.0.0.1:9091", "--", "probe"),
        "--pushgateway '127.0.0.1:9091' is not accepted",
    ),
    BadInput(
        "images-run-pushgateway-with-space",
        ("images", "run", "trainer", "--pushgateway", "http://gw :9091"),
        "--pushgateway 'http://gw :9091' is not accepted: must not carry spaces",
    ),
    BadInput(
        "images-run-pushgateway-from-env",
        ("images", "run", "profiler", "--", "probe"),
        "$FLEETBENCH_PUSHGATEWAY 'ftp://gw' is not accepted",
        env={"FLEETBENCH_PUSHGATEWAY": "ftp://gw"},
    ),
    BadInput(
        "images-list-bad-namespace",
        ("images", "list", "--namespace", "Fleet Bench"),
        "image namespace 'Fleet Bench' is not accepted",
    ),
]

CLUSTER_CASES = [
    BadInput("cluster-nodes-zero", ("cluster", "up", "--nodes", "0"), "--nodes 0 is not accepted; use 1-16"),
    BadInput("cluster-nodes-too-many", ("cluster", "up", "--nodes", "17"), "--nodes 17 is not accepted; use 1-16"),
    BadInput("cluster-nodes-negative", ("cluster", "up", "--nodes", "-2"), "--nodes -2 is not accepted"),
    BadInput("cluster-nodes-word", ("cluster", "up", "--nodes", "three"), "invalid int value: 'three'"),
]

CASES: list[BadInput] = [
    *INVENTORY_CASES,
    *PLAYBOOK_CASES,
    *TRACE_CASES,
    *STACK_CASES,
    *IMAGES_CASES,
    *CLUSTER_CASES,
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    result = check(case, tmp_path / "work", tmp_path / "home")
    assert "\x1b" not in result.stderr + result.stdout, "an ANSI escape reached a pipe"
