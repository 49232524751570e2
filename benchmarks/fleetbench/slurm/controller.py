"""Where the Slurm commands run: on the controller over SSH, or here on a login node.

The controller is the one host of the inventory's `slurm_controller` group, reached as Ansible
reaches it: `ansible-inventory --list` resolves the inventory (group_vars and host_vars too), and
its ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file and
ansible_ssh_common_args become the ssh command line (batch mode: never a password prompt).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetbench.errors import UserError

SSH_UNREACHABLE = 255  # ssh's own exit status: it could not connect or log in
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class Controller:
    """A place to run Slurm commands: `ssh` (the argv up to the remote command) or here when empty."""

    name: str
    ssh: tuple[str, ...] = ()

    @property
    def is_local(self) -> bool:
        """Whether the commands run on this machine (a login node)."""
        return not self.ssh

    def describe(self) -> str:
        """How a message names it: `node1 (root@127.0.0.1:2222)`, or `this machine`."""
        if self.is_local:
            return "this machine"
        target = next((word for word in self.ssh if "@" in word), self.name)
        port = self.ssh[self.ssh.index("-p") + 1] if "-p" in self.ssh else "22"
        return f"{self.name} ({target}:{port})"

    def run(
        self, argv: Sequence[str], *, stdin: str | None = None, timeout: float = 60, binary: bool = False
    ) -> subprocess.CompletedProcess[Any]:
        """Run `argv` there; the finished process whatever its status, except that a controller that
        cannot be reached (ssh's 255, a timeout, no ssh) is a UserError."""
        command = [*self.ssh, shlex.join(argv)] if self.ssh else list(argv)
        try:
            done = subprocess.run(
                command,
                input=stdin.encode() if (binary and stdin is not None) else stdin,
                capture_output=True,
                text=not binary,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise UserError(f"{argv[0]} on {self.describe()} did not answer within {timeout:.0f} s") from None
        except FileNotFoundError as exc:
            what = "ssh" if self.ssh else argv[0]
            raise UserError(f"{what} is not installed here ({exc.strerror}); {self._hint()}") from None
        if self.ssh and done.returncode == SSH_UNREACHABLE:
            err = done.stderr.decode(errors="replace") if binary else done.stderr
            last = (err.strip().splitlines() or ["no answer"])[-1]
            raise UserError(f"cannot reach the Slurm controller {self.describe()} over SSH: {last}")
        return done

    def check(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float = 60) -> str:
        """The stdout of `argv` there; a UserError with its last line of stderr when it fails."""
        done = self.run(argv, stdin=stdin, timeout=timeout)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise UserError(f"{shlex.join(argv[:2])} on {self.describe()} failed: {last}")
        return str(done.stdout)

    def _hint(self) -> str:
        return "install openssh-client" if self.ssh else "run on a Slurm login node, or pass --inventory"


def local() -> Controller:
    """Slurm's commands on this machine (a login node of the cluster)."""
    if not shutil.which("sbatch"):
        raise UserError("--local: sbatch is not on PATH here; run on a Slurm login node, or pass --inventory DIR")
    return Controller("localhost")


def ansible_inventory() -> str:
    """ansible-inventory beside this Python (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / "ansible-inventory"
    found = str(beside) if beside.exists() else shutil.which("ansible-inventory")
    if not found:
        raise UserError("ansible-inventory is not installed: `make setup` installs ansible into .venv")
    return found


INVENTORY_ACCEPTED = "accepted: an Ansible inventory file or folder with a slurm_controller group"


def read_inventory(path: Path) -> dict[str, Any]:
    """`ansible-inventory --list` of `path`: groups and every host's variables."""
    if not path.exists():
        leads_nowhere = " (a symbolic link that leads nowhere)" if path.is_symlink() else ""
        raise UserError(
            f"inventory {path} does not exist{leads_nowhere}: `make cluster-up SLURM=1` makes the local cluster's, "
            "--inventory DIR names your site's, --local runs on a Slurm login node"
        )
    if not (path.is_file() or path.is_dir()):  # a FIFO would keep ansible-inventory waiting for a writer
        raise UserError(
            f"inventory {path} is not a regular file or folder (a FIFO, socket or device); {INVENTORY_ACCEPTED}"
        )
    try:
        done = subprocess.run(
            [ansible_inventory(), "-i", str(path), "--list"], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"inventory {path}: ansible-inventory gave no answer in 120 s; {INVENTORY_ACCEPTED}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"inventory {path} does not read: {last}")
    try:
        data = json.loads(done.stdout)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise UserError(f"inventory {path}: ansible-inventory printed no listing; {INVENTORY_ACCEPTED}")
    return data


def from_inventory(path: Path) -> Controller:
    """The controller of the inventory at `path` (its slurm_controller group), reached over SSH."""
    data = read_inventory(path)
    hosts = (data.get("slurm_controller") or {}).get("hosts") or []
    if len(hosts) != 1:
        raise UserError(
            f"inventory {path} has {len(hosts)} hosts in group slurm_controller; accepted: exactly one "
            "(`make cluster-up SLURM=1` writes such an inventory)"
        )
    name = hosts[0]
    hostvars = data.get("_meta", {}).get("hostvars", {}).get(name, {})
    return Controller(name, tuple(ssh_command(name, hostvars)))


def ssh_command(name: str, hostvars: dict[str, Any]) -> list[str]:
    """The ssh argv (without the remote command) that reaches host `name` as Ansible would."""
    address = str(hostvars.get("ansible_host", name))
    user = hostvars.get("ansible_user")
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "LogLevel=ERROR"]
    if hostvars.get("ansible_port"):
        argv += ["-p", str(hostvars["ansible_port"])]
    if hostvars.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(hostvars["ansible_ssh_private_key_file"]), "-o", "IdentitiesOnly=yes"]
    argv += shlex.split(str(hostvars.get("ansible_ssh_common_args") or ""))
    argv.append(f"{user}@{address}" if user else address)
    return argv
