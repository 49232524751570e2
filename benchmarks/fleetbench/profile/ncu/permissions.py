"""Who may read the GPU performance counters on this host, from the NVIDIA driver's own parameters.

Nsight Compute reads hardware counters through the driver. The driver option
`NVreg_RestrictProfilingToAdminUsers` (1 by default) decides who may: the loaded driver reports it as
`RmProfilingAdminOnly: 0|1` in /proc/driver/nvidia/params. With 1, only an admin may profile; in a
container that means root inside it *with* CAP_SYS_ADMIN added (Docker grants added capabilities to
root's effective set only), never --privileged. With 0, any user may, so ncu runs as the image's
non-root user with no added capability.

`read_counter_permissions(path)` turns that file into one of four states, each with a one-line
explanation, what the site should do, and how to start an ncu container there; `fleetbench ncu
permissions [--json]` prints it, and the deploy's profiler role runs that command on every profiler
host before it starts ncu.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from fleetbench import jsonio

DEFAULT_PARAMS_PATH = Path("/proc/driver/nvidia/params")
PARAMETER = "RmProfilingAdminOnly"
DRIVER_OPTION = "NVreg_RestrictProfilingToAdminUsers"
MODPROBE_LINE = f"options nvidia {DRIVER_OPTION}=0"
_LINE = re.compile(rf"^\s*{PARAMETER}\s*:\s*(?P<value>\S*)\s*$", re.MULTILINE)


class CounterAccess(StrEnum):
    """The driver's counter permission: anyone, admins only, no driver at all, or not known."""

    UNRESTRICTED = "unrestricted"
    ADMIN_ONLY = "admin_only"
    NO_DRIVER = "no_driver"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class NcuContainer:
    """How to start an ncu container on the host: as root with these capabilities, or as the image's user."""

    root: bool
    capabilities: tuple[str, ...]

    def describe(self) -> str:
        """`root with CAP_SYS_ADMIN` or `the image's non-root user, no added capability`."""
        if not self.root:
            return "the image's non-root user, no added capability"
        return "root with " + ", ".join(f"CAP_{cap}" for cap in self.capabilities) + " added (never --privileged)"


AS_ADMIN = NcuContainer(root=True, capabilities=("SYS_ADMIN",))
AS_USER = NcuContainer(root=False, capabilities=())
LIFT_RESTRICTION = (
    f"to profile without root, let every user read the counters: put the line '{MODPROBE_LINE}' in "
    "/etc/modprobe.d/nvidia-profiling.conf, then reload the nvidia module (or reboot)"
)


@dataclass(frozen=True)
class CounterPermissions:
    """The counter permission of a host: its state, the file read, why, and what the site should do."""

    state: CounterAccess
    params_path: Path
    explanation: str
    action: str

    @property
    def container(self) -> NcuContainer | None:
        """How an ncu container must start here; None without a driver (ncu cannot run at all).

        Not knowing the state counts as restricted: root with CAP_SYS_ADMIN works under both settings.
        """
        if self.state is CounterAccess.NO_DRIVER:
            return None
        return AS_USER if self.state is CounterAccess.UNRESTRICTED else AS_ADMIN

    def to_dict(self) -> dict[str, object]:
        """The JSON form `fleetbench ncu permissions --json` prints (the deploy role reads it)."""
        container = self.container
        return {
            "state": self.state.value,
            "params_path": str(self.params_path),
            "explanation": self.explanation,
            "action": self.action,
            "ncu_possible": container is not None,
            "ncu_container": None
            if container is None
            else {"root": container.root, "capabilities": list(container.capabilities)},
        }

    def to_json(self) -> str:
        """`to_dict` as one line of JSON."""
        return jsonio.dumps(self.to_dict(), sort_keys=True)

    def report(self) -> str:
        """The human form: the state, why, how ncu must run, and what to do."""
        container = self.container
        how = container.describe() if container is not None else "cannot run here (no NVIDIA driver)"
        return (
            f"GPU performance counters: {self.state.value}\n"
            f"  {self.explanation}\n"
            f"  ncu in a container: {how}\n"
            f"  what to do: {self.action}"
        )


def parameter_value(text: str) -> str | None:
    """The value of the `RmProfilingAdminOnly:` line of the driver's params text, None when it has none."""
    match = _LINE.search(text)
    return match.group("value") if match else None


def _from_value(value: str, path: Path) -> CounterPermissions:
    if value == "0":
        return CounterPermissions(
            CounterAccess.UNRESTRICTED,
            path,
            f"the NVIDIA driver lets every user read the GPU performance counters ({PARAMETER}: 0, {DRIVER_OPTION}=0)",
            "nothing: ncu runs as the suite's non-root user with no added capability",
        )
    if value.isdigit():  # the driver reads the option as a boolean: any other number restricts
        return CounterPermissions(
            CounterAccess.ADMIN_ONLY,
            path,
            f"the NVIDIA driver lets only admin users read the GPU performance counters ({PARAMETER}: {value}: "
            f"{DRIVER_OPTION} is on, the driver's default)",
            f"ncu runs as root inside its container with CAP_SYS_ADMIN added; {LIFT_RESTRICTION}",
        )
    return _unknown(path, f"says {PARAMETER}: {value!r}, which is not a number")


def _unknown(path: Path, why: str) -> CounterPermissions:
    return CounterPermissions(
        CounterAccess.UNKNOWN,
        path,
        f"{path} {why}: the counter permission cannot be told",
        "ncu is treated as restricted (root with CAP_SYS_ADMIN, which works either way); check the driver "
        f"with `grep {PARAMETER} {path}`",
    )


def read_counter_permissions(params_path: Path = DEFAULT_PARAMS_PATH) -> CounterPermissions:
    """Read the NVIDIA driver's params file (default /proc/driver/nvidia/params) into a CounterPermissions.

    A missing file means no NVIDIA driver is loaded (`no_driver`); a file that cannot be read, or that
    has no usable `RmProfilingAdminOnly` line, is `unknown`. Never raises for the file's sake.
    """
    try:
        text = params_path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return CounterPermissions(
            CounterAccess.NO_DRIVER,
            params_path,
            f"{params_path} does not exist: no NVIDIA driver is loaded on this host",
            "Nsight Compute needs an NVIDIA GPU and its driver: install and load the driver on GPU hosts, "
            "or do not ask for ncu on CPU hosts",
        )
    except OSError as exc:
        return _unknown(params_path, f"cannot be read ({exc.strerror or exc})")
    value = parameter_value(text)
    if value is None:
        return _unknown(params_path, f"has no {PARAMETER} line (a driver too old to report it?)")
    return _from_value(value, params_path)
