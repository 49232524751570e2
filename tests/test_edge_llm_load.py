"""The LLM worker's cold load: the model's files are really out of the page cache before it (fincore)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fleetbench.edge.llm.worker import drop_from_page_cache


def resident_bytes(path: Path) -> int:
    done = subprocess.run(["fincore", "-b", "-n", "-o", "RES", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


@pytest.mark.skipif(shutil.which("fincore") is None, reason="fincore (util-linux) is not installed")
@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this platform")
def test_the_model_files_leave_the_page_cache_before_a_cold_load(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("weights.safetensors", "config.json"):
        (folder / name).write_bytes(os.urandom(4 << 20))
        (folder / name).read_bytes()  # now in the page cache
    if resident_bytes(folder / "weights.safetensors") == 0:
        pytest.skip("this file system keeps no page cache for the test's files (e.g. tmpfs-like overlay)")
    assert drop_from_page_cache(folder) is True
    assert resident_bytes(folder / "weights.safetensors") == 0 and resident_bytes(folder / "config.json") == 0
    single = folder / "weights.safetensors"
    single.read_bytes()
    assert resident_bytes(single) > 0
    drop_from_page_cache(single)
    assert resident_bytes(single) == 0
