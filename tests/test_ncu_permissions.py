"""`fleetbench ncu permissions`: the NVIDIA driver's GPU counter permission, read from its params file.

The files are real files in a temporary folder, written as the driver writes /proc/driver/nvidia/params
(one `Name: value` line per parameter). The unreadable file is mode 000; root reads any file, so as root
that case reads it in a forked child that drops to the `nobody` user first.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.profile.ncu.permissions import (
    DEFAULT_PARAMS_PATH,
    CounterAccess,
    parameter_value,
    read_counter_permissions,
)

# The start of a real params file (driver 550), with the profiling line set per test.
PARAMS = """ResmanDebugLevel: 4294967295
RmLogonRC: 1
ModifyDeviceFiles: 1
DeviceFileUID: 0
DeviceFileGID: 0
DeviceFileMode: 438
InitializeSystemMemoryAllocations: 1
UsePageAttributeTable: 4294967295
EnableMSI: 1
RegisterPCIDriver: 1
EnablePCIeGen3: 0
MemoryPoolSize: 0
KMallocHeapMaxSize: 0
VMallocHeapMaxSize: 0
IgnoreMMIOCheck: 0
TCEBypassMode: 0
EnableStreamMemOPs: 0
EnableUserNUMAManagement: 1
NvLinkDisable: 0
RmProfilingAdminOnly: {value}
PreserveVideoMemoryAllocations: 0
EnableS0ixPowerManagement: 0
DynamicPowerManagement: 3
RegistryDwords: ""
"""


def params_file(folder: Path, value: str | None) -> Path:
    """A params file in `folder` with `RmProfilingAdminOnly: value`, or without that line (None)."""
    text = PARAMS.format(value=value) if value is not None else PARAMS.replace("RmProfilingAdminOnly: {value}\n", "")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "params"
    path.write_text(text)
    return path


def test_zero_lets_every_user_profile(tmp_path: Path) -> None:
    found = read_counter_permissions(params_file(tmp_path, "0"))
    assert found.state is CounterAccess.UNRESTRICTED
    assert found.container is not None and not found.container.root and found.container.capabilities == ()
    assert "RmProfilingAdminOnly: 0" in found.explanation


def test_one_restricts_to_admins_and_asks_for_root_with_sys_admin(tmp_path: Path) -> None:
    found = read_counter_permissions(params_file(tmp_path, "1"))
    assert found.state is CounterAccess.ADMIN_ONLY
    assert found.container is not None and found.container.root and found.container.capabilities == ("SYS_ADMIN",)
    # What the site can do instead: the driver option, where it goes and how it takes effect.
    assert "options nvidia NVreg_RestrictProfilingToAdminUsers=0" in found.action
    assert "/etc/modprobe.d/" in found.action and "reboot" in found.action


def test_no_file_means_no_driver_and_no_ncu(tmp_path: Path) -> None:
    found = read_counter_permissions(tmp_path / "driver" / "params")
    assert found.state is CounterAccess.NO_DRIVER
    assert found.container is None
    assert found.to_dict()["ncu_possible"] is False
    assert "no NVIDIA driver" in found.explanation and str(tmp_path / "driver" / "params") in found.explanation


def test_a_file_without_the_line_is_unknown_and_treated_as_restricted(tmp_path: Path) -> None:
    found = read_counter_permissions(params_file(tmp_path, None))
    assert found.state is CounterAccess.UNKNOWN
    assert "has no RmProfilingAdminOnly line" in found.explanation
    assert found.container is not None and found.container.root and found.container.capabilities == ("SYS_ADMIN",)


def test_a_value_that_is_not_a_number_is_unknown(tmp_path: Path) -> None:
    found = read_counter_permissions(params_file(tmp_path, "yes"))
    assert found.state is CounterAccess.UNKNOWN
    assert "'yes'" in found.explanation


def read_as_nobody(path: Path) -> dict[str, object]:
    """What `read_counter_permissions` finds when the `nobody` user reads `path`.

    A forked child drops to uid/gid 65534 and reports back through a pipe. It needs nothing from
    disk after the fork, so it works wherever the checkout and its virtual environment live
    (a 0700 clone folder that `nobody` could not enter included).
    """
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the forked child
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            with os.fdopen(write_end, "w") as out:
                out.write(read_counter_permissions(path).to_json())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        text = answer.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    found: dict[str, object] = json.loads(text)
    return found


def test_an_unreadable_file_is_unknown(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        path = params_file(tmp_path, "0")
        path.chmod(0)
        found = read_counter_permissions(path).to_dict()
    else:
        # Root reads a file whatever its mode: the mode-000 file is read as `nobody`, in a folder of
        # its own that `nobody` may enter (pytest's folders are 0700).
        with tempfile.TemporaryDirectory(prefix="fleetbench-params-") as folder:
            Path(folder).chmod(0o755)
            path = params_file(Path(folder), "0")
            path.chmod(0)
            found = read_as_nobody(path)
    assert found["state"] == "unknown"
    assert "cannot be read (Permission denied)" in str(found["explanation"])
    assert found["ncu_container"] == {"root": True, "capabilities": ["SYS_ADMIN"]}


def test_a_path_that_cannot_be_read_as_a_file_is_unknown(tmp_path: Path) -> None:
    folder = tmp_path / "params"
    folder.mkdir()  # read_text fails with an OSError other than "no such file", as an unreadable file does
    found = read_counter_permissions(folder)
    assert found.state is CounterAccess.UNKNOWN and "cannot be read" in found.explanation


def test_the_line_is_found_with_the_spacing_the_driver_uses() -> None:
    assert parameter_value("RmProfilingAdminOnly: 1\n") == "1"
    assert parameter_value("A: 2\n  RmProfilingAdminOnly :0  \nB: 3") == "0"
    assert parameter_value("NotRmProfilingAdminOnly: 1\nRmProfilingAdminOnlyX: 1\n") is None


def test_the_default_path_is_the_drivers_proc_file() -> None:
    assert Path("/proc/driver/nvidia/params") == DEFAULT_PARAMS_PATH


# --- the command, as a user (and the deploy role) runs it ---


@pytest.fixture
def permissions_json() -> Callable[[Path], dict[str, object]]:
    def run(path: Path) -> dict[str, object]:
        result = run_cli("ncu", "permissions", "--json", "--params", str(path), timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("\n") == 1  # one line: the role takes the line that starts with {
        parsed: dict[str, object] = json.loads(result.stdout)
        return parsed

    return run


def test_cli_json_for_each_state(tmp_path: Path, permissions_json: Callable[[Path], dict[str, object]]) -> None:
    zero = permissions_json(params_file(tmp_path / "zero", "0"))
    assert zero["state"] == "unrestricted"
    assert zero["ncu_possible"] is True and zero["ncu_container"] == {"root": False, "capabilities": []}

    one = permissions_json(params_file(tmp_path / "one", "1"))
    assert one["state"] == "admin_only"
    assert one["ncu_container"] == {"root": True, "capabilities": ["SYS_ADMIN"]}
    assert str(one["action"]).count("NVreg_RestrictProfilingToAdminUsers=0") == 1

    missing = permissions_json(tmp_path / "absent" / "params")
    assert missing["state"] == "no_driver" and missing["ncu_possible"] is False and missing["ncu_container"] is None
    assert missing["params_path"] == str(tmp_path / "absent" / "params")
    assert set(missing) == {"state", "params_path", "explanation", "action", "ncu_possible", "ncu_container"}


def test_cli_text_says_the_state_and_how_ncu_must_run(tmp_path: Path) -> None:
    result = run_cli("ncu", "permissions", "--params", str(params_file(tmp_path, "1")), timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "GPU performance counters: admin_only"
    assert "ncu in a container: root with CAP_SYS_ADMIN added (never --privileged)" in result.stdout
    assert "what to do:" in lines[-1]


def test_cli_without_params_reads_the_drivers_file() -> None:
    result = run_cli("ncu", "permissions", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["params_path"] == "/proc/driver/nvidia/params"
    expected = "no_driver" if not DEFAULT_PARAMS_PATH.exists() else found["state"]
    assert found["state"] == expected
