"""GPU node pre-flight: the parsers on stand-in outputs in the tools' layouts, the node check with those
commands on PATH, and the preflight play in Ansible's check mode against localhost (connection local),
which passes a good node and, for a failing one, stops before the training play starts.

The stand-ins (tests/data/preflight/) were written for this repository; a pass here shows the checks read
these layouts and judge them, never that a real node passed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from fleetbench.deploy import gpu_preflight
from fleetbench.deploy.gpu_preflight import parse_dcgmi_diag, parse_ibstat, parse_nvidia_smi_xml, parse_xids

DATA = REPO / "tests" / "data" / "preflight"
DEPLOY = REPO / "deploy"
VENV_BIN = Path(sys.executable).parent
XID_LINE = "[ 8812.551023] NVRM: Xid (PCI:0000:2a:00): 79, pid=4120, name=python, GPU has fallen off the bus."


def test_nvidia_smi_xml() -> None:
    driver, cuda, gpus = parse_nvidia_smi_xml((DATA / "nvidia-smi-q-x.xml").read_text())
    assert (driver, cuda) == ("570.133.20", "12.8")
    assert [(g.index, g.bus_id, g.name) for g in gpus] == [
        (0, "00000000:18:00.0", "NVIDIA H100 80GB HBM3"),
        (1, "00000000:2A:00.0", "NVIDIA H100 80GB HBM3"),
    ]
    assert all(g.persistence_mode == "Enabled" and g.uncorrectable_ecc == 0 and not g.remap_failure for g in gpus)
    assert gpus[0].sm_clock_mhz == gpus[0].max_sm_clock_mhz == 1980
    with pytest.raises(ValueError, match="root element"):
        parse_nvidia_smi_xml("<html/>")


def test_older_ecc_layout_reads_double_bit_errors() -> None:
    older = """<nvidia_smi_log><driver_version>470.82.01</driver_version><cuda_version>11.4</cuda_version>
    <gpu id="00000000:07:00.0"><product_name>Tesla V100-SXM2-32GB</product_name>
    <persistence_mode>Enabled</persistence_mode><ecc_errors><volatile><single_bit><total>3</total></single_bit>
    <double_bit><total>1</total></double_bit></volatile></ecc_errors></gpu></nvidia_smi_log>"""
    _, cuda, (gpu,) = parse_nvidia_smi_xml(older)
    assert cuda == "11.4" and gpu.uncorrectable_ecc == 1 and gpu.index == 0


def test_ibstat_dcgmi_and_kernel_log() -> None:
    ports = parse_ibstat((DATA / "ibstat.txt").read_text())
    assert [(p.ca, p.port, p.state, p.physical_state, p.rate_gbps, p.link_layer) for p in ports] == [
        ("mlx5_0", 1, "Active", "LinkUp", 400.0, "InfiniBand"),
        ("mlx5_1", 1, "Active", "LinkUp", 400.0, "InfiniBand"),
        ("mlx5_2", 1, "Down", "Disabled", 40.0, "Ethernet"),
    ]
    diag = parse_dcgmi_diag((DATA / "dcgmi-diag.txt").read_text())
    assert diag["Persistence Mode"] == "Pass" and len(diag) == 9 and set(diag.values()) == {"Pass"}
    assert parse_xids((DATA / "dmesg.txt").read_text()) == []
    assert parse_xids(XID_LINE) == ["PCI:0000:2a:00: 79"]


def stand_ins(folder: Path, **changes: tuple[str, str]) -> Path:
    """A bin folder whose nvidia-smi, ibstat, dcgmi, nvidia-ctk and dmesg print the stand-in outputs; `changes`
    maps a data file to (text, replacement) for a failing case."""
    data = folder / "data"
    data.mkdir(parents=True)
    for source in DATA.iterdir():
        text = source.read_text()
        old, new = changes.get(source.name, ("", ""))
        assert not old or old in text, (source.name, old)
        (data / source.name).write_text(text.replace(old, new) if old else text)
    scripts = {
        "nvidia-smi": f'if [ "$1" = "-q" ]; then cat {data}/nvidia-smi-q-x.xml; else echo 570.133.20; fi',
        "ibstat": f"cat {data}/ibstat.txt",
        "dcgmi": f'if [ "$1" = "--version" ]; then echo "dcgmi  version: 3.3.9"; else cat {data}/dcgmi-diag.txt; fi',
        "nvidia-ctk": 'echo "NVIDIA Container Toolkit CLI version 1.17.5"',
        "dmesg": f"cat {data}/dmesg.txt",
    }
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def check_node(bin_dir: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, gpu_preflight.__file__, "--image-cuda", "12.8", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_a_good_node_passes(tmp_path: Path) -> None:
    report = check_node(stand_ins(tmp_path), "--gpus", "2", "--require-ib", "--dcgm-diag", "1")
    assert report["ok"] is True and report["failures"] == []
    assert report["driver_cuda"] == "12.8" and len(report["gpus"]) == 2  # type: ignore[arg-type]


FAILING = {
    "old-driver": ({"nvidia-smi-q-x.xml": ("<cuda_version>12.8", "<cuda_version>12.2")}, "below the image's CUDA 12.8"),
    "ecc": (
        {
            "nvidia-smi-q-x.xml": (
                "<dram_uncorrectable>0</dram_uncorrectable>\n\t\t\t</volatile>",
                "<dram_uncorrectable>2</dram_uncorrectable>\n\t\t\t</volatile>",
            )
        },
        "GPU 0 (00000000:18:00.0): 2 uncorrectable ECC",
    ),
    "persistence": (
        {"nvidia-smi-q-x.xml": ("<persistence_mode>Enabled", "<persistence_mode>Disabled")},
        "persistence mode Disabled",
    ),
    "ib-down": (
        {"ibstat.txt": ("State: Active\n\t\tPhysical state: LinkUp", "State: Down\n\t\tPhysical state: Polling")},
        "mlx5_0 port 1: Down, Polling",
    ),
    "dcgm": (
        {"dcgmi-diag.txt": ("| Inforom                   | Pass", "| Inforom                   | Fail")},
        "dcgmi diag: Inforom failed",
    ),
    "xid": (
        {"dmesg.txt": ("nvidia_uvm:", XID_LINE + "\n[    6.0] nvidia_uvm:")},
        "XID errors in the kernel log: PCI:0000:2a:00: 79",
    ),
}


@pytest.mark.parametrize("case", FAILING, ids=list(FAILING))
def test_a_failing_node_fails_with_the_reason(tmp_path: Path, case: str) -> None:
    changes, reason = FAILING[case]
    report = check_node(stand_ins(tmp_path, **changes), "--gpus", "2", "--require-ib", "--dcgm-diag", "1")
    assert report["ok"] is False
    assert any(reason in failure for failure in report["failures"]), report["failures"]  # type: ignore[attr-defined]


def test_missing_tools_fail_and_never_pass(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    done = subprocess.run(
        [sys.executable, gpu_preflight.__file__, "--image-cuda", "12.8", "--require-ib", "--dcgm-diag", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stdout)
    assert report["ok"] is False
    assert {f.split(":")[0] for f in report["failures"]} == {"nvidia-smi", "ibstat", "dcgmi diag"}


def play(tmp_path: Path, bin_dir: Path, playbook: str) -> subprocess.CompletedProcess[str]:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    gpu_nodes:\n      hosts:\n        localhost:\n"
        f"          ansible_connection: local\n          ansible_python_interpreter: {sys.executable}\n"
    )
    extra = {"trainer_gpus_per_node": 2, "gpu_preflight_require_ib": True, "gpu_preflight_python": sys.executable}
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(DEPLOY / "ansible.cfg"),
        "PATH": f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote-tmp"),
    }
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "--check", "-e", json.dumps(extra), playbook],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_the_preflight_play_passes_a_good_node_in_check_mode(tmp_path: Path) -> None:
    done = play(tmp_path, stand_ins(tmp_path), "preflight.yml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "pre-flight passed on localhost" in done.stdout
    assert "driver 570.133.20 (CUDA 12.8), image CUDA 12.8" in done.stdout


def test_a_failing_node_stops_the_training_play(tmp_path: Path) -> None:
    changes, reason = FAILING["ecc"]
    done = play(tmp_path, stand_ins(tmp_path, **changes), "train.yml")
    assert done.returncode != 0
    assert "pre-flight failed on localhost" in done.stdout and reason in done.stdout
    assert "TASK [trainer" not in done.stdout  # the training play never started
