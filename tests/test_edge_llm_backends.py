"""llama.cpp's builds in `fleetbench edge llm` (fleetbench.edge.llm.backends, llamacpp_placement) without the
Vulkan build: bad choices are one line, and the CPU build's rows say where the model went (the CPU). The
Vulkan rows themselves: tests/test_edge_llm_vulkan.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.edge.llm.source import build_llama

needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None,
    reason="llama-cpp-python and gguf not installed: pip install 'fleetbench[llm]'",
)


@pytest.mark.parametrize(
    ("flags", "env", "named", "accepted"),
    [
        (["--backend", "metal"], {}, "metal", "'cpu' or 'vulkan'"),
        (["--gpu-layers", "-1"], {}, "-1", "greater than or equal to 0"),
        (["--backend", "vulkan"], {"FLEETBENCH_LLAMA_VULKAN": "/nonexistent/llama-vulkan"}, "/nonexistent", "cpu"),
    ],
)
def test_a_bad_backend_choice_is_one_line(
    flags: list[str], env: dict[str, str], named: str, accepted: str, tmp_path: Path
) -> None:
    done = run_cli("edge", "llm", "--runtimes", "llama.cpp", *flags, "--results-dir", str(tmp_path), env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and accepted in lines[0], done.stderr
    assert not list(tmp_path.glob("*/edge/llm_results.json"))  # nothing half-written


@needs_llama_cpp
def test_the_cpu_build_places_every_layer_on_the_cpu_and_says_so(tmp_path: Path) -> None:
    from fleetbench.edge.llm.gguf_export import export_gguf
    from fleetbench.edge.llm.runtimes import LlamaCppSession

    model = build_llama("llama3-debug", seed=0, overrides={"layers": 2, "kv_heads": 4})
    path = export_gguf(model, tmp_path / "m.gguf", "f32")
    session = LlamaCppSession(path, True, 1, 32, 8, gpu_layers=-1)  # asked for all: a CPU build has no GPU
    try:
        where = session.placement
    finally:
        session.close()
    assert [d["type"] for d in where["devices_registered"]] == ["cpu"]
    assert where["device"] == where["devices_registered"][0]["description"]
    assert where["offloaded_layers"] == 0 and where["layers"] is None
    assert where["buffers_mib"] and all(name.startswith("CPU") for name in where["buffers_mib"])
    assert sum(where["buffers_mib"].values()) > 0
