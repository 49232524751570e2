"""arm64 images without an engine: tags, bases and wheelhouses keyed by architecture, what an emulated
build leaves out, the binfmt_misc check on real entry files, and bad input through the CLI."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from conftest import REPO
from fleetbench.errors import UserError
from fleetbench.images.emulation import missing
from fleetbench.images.specs import IMAGES, Wheels, arch_of_machine, local_base, resolve_build_order, wheels_for
from fleetbench.images.wheelhouse import _pip_target_args, left_out, requirement_sets

# What the kernel shows for Debian's qemu-user-static entry once registered (cat /proc/sys/fs/binfmt_misc/qemu-aarch64).
ENTRY = """enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: POF
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
"""


def test_arm64_tags_bases_and_wheelhouse_keys_carry_the_arch_and_amd64_keeps_its_names() -> None:
    edge = IMAGES["edge-vulkan"]
    assert edge.tag_suffix("cpu") == "-cpu" and edge.tag_suffix("cpu", "arm64") == "-cpu-arm64"
    assert edge.tag_suffix("cuda", "arm64") == "-arm64"
    assert local_base("ns") == "ns/base:bookworm" and local_base("ns", "arm64") == "ns/base:bookworm-arm64"
    assert wheels_for(edge, "cpu", None).key == "py311-cpu"
    arm = wheels_for(edge, "cpu", None, arch="arm64")
    assert arm.key == "py311-cpu-arm64" and arm.machine == "aarch64"
    target = _pip_target_args(arm)
    platforms = [target[i + 1] for i, arg in enumerate(target) if arg == "--platform"]
    assert platforms and all(p.endswith("_aarch64") for p in platforms), platforms


def test_only_the_edge_runner_is_built_for_arm64() -> None:
    assert [s.name for s in resolve_build_order([], "cpu", "arm64")] == ["edge-vulkan"]
    with pytest.raises(UserError, match="image 'trainer' is not built for arm64; images built for arm64: edge-vulkan"):
        resolve_build_order(["trainer"], "cpu", "arm64")


@pytest.mark.parametrize(("machine", "arch"), [("aarch64", "arm64"), ("x86_64", "amd64"), ("arm64", "arm64")])
def test_a_hosts_machine_name_picks_the_image_arch(machine: str, arch: str) -> None:
    assert arch_of_machine(machine) == arch


def test_a_machine_no_image_is_built_for_is_one_line() -> None:
    with pytest.raises(UserError, match=r"no image is built for the architecture 'riscv64'; accepted: x86_64, aarch64"):
        arch_of_machine("riscv64")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the emulated arm64 wheelhouse is an x86-64 host's")
def test_the_emulated_arm64_wheelhouse_leaves_out_llama_cpp_and_keeps_mlx() -> None:
    arm = Wheels("3.11", "cpu", "arm64")
    common, additions = requirement_sets(REPO, arm, "torch==2.13.0")
    everything = [*common, *(r for reqs in additions.values() for r in reqs)]
    assert not any(r.startswith("llama-cpp-python") for r in everything), everything
    assert any(r.startswith("mlx[cpu]") for r in additions["edge-vulkan"]), additions
    assert "profiler" not in additions  # no arm64 profiler: its ncu-report stays out
    assert set(left_out(arm)) == {"llama-cpp-python"}
    native = Wheels("3.11", "cpu")
    assert left_out(native) == {}
    _, x86 = requirement_sets(REPO, native, "torch==2.13.0")
    assert any(r.startswith("llama-cpp-python") for r in x86["edge-vulkan"])  # the planted difference is arm64's only


def _binfmt(folder: Path, entry: str | None) -> Path:
    """A stand-in for /proc/sys/fs/binfmt_misc: the register file and, where given, qemu-aarch64's entry."""
    folder.mkdir()
    (folder / "register").write_text("")
    if entry is not None:
        (folder / "qemu-aarch64").write_text(entry)
    return folder


@pytest.mark.skipif(platform.machine() == "aarch64", reason="arm64 runs natively on an aarch64 host")
def test_binfmt_check_accepts_debians_entry_and_names_what_is_wrong(tmp_path: Path) -> None:
    assert missing("arm64", _binfmt(tmp_path / "ok", ENTRY)) is None
    assert "binfmt_misc, which is not mounted" in (missing("arm64", tmp_path / "unmounted") or "")
    assert "qemu-aarch64 is missing" in (missing("arm64", _binfmt(tmp_path / "none", None)) or "")
    disabled = _binfmt(tmp_path / "disabled", ENTRY.replace("enabled", "disabled"))
    assert "is disabled" in (missing("arm64", disabled) or "")
    no_f = missing("arm64", _binfmt(tmp_path / "nof", ENTRY.replace("flags: POF", "flags: P")))
    assert no_f is not None and "with the F flag" in no_f


BAD = {
    "unknown arch": (["images", "build", "edge-vulkan", "--arch", "riscv64"], "invalid choice: 'riscv64'"),
    "image without arm64": (
        ["images", "build", "trainer", "--arch", "arm64"],
        "image 'trainer' is not built for arm64",
    ),
    "base of an unknown arch": (["images", "base", "--arch", "mips"], "invalid choice: 'mips'"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_arch_is_one_line_without_an_engine(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.cli.main import main

    args, fragment = BAD[case]
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetbench: error:"), err
    assert fragment in lines[0]


# Prints each collected test's worker group (the xdist_group marker conftest.py's scheduling adds).
GROUP_PLUGIN = """
def pytest_collection_finish(session):
    for item in session.items:
        marker = item.get_closest_marker("xdist_group")
        print("GROUP", item.nodeid, marker.args[0] if marker else None)
"""


def test_the_arm64_image_test_runs_beside_the_cold_builds_in_a_group_of_its_own(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "group_plugin.py").write_text(GROUP_PLUGIN)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "group_plugin",
            "-n",
            "0",
            "tests/test_images_arm64.py",
            "tests/test_images.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    groups = {
        line.split()[1].split("::")[0]: line.split()[2]
        for line in done.stdout.splitlines()
        if line.startswith("GROUP ")
    }
    assert groups.get("tests/test_images.py") == "docker", done.stdout[-2000:] + done.stderr[-2000:]
    assert groups.get("tests/test_images_arm64.py") == "tests/test_images_arm64.py", groups
