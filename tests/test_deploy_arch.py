"""The deploy picks each host's build of the edge image by its architecture (`ansible_architecture`):
the roles' own defaults and tasks, run by ansible-playbook on stand-in hosts of three architectures
(local connection, no facts gathered, nothing started), against the tags `fleetbench images build` gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from fleetbench.images.specs import ARCHES, IMAGES, arch_of_machine

DEPLOY = REPO / "deploy"
VENV_BIN = Path(sys.executable).parent
INVENTORY = """
all:
  vars: {{ansible_connection: local, ansible_python_interpreter: "{python}", fleetbench_run_id: arch-test}}
  hosts:
    arm: {{ansible_architecture: aarch64}}
    x86: {{ansible_architecture: x86_64}}
    riscv: {{ansible_architecture: riscv64}}
"""
# The roles' defaults as the roles load them; each host writes the references it would pull or run.
PLAYBOOK = """
- name: Each host's image references, as the images and edge_vulkan roles choose them
  hosts: arm,x86
  gather_facts: false
  vars_files:
    - {deploy}/roles/fleetbench/defaults/main.yml
    - {deploy}/roles/images/defaults/main.yml
    - {deploy}/roles/edge_vulkan/defaults/main.yml
  tasks:
    - name: The images role's reference of each image
      ansible.builtin.copy:
        dest: "{out}/{{{{ inventory_hostname }}}}-{{{{ item }}}}"
        content: "{{{{ fleetbench_images[item] }}}}:{{{{ images_item_tag }}}}"
        mode: "0644"
      loop: [edge_vulkan, trainer]
    - name: The image the edge_vulkan role runs
      ansible.builtin.copy:
        dest: "{out}/{{{{ inventory_hostname }}}}-run"
        content: "{{{{ edge_vulkan_image }}}}"
        mode: "0644"

- name: A host no edge image is built for stops at the choice, before any image is looked for
  hosts: riscv
  gather_facts: false
  roles:
    - role: images
      vars:
        images_wanted: [edge_vulkan]
"""


def test_the_arch_suffixes_are_the_tags_images_build_gives() -> None:
    defaults = yaml.safe_load((DEPLOY / "roles/fleetbench/defaults/main.yml").read_text())
    suffixes = defaults["fleetbench_arch_tag_suffix"]
    assert set(suffixes) == set(ARCHES.values())
    for machine, suffix in suffixes.items():
        assert suffix == IMAGES["edge-vulkan"].tag_suffix("cuda", arch_of_machine(machine))
    # Only images built for several architectures get a suffix: the others keep amd64's only tag.
    multi = {name.replace("_", "-") for name in defaults["fleetbench_multiarch_images"]}
    assert multi == {name for name, spec in IMAGES.items() if len(spec.arches) > 1}


def test_each_host_gets_the_build_of_its_architecture_and_another_stops_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "hosts.yml").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(PLAYBOOK.format(deploy=DEPLOY, out=out))
    done = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=tmp_path,
        env={
            **os.environ,
            "ANSIBLE_ROLES_PATH": str(DEPLOY / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        },
    )
    found = {path.name: path.read_text() for path in out.iterdir()}
    assert found == {
        "arm-edge_vulkan": "fleetbench/edge-vulkan:latest-arm64",
        "arm-trainer": "fleetbench/trainer:latest",  # amd64 only: no suffix, so no arm64 tag is invented
        "arm-run": "fleetbench/edge-vulkan:latest-arm64",
        "x86-edge_vulkan": "fleetbench/edge-vulkan:latest",
        "x86-trainer": "fleetbench/trainer:latest",
        "x86-run": "fleetbench/edge-vulkan:latest",
    }, done.stdout[-3000:]
    assert done.returncode != 0  # riscv failed, and only riscv
    assert "failed=0" in next(line for line in done.stdout.splitlines() if line.startswith("arm "))
    riscv = next(line for line in done.stdout.splitlines() if line.startswith("riscv "))
    assert "failed=1" in riscv and "Look for the images on the node" not in done.stdout, done.stdout[-2000:]
    assert (
        "no edge_vulkan image is built for the architecture riscv64; accepted: x86_64, aarch64"
        in done.stdout + done.stderr
    )


@pytest.mark.parametrize("role", ["images", "edge_vulkan"])
def test_both_roles_check_the_architecture_before_they_touch_an_image(role: str) -> None:
    tasks = yaml.safe_load((DEPLOY / "roles" / role / "tasks/main.yml").read_text())
    first_image_task = next(i for i, t in enumerate(tasks) if any(k.startswith("community.docker.") for k in t))
    checks = [i for i, t in enumerate(tasks) if "ansible.builtin.assert" in t]
    assert checks and checks[0] < first_image_task
    assert "ansible_architecture in fleetbench_arch_tag_suffix" in tasks[checks[0]]["ansible.builtin.assert"]["that"]
