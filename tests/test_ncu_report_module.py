"""Where fleetbench finds NVIDIA's ncu_report when the ncu-report wheel is not installed."""

from __future__ import annotations

from pathlib import Path

from fleetbench.profile.ncu.report_module import extras_dirs


def _install(folder: Path) -> Path:
    extras = folder / "extras" / "python"
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text("", encoding="utf-8")
    (folder / "ncu").write_text("#!/bin/sh\n", encoding="utf-8")
    return extras


def test_the_cuda_toolkit_wrapper_leads_to_its_newest_nsight_compute(tmp_path: Path) -> None:
    """The CUDA toolkit's bin/ncu is a script that runs ../nsight-compute-<newest>/ncu (as on CUDA 13.0)."""
    cuda = tmp_path / "cuda-13.0"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "ncu").write_text("#!/bin/sh\n", encoding="utf-8")
    older = _install(cuda / "nsight-compute-2025.2.1")
    newer = _install(cuda / "nsight-compute-2025.3.1")
    (cuda / "nsight-compute-2024.9.9" / "extras" / "python").mkdir(parents=True)  # no module in it
    linked = tmp_path / "cuda"
    linked.symlink_to(cuda)
    assert extras_dirs(str(linked / "bin" / "ncu"), tmp_path / "none") == [newer, older]


def test_an_install_s_own_binary_and_the_standalone_folder(tmp_path: Path) -> None:
    own = _install(tmp_path / "opt" / "2025.1.0")
    newest = _install(tmp_path / "opt" / "2025.10.0")
    assert extras_dirs(str(tmp_path / "opt" / "2025.1.0" / "ncu"), tmp_path / "opt") == [own, newest]
    assert extras_dirs(None, tmp_path / "opt") == [newest, own], "10 > 1: versions compare as numbers"
    assert extras_dirs(None, tmp_path / "missing") == []
