"""`fleetbench edge llm` on llama.cpp's Vulkan build (lavapipe here and in CI; any Vulkan driver elsewhere):
its rows agree with eager PyTorch, a planted wrong weight fails them, `--gpu-layers` moves the layers and the
record says where they ran, and the CPU and Vulkan rows come side by side.

Needs the Vulkan build `make setup` installs in .venv/llama-vulkan (fleetbench.edge.llm.backends; it skips,
saying so, without it) and a Vulkan adapter (the `vulkan` fixture). A 2-layer llama3-debug shape keeps each
worker at a few seconds on lavapipe.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from conftest import run_cli
from fleetbench.edge.llm.backends import missing
from fleetbench.edge.llm.gguf_export import export_gguf
from fleetbench.edge.llm.job import (
    DECODE_CHECK_TOKENS,
    LlmRow,
    Reference,
    _fill,
    _run_worker,
    decode_logits_path,
    eager_reference,
)
from fleetbench.edge.llm.source import build_llama
from fleetbench.edge.llm.tolerance import F32_TOLERANCE, quantisation_error, tolerance
from fleetbench.results.store import read_records

needs_vulkan_build = pytest.mark.skipif(
    missing("vulkan") is not None or importlib.util.find_spec("gguf") is None,
    reason=f"{missing('vulkan')} (and gguf: the [llm] extra)",
)
pytestmark = [pytest.mark.vulkan, needs_vulkan_build, pytest.mark.usefixtures("vulkan")]
SMALL = {"layers": 2, "kv_heads": 4}


def _row(path: Path, dtype: str, prompt: list[int], ref: Reference, gpu_layers: int, tmp_path: Path) -> LlmRow:
    """One Vulkan row measured by the real worker (one try) and checked against `ref`."""
    logits = tmp_path / "logits.npy"
    spec = {
        "runtime": "llama.cpp",
        "backend": "vulkan",
        "gpu_layers": gpu_layers,
        "path": str(path),
        "mmap": True,
        "threads": 1,
        "context": 64,
        "prompt": prompt,
        "gen_tokens": 4,
        "agree_tokens": 6,
        "min_tries": 1,
        "max_tries": 1,
        "cv_target": 1.0,
        "logits_out": str(logits),
        "decode_check_tokens": DECODE_CHECK_TOKENS,
        "decode_logits_out": str(decode_logits_path(logits)),
    }
    row = LlmRow("llama.cpp", dtype, True, "vulkan", gpu_layers)
    _fill(row, _run_worker(spec, tmp_path), ref, logits, 1.0)
    assert row.ok, row.error
    return row


def _model_and_reference(dtype: str) -> tuple[torch.nn.Module, list[int], Reference]:
    model = build_llama("llama3-debug", seed=2, overrides=SMALL)
    prompt = torch.randint(0, 2048, (24,), generator=torch.Generator().manual_seed(0)).tolist()
    logits, greedy = eager_reference(model, prompt, 6)
    errors = {("llama.cpp", d): quantisation_error(model, prompt, logits, "llama.cpp", d) for d in {dtype, "f16"}}
    return model, prompt, Reference(logits, greedy, errors)


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
def test_vulkan_rows_agree_with_eager_and_a_wrong_weight_fails_them(
    dtype: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, prompt, ref = _model_and_reference(dtype)
    row = _row(export_gguf(model, tmp_path / "right.gguf", dtype), dtype, prompt, ref, -1, tmp_path)  # type: ignore[arg-type]
    assert row.agrees, (row.logit_error, row.decode_logit_error, row.tolerance, row.greedy_equal)
    assert row.offloaded_layers == row.layers == SMALL["layers"] + 1  # the blocks and the output layer
    vulkan = [d for d in row.placement["devices_registered"] if d["name"].startswith("Vulkan")]
    assert vulkan and row.device == vulkan[0]["description"]  # the driver's name (llvmpipe on lavapipe)
    assert row.placement["build"].endswith("llama-vulkan/llama_cpp")
    if dtype == "f32":  # the widened tolerance is f16 arithmetic's (tolerance.ARITHMETIC_DTYPE), nothing else
        assert row.tolerance == tolerance(ref.quant_errors["llama.cpp", "f16"])
        monkeypatch.setenv("GGML_VK_DISABLE_F16", "1")
        exact = _row(tmp_path / "right.gguf", dtype, prompt, ref, -1, tmp_path)
        assert max(exact.logit_error, exact.decode_logit_error) <= F32_TOLERANCE
        monkeypatch.delenv("GGML_VK_DISABLE_F16")
    # the same check refuses a wrong export on Vulkan: two tokens' embedding rows swapped
    with torch.no_grad():
        embedding = model.tok_embeddings.weight  # type: ignore[union-attr]
        embedding[[prompt[0], prompt[1]]] = embedding[[prompt[1], prompt[0]]]
    wrong = _row(export_gguf(model, tmp_path / "wrong.gguf", dtype), dtype, prompt, ref, -1, tmp_path)  # type: ignore[arg-type]
    assert not wrong.agrees and wrong.logit_error > wrong.tolerance


def test_gpu_layers_zero_keeps_the_weights_on_the_cpu_and_the_record_says_so(tmp_path: Path) -> None:
    model, prompt, ref = _model_and_reference("f32")
    path = export_gguf(model, tmp_path / "m.gguf", "f32")
    none = _row(path, "f32", prompt, ref, 0, tmp_path)
    every = _row(path, "f32", prompt, ref, -1, tmp_path)
    one = _row(path, "f32", prompt, ref, 1, tmp_path)
    assert (none.offloaded_layers, one.offloaded_layers, every.offloaded_layers) == (0, 1, 3)
    cpu = next(d["description"] for d in none.placement["devices_registered"] if d["type"] == "cpu")
    assert none.device == cpu and every.device != cpu
    assert not any(name.startswith("Vulkan") for name in none.placement["buffers_mib"])
    assert any(name.startswith("Vulkan") for name in every.placement["buffers_mib"])
    assert none.agrees and every.agrees and one.agrees


def test_cpu_and_vulkan_rows_side_by_side(tmp_path: Path) -> None:
    done = run_cli(
        "edge", "llm", "--quick", "--results-dir", str(tmp_path), "--dtypes", "f32", "--threads", "1",
        "--runtimes", "llama.cpp", "--set", "edge.llm.mmap=[true]", "--set", "edge.llm.min_tries=1", "--set", "edge.llm.max_tries=1",
        "--set", "edge.thermal_sources=[]", "--set", "edge.cooldown_s=0", env={"COLUMNS": "220"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(next(tmp_path.glob("*/edge/llm_results.json")).read_text())
    rows = {row["backend"]: row for row in results["rows"]}
    assert set(rows) == {"cpu", "vulkan"} and all(row["agrees"] for row in rows.values())
    assert rows["cpu"]["offloaded_layers"] == 0 and rows["vulkan"]["offloaded_layers"] == rows["vulkan"]["layers"]
    [record] = read_records(next(tmp_path.glob("*/records.jsonl")).parent)
    assert {h.labels["runtime"] for h in record.headline} == {"llama.cpp", "llama.cpp-vulkan"}
    shown = (done.stdout + done.stderr).splitlines()
    table = [line for line in shown if line.lstrip().startswith("llama.cpp")]
    assert len(table) == 2 and rows["vulkan"]["device"].split()[0] in table[1]


def test_vulkan_f16_is_left_out_by_default_with_why_and_judged_when_asked_for(tmp_path: Path) -> None:
    """No tolerance is derived for ggml-vulkan's f16 accumulation (tolerance.UNDERIVED): a default run says
    so instead of a row; asked for by name, the row runs and the check judges it as any other."""
    quick = ["--quick", "--dtypes", "f16", "--threads", "1", "--runtimes", "llama.cpp", "--set", "edge.llm.mmap=[true]",
             "--set", "edge.llm.min_tries=1", "--set", "edge.llm.max_tries=1", "--set", "edge.thermal_sources=[]",
             "--set", "edge.cooldown_s=0"]  # fmt: skip
    default = run_cli("edge", "llm", *quick, "--results-dir", str(tmp_path / "default"))
    assert default.returncode == 0, default.stderr[-2000:]
    assert "skipped llama.cpp vulkan f16: ggml-vulkan accumulates" in default.stdout + default.stderr
    [row] = json.loads(next(tmp_path.glob("default/*/edge/llm_results.json")).read_text())["rows"]
    assert row["backend"] == "cpu" and row["agrees"]
    asked = run_cli("edge", "llm", *quick, "--backend", "vulkan", "--results-dir", str(tmp_path / "asked"))
    [row] = json.loads(next(tmp_path.glob("asked/*/edge/llm_results.json")).read_text())["rows"]
    assert row["backend"] == "vulkan" and row["ok"]
    # judged, not waved through: on a device with f16 arithmetic (lavapipe) it lands outside the tolerance
    assert asked.returncode == (0 if row["agrees"] else 1)
    assert row["agrees"] == (max(row["logit_error"], row["decode_logit_error"]) <= row["tolerance"])
