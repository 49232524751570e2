"""Deploy: playbooks lint clean and parse, the launcher refuses bad input clearly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from fleetbench.deploy.launcher import playbooks

DEPLOY = REPO / "deploy"
VENV_BIN = Path(sys.executable).parent
PLAYBOOKS = playbooks(DEPLOY)


def test_the_playbook_set_is_site_plus_one_per_job() -> None:
    assert set(PLAYBOOKS) == {
        "site",
        "monitoring",
        "images",
        "train",
        "profile",
        "edge",
        "collect",
        "slurm",
        "preflight",
    }


def test_ansible_lint_production_profile_is_clean() -> None:
    result = subprocess.run(
        [str(VENV_BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in result.stderr + result.stdout


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook: str) -> None:
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "--syntax-check", "-i", "inventories/example", f"{playbook}.yml"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_CONFIG": str(DEPLOY / "ansible.cfg")},
    )
    assert result.returncode == 0, result.stderr
    assert f"playbook: {playbook}.yml" in result.stdout


def test_the_edge_playbook_runs_edge_llm_after_edge_run_and_brings_the_records_home() -> None:
    """Both device roles run `edge llm` after `edge run` (one run id), then the collect role fetches the run."""
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "--list-tasks", "-i", "inventories/example", "edge.yml"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_CONFIG": str(DEPLOY / "ansible.cfg")},
    )
    assert result.returncode == 0, result.stderr
    tasks = [line.strip().split("\t")[0] for line in result.stdout.splitlines() if ": " in line and "TAGS" in line]
    for role in ("edge_vulkan", "edge_metal"):
        mine = [task for task in tasks if task.startswith(role + " :")]
        assert mine.index(f"{role} : Run the edge kernels" + (" on Metal" if role == "edge_metal" else "")) < mine.index(
            f"{role} : Run the edge LLM runtimes side by side" + (" (MLX on Metal, llama.cpp, ExecuTorch)" if role == "edge_metal" else "") + " into the same run"
        )  # fmt: skip
    assert tasks[-1] == "collect : Fetch them to the controller"
    metal = (DEPLOY / "roles" / "edge_metal" / "defaults" / "main.yml").read_text()
    extras = set(__import__("tomllib").loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert "edge_metal_extras: [llm, mobile]" in metal and {"llm", "mobile"} <= extras


def test_requirements_pin_every_collection_the_roles_use() -> None:
    import yaml

    pinned = {c["name"]: c["version"] for c in yaml.safe_load((DEPLOY / "requirements.yml").read_text())["collections"]}
    used = set()
    for path in DEPLOY.rglob("*.yml"):
        for word in path.read_text().split():
            if word.count(".") >= 2 and word.rstrip(":").split(".")[0] in {"community", "ansible"}:
                used.add(".".join(word.rstrip(":").split(".")[:2]))
    assert used - {"ansible.builtin"} <= set(pinned), used
    assert all(version.count(".") == 2 for version in pinned.values())


def test_no_grafana_password_default_in_the_repository() -> None:
    for path in DEPLOY.rglob("*.yml"):
        for line in path.read_text().splitlines():
            if "grafana_admin_password:" in line and "lookup(" not in line and line.strip()[0] != "#":
                assert line.split(":", 1)[1].strip() in {"", ">-"}, f"{path}: {line}"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["deploy", "nope", "--inventory", "deploy/inventories/example"],
            "unknown playbook 'nope'; accepted: collect,",
        ),
        (
            ["deploy", "site", "--inventory", "deploy/inventories/missing"],
            "inventory deploy/inventories/missing does not exist",
        ),
        (["deploy", "site", "--inventory", "deploy/inventories/example", "-e", "novalue"], "--extra-vars 'novalue'"),
        (
            ["deploy", "site", "--inventory", "deploy/inventories/example", "--run-id", "../x"],
            "run id '../x' is not accepted",
        ),
        (
            ["deploy", "site", "--inventory", "deploy/inventories/example", "--vault-password-file", "/nonexistent"],
            "vault password file /nonexistent does not exist",
        ),
        (["cluster", "up", "--nodes", "99"], "--nodes 99 is not accepted; use 1-16"),
    ],
)
def test_bad_input_is_one_clear_line(args: list[str], fragment: str, tmp_path: Path) -> None:
    result = run_cli(*args, "--results-dir", str(tmp_path), cwd=REPO) if args[0] == "deploy" else run_cli(*args)
    assert result.returncode == 2, result
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_vaulted_inventory_without_a_password_is_refused(tmp_path: Path) -> None:
    import shutil

    inventory = tmp_path / "inventory"
    shutil.copytree(DEPLOY / "inventories" / "example", inventory)
    secret = tmp_path / "vault.yml"
    secret.write_text("vault_grafana_admin_password: s3cret\n")
    password = tmp_path / "password"
    password.write_text("correct horse\n")
    encrypted = subprocess.run(
        [
            str(VENV_BIN / "ansible-vault"),
            "encrypt",
            "--vault-password-file",
            str(password),
            str(secret),
            "--output",
            str(inventory / "group_vars" / "vault.yml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert encrypted.returncode == 0, encrypted.stderr
    result = run_cli("deploy", "site", "--inventory", str(inventory), "--results-dir", str(tmp_path / "results"))
    assert result.returncode == 2
    assert "vault.yml is vault-encrypted and no vault password was given" in result.stderr
    assert not (tmp_path / "results").exists()
