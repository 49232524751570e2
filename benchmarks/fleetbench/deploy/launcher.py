"""`fleetbench deploy PLAYBOOK --inventory DIR`: run a playbook of deploy/ through ansible-runner.

Before anything runs, the inventory, --limit and --tags are checked as Ansible reads them
(`deploy.inventory`). Live progress per host comes from the runner's events; the end is a per-host
table of ok/changed/failed/unreachable; the runner's artifacts stay in
results/<run_id>/deploy/artifacts/<playbook>-<time>/. Ansible's own output is never coloured: it
reaches the user only through those tables and one-line errors, and the artifacts stay plain text.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetbench.deploy.inventory import (
    check_flags,
    check_inventory,
    check_tags,
    check_targets,
    deploy_tags,
    parse_listing,
    parse_plays,
    plain,
    precheck,
    run_ansible,
)
from fleetbench.envvars import DEPLOY_DIR_ENV
from fleetbench.errors import UserError

STAT_KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable", "skipped": "skipped"}


def deploy_dir() -> Path:
    """deploy/ of the source tree (FLEETBENCH_DEPLOY_DIR overrides for installed copies); UserError when
    it is not a folder with ansible.cfg and playbooks."""
    override = os.environ.get(DEPLOY_DIR_ENV)
    root = Path(override) if override else Path(__file__).resolve().parents[3] / "deploy"
    source = f" ({DEPLOY_DIR_ENV})" if override else ""
    hint = f"point {DEPLOY_DIR_ENV} at the deploy/ folder of a fleetbench checkout"
    if not root.is_dir():
        raise UserError(f"deploy folder {root}{source} is not a folder; {hint}")
    if not (root / "ansible.cfg").is_file() or not playbooks(root):
        raise UserError(f"deploy folder {root}{source} holds no ansible.cfg and playbooks (*.yml); {hint}")
    return root


def playbooks(root: Path) -> list[str]:
    """The playbook names in `root` (every *.yml but requirements.yml), sorted."""
    return sorted(p.stem for p in root.glob("*.yml") if p.name != "requirements.yml")


def resolve_playbook(name: str, root: Path) -> Path:
    """The playbook file for `name` (with or without .yml); UserError naming the accepted ones."""
    stem = name.removesuffix(".yml")
    if stem not in playbooks(root):
        raise UserError(f"unknown playbook {name!r}; accepted: {', '.join(playbooks(root))}")
    return root / f"{stem}.yml"


def resolve_inventory(path: Path) -> Path:
    """The inventory as an absolute path; UserError when it is missing, holds no hosts file, is not a
    readable file or is empty."""
    precheck(path, str(path))
    return path.resolve()


def _vaulted(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(14) == b"$ANSIBLE_VAULT"
    except OSError:
        return False


def vaulted_files(inventory: Path) -> list[Path]:
    """The inventory's files encrypted with ansible-vault."""
    files = [inventory] if inventory.is_file() else [p for p in inventory.rglob("*") if p.is_file()]
    return [p for p in files if _vaulted(p)]


def check_vault(inventory: Path, vault_password_file: Path | None) -> None:
    """Refuse a missing password file, or vaulted files with no password given (flag or ANSIBLE_VAULT_PASSWORD_FILE)."""
    locked = vaulted_files(inventory)
    if vault_password_file is not None and not vault_password_file.is_file():
        raise UserError(f"vault password file {vault_password_file} does not exist")
    if locked and vault_password_file is None and not os.environ.get("ANSIBLE_VAULT_PASSWORD_FILE"):
        raise UserError(
            f"{locked[0]} is vault-encrypted and no vault password was given: "
            "pass --vault-password-file FILE or set ANSIBLE_VAULT_PASSWORD_FILE"
        )


@dataclass
class HostProgress:
    """One host's task counts so far and the task it last reported."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    last: str = ""


@dataclass
class DeployResult:
    """How a playbook run ended: runner status and rc, per-host counts, the artifacts folder, failures."""

    status: str
    rc: int
    hosts: dict[str, dict[str, int]]
    artifacts: Path
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when ansible-playbook succeeded and no host failed or was unreachable."""
        return self.rc == 0 and not any(h["failed"] or h["unreachable"] for h in self.hosts.values())


class DeployProgress:
    """What a playbook run has done so far, fed by ansible-runner events: each host's counts and last task."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostProgress] = {}
        self.task = ""
        self.failures: list[str] = []

    def handle(self, event: dict[str, Any]) -> bool:
        """Count one ansible-runner event; returns True so that the runner also keeps it in its artifacts."""
        data = event.get("event_data", {})
        kind = event.get("event", "")
        if kind == "playbook_on_task_start":
            self.task = data.get("task", "")
        host = data.get("host")
        if not host:
            return True
        progress = self.hosts.setdefault(host, HostProgress())
        result = data.get("res", {}) or {}
        if kind == "runner_on_ok":
            progress.ok += 1
            progress.changed += bool(result.get("changed"))
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            progress.failed += 1
            self.failures.append(f"{host}: {data.get('task', '')}: {_message(result)}")
        elif kind == "runner_on_unreachable":
            progress.unreachable += 1
            self.failures.append(f"{host}: unreachable: {_message(result)}")
        elif kind == "runner_on_skipped":
            progress.skipped += 1
        progress.last = data.get("task", progress.last)
        return True


def _message(result: dict[str, Any]) -> str:
    failed_items = [item for item in result.get("results") or [] if isinstance(item, dict) and item.get("failed")]
    if failed_items:  # a loop: the first failed item says more than "One or more items failed"
        result = failed_items[0]
    text = plain(str(result.get("msg") or result.get("stderr") or result.get("reason") or ""))
    return " ".join(text.split())[:300]


def ansible_tool(name: str) -> str:
    """An ansible command (ansible-playbook, ansible-inventory) beside this Python (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise UserError(f"{name} is not installed: `make setup` installs ansible into .venv")
    return found


def ansible_playbook() -> str:
    """ansible-playbook beside this Python (the venv's), else on PATH."""
    return ansible_tool("ansible-playbook")


def ansible_env(root: Path) -> dict[str, str]:
    """The environment of every ansible command: deploy/'s ansible.cfg and roles, no colours, the venv's
    ansible first on PATH (whether or not the venv is activated)."""
    return {
        "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(root / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "PATH": f"{Path(ansible_playbook()).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@dataclass(frozen=True)
class Selection:
    """What a deploy runs on and runs: --limit, --tags, --skip-tags (None: not given)."""

    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None


def validate(book: Path, inventory: Path, label: str, vault_password_file: Path | None, selection: Selection) -> None:
    """Check the inventory, --limit and --tags as Ansible reads them (see `deploy.inventory`), running
    nothing on any host; UserError naming what is wrong."""
    check_flags(selection.limit, selection.tags, selection.skip_tags)
    root = book.parent
    env = ansible_env(root)
    vault = ["--vault-password-file", str(vault_password_file.resolve())] if vault_password_file else []
    listed = run_ansible([ansible_tool("ansible-inventory"), "-i", str(inventory), "--list", *vault], env, root)
    found = parse_listing(label, inventory, listed)
    check_inventory(found)
    argv = [ansible_playbook(), "--list-hosts", "--list-tags", "-i", str(inventory), book.name, *vault]
    if selection.limit is not None:
        argv += ["--limit", selection.limit]
    planned = run_ansible(argv, env, root)
    plays = parse_plays(planned.stdout)
    check_targets(found, book.stem, plays, planned, selection.limit)
    check_tags(book.stem, plays, selection.tags, selection.skip_tags, deploy_tags(root))


def run_playbook(  # noqa: PLR0913 - one keyword per `fleetbench deploy` flag, which the CLI passes by name
    playbook: str,
    inventory: Path,
    artifacts_dir: Path,
    *,
    watch: Callable[[DeployProgress], None] | None = None,
    check: bool = False,
    extra_vars: dict[str, str] | None = None,
    limit: str | None = None,
    vault_password_file: Path | None = None,
    tags: str | None = None,
    skip_tags: str | None = None,
) -> DeployResult:
    """Run `playbook` on `inventory` through ansible-runner; `watch` sees the progress after each event.

    The runner's artifacts go under `artifacts_dir`. Raises UserError when ansible-playbook did not run
    at all (no stats); a run in which hosts failed returns normally (see DeployResult.ok).
    """
    import ansible_runner

    root = deploy_dir()
    book = resolve_playbook(playbook, root)
    label = str(inventory)
    inventory = resolve_inventory(inventory)
    check_vault(inventory, vault_password_file)
    validate(book, inventory, label, vault_password_file, Selection(limit, tags, skip_tags))
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    cmdline = _cmdline(check, vault_password_file, tags, skip_tags)
    # One folder per playbook run, named so that several deploys under one run id (edge, then
    # collect) stay apart and read in order: artifacts/<playbook>-<UTC time>/.
    ident = f"{book.stem}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    view = DeployProgress()

    def on_event(event: dict[str, Any]) -> bool:
        view.handle(event)
        if watch is not None:
            watch(view)
        return True

    runner = ansible_runner.run(
        private_data_dir=str(artifacts_dir),
        ident=ident,
        project_dir=str(root),
        playbook=str(book),
        inventory=str(inventory),
        envvars=ansible_env(root),
        extravars=extra_vars or {},
        cmdline=" ".join(cmdline) or None,
        limit=limit,
        event_handler=on_event,
        quiet=True,
    )
    stats = runner.stats or {}
    if not stats and runner.rc != 0:
        tail = " ".join(plain(runner.stdout.read() if runner.stdout else "").split())[-400:]
        raise UserError(
            f"ansible-playbook {book.name} did not run (rc {runner.rc}): {tail or runner.status}", exit_code=1
        )
    return DeployResult(
        runner.status, runner.rc, _host_counts(stats), artifacts_dir / "artifacts" / ident, view.failures
    )


def _cmdline(check: bool, vault_password_file: Path | None, tags: str | None, skip_tags: str | None) -> list[str]:
    """The ansible-playbook flags ansible-runner takes as its `cmdline`."""
    cmdline = []
    if check:
        cmdline.append("--check")
    if vault_password_file is not None:
        cmdline += ["--vault-password-file", str(vault_password_file.resolve())]
    if tags:
        cmdline += ["--tags", tags]
    if skip_tags:
        cmdline += ["--skip-tags", skip_tags]
    return cmdline


def _host_counts(stats: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The runner's stats (count per host under each stat) as counts per host under our column names."""
    hosts: dict[str, dict[str, int]] = {}
    for key, column in STAT_KEYS.items():
        for host, count in (stats.get(key) or {}).items():
            hosts.setdefault(host, dict.fromkeys(STAT_KEYS.values(), 0))[column] = count
    return hosts
