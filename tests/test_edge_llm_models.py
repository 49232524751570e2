"""`edge llm` on models other than a preset's fresh init: a Hugging Face llama folder (--hf), an existing
GGUF (--gguf), and a trained llama of a shape no preset has (--checkpoint).

The Hugging Face folders are made here: random weights under Hugging Face's names, written with
safetensors, and a config.json; no tokenizer files (the benchmark feeds token ids, see hf_source).
The reference for the folder's meaning is Hugging Face's own llama forward (rotate-half RoPE on the
stored q_proj/k_proj, repeat_kv, RMSNorm), written out below from modeling_llama.py's equations, so
a wrong un-permutation or name mapping in hf_source shows up as different logits.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from conftest import run_cli

needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None,
    reason="llama-cpp-python and gguf not installed: pip install 'fleetbench[llm]'",
)
needs_mlx = pytest.mark.skipif(importlib.util.find_spec("mlx") is None, reason="mlx not installed: 'fleetbench[llm]'")
# Widths of multiples of 256, so Q4_K_M's k-quants need no per-tensor fallback.
HF_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 512,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
}
# llama.cpp's CPU build only: the model sources are checked here, the Vulkan build in test_edge_llm_vulkan.py
QUIET = ("--set", "edge.thermal_sources=[]", "--set", "edge.cooldown_s=0", "--set", "edge.llm.min_tries=1",
         "--set", "edge.llm.max_tries=1", "--set", "edge.llm.mmap=[true]", "--threads", "1",
         "--backend", "cpu")  # fmt: skip


def hf_weights(config: dict[str, Any], seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under Hugging Face's llama names, of the config's shape."""
    g = torch.Generator().manual_seed(seed)
    d, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    hd = d // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * hd

    def rand(*shape: int, scale: float) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    w = {"model.embed_tokens.weight": rand(v, d, scale=1.0), "model.norm.weight": 1 + rand(d, scale=0.1)}
    if not config["tie_word_embeddings"]:
        w["lm_head.weight"] = rand(v, d, scale=d**-0.5)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w |= {
            p + "input_layernorm.weight": 1 + rand(d, scale=0.1),
            p + "post_attention_layernorm.weight": 1 + rand(d, scale=0.1),
            p + "self_attn.q_proj.weight": rand(d, d, scale=2 * d**-0.5),  # sharp enough that positions matter
            p + "self_attn.k_proj.weight": rand(kv, d, scale=2 * d**-0.5),
            p + "self_attn.v_proj.weight": rand(kv, d, scale=d**-0.5),
            p + "self_attn.o_proj.weight": rand(d, d, scale=d**-0.5),
            p + "mlp.gate_proj.weight": rand(f, d, scale=d**-0.5),
            p + "mlp.up_proj.weight": rand(f, d, scale=d**-0.5),
            p + "mlp.down_proj.weight": rand(d, f, scale=f**-0.5),
        }
    return w


def write_hf(folder: Path, config: dict[str, Any], weights: dict[str, torch.Tensor], shards: int = 1) -> Path:
    """A Hugging Face folder: config.json and the weights in `shards` safetensors files."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    names = sorted(weights)
    for index in range(shards):
        part = {n: weights[n].contiguous() for n in names[index::shards]}
        save_file(part, str(folder / f"model-{index + 1:05d}-of-{shards:05d}.safetensors"))
    return folder


def hf_forward(w: dict[str, torch.Tensor], config: dict[str, Any], tokens: list[int]) -> torch.Tensor:
    """Hugging Face's LlamaForCausalLM forward (modeling_llama.py, default RoPE), on its own names and layout."""
    d, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    hd, eps, seq = d // heads, config["rms_norm_eps"], len(tokens)

    def rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rotate_half(t: torch.Tensor) -> torch.Tensor:
        return torch.cat((-t[..., hd // 2 :], t[..., : hd // 2]), dim=-1)

    inv_freq = 1.0 / (config["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    x = w["model.embed_tokens.weight"][tokens]
    mask = torch.full((seq, seq), float("-inf")).triu(1)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(seq, heads, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(seq, kv_heads, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(seq, kv_heads, hd).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(heads // kv_heads, 0), v.repeat_interleave(heads // kv_heads, 0)
        attention = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, -1) @ v
        x = x + attention.transpose(0, 1).reshape(seq, d) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        gated = F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + gated @ w[p + "mlp.down_proj.weight"].T
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return rms(x, w["model.norm.weight"]) @ head.T


@pytest.mark.parametrize(("tied", "shards"), [(False, 1), (True, 2)])
def test_hf_folder_loads_into_the_suite_llama_with_hugging_faces_logits(
    tied: bool, shards: int, tmp_path: Path
) -> None:
    from fleetbench.edge.llm.hf_source import load_hf

    config = {**HF_CONFIG, "tie_word_embeddings": tied}
    weights = hf_weights(config)
    model = load_hf(write_hf(tmp_path / "hf", config, weights, shards))
    assert model.shape.rope_scaling is None and model.shape.rope_theta == 10000.0 and model.shape.n_kv_heads == 2
    tokens = torch.randint(0, 512, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        ours = model(torch.tensor([tokens]))[0]
    expected = hf_forward(weights, config, tokens)
    scale = expected.abs().max()
    assert float((ours - expected).abs().max() / scale) < 1e-5
    # the q/k permutation matters: without undoing it the logits are another model's
    from fleetbench.edge.llm.hf_source import unpermute

    with torch.no_grad():
        model.layers[0].attention.wq.weight.copy_(weights["model.layers.0.self_attn.q_proj.weight"])
        model.layers[0].attention.wk.weight.copy_(weights["model.layers.0.self_attn.k_proj.weight"])
        wrong = model(torch.tensor([tokens]))[0]
    assert float((wrong - expected).abs().max() / scale) > 1e-3
    assert not torch.equal(unpermute(weights["model.layers.0.self_attn.q_proj.weight"], 4), weights["model.layers.0.self_attn.q_proj.weight"])  # fmt: skip


def test_hf_llama3_rope_scaling_is_read_into_the_shape(tmp_path: Path) -> None:
    from fleetbench.edge.llm.hf_source import read_config, shape_of

    scaling = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}  # fmt: skip
    write_hf(tmp_path, {**HF_CONFIG, "rope_scaling": scaling}, {})
    assert shape_of(read_config(tmp_path), tmp_path).rope_scaling == (32.0, 1.0, 4.0, 8192.0)


@needs_llama_cpp
@needs_mlx
def test_edge_llm_hf_exports_to_llama_cpp_and_mlx_and_agrees(tmp_path: Path) -> None:
    """--hf through the command: f32 and the 4-bit rows of llama.cpp and MLX, each agreeing within its tolerance."""
    folder = write_hf(tmp_path / "tiny-llama", HF_CONFIG, hf_weights(HF_CONFIG))
    done = run_cli(
        "edge", "llm", "--hf", str(folder), "--quick", "--results-dir", str(tmp_path / "r"),
        "--runtimes", "llama.cpp,mlx", "--dtypes", "f32,q4_k_m,int4", *QUIET, env={"COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    results = json.loads(next(tmp_path.glob("r/*/edge/llm_results.json")).read_text())
    rows = {(row["runtime"], row["dtype"]): row for row in results["rows"]}
    assert set(rows) == {("llama.cpp", "f32"), ("llama.cpp", "q4_k_m"), ("mlx", "f32"), ("mlx", "int4")}
    assert all(row["agrees"] for row in rows.values())
    assert {row["device"] for key, row in rows.items() if key[0] == "mlx"} == {"cpu"}
    assert all(row["device"] == row["placement"]["device"] for key, row in rows.items() if key[0] == "llama.cpp")
    assert rows["llama.cpp", "q4_k_m"]["tolerance"] > rows["llama.cpp", "f32"]["tolerance"]
    assert "tiny-llama" in done.stdout + done.stderr


@needs_llama_cpp
def test_edge_llm_gguf_runs_an_existing_file_in_llama_cpp_only(tmp_path: Path) -> None:
    """A GGUF made elsewhere (here: a Q4_K_M of a Hugging Face folder, through the suite's export and
    llama.cpp's quantizer) runs as it is, agrees with eager on its own weights, and the runtimes that
    cannot run a GGUF say so, one line each."""
    from fleetbench.edge.llm.hf_source import load_hf
    from fleetbench.edge.llm.job import _export_gguf

    model = load_hf(write_hf(tmp_path / "hf", HF_CONFIG, hf_weights(HF_CONFIG)))
    path = _export_gguf(model, tmp_path / "g", "q4_k_m")
    done = run_cli(
        "edge", "llm", "--gguf", str(path), "--quick", "--results-dir", str(tmp_path / "r"), *QUIET,
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [row] = json.loads(next(tmp_path.glob("r/*/edge/llm_results.json")).read_text())["rows"]
    assert (row["runtime"], row["dtype"], row["agrees"], row["backend"]) == ("llama.cpp", "q4_k_m", True, "cpu")
    assert row["device"] == row["placement"]["device"] and row["offloaded_layers"] == 0
    shown = done.stdout + done.stderr
    assert "skipped mlx: cannot run a GGUF" in shown and "skipped executorch: cannot run a GGUF" in shown
    # the file's own weights: a planted wrong embedding row in eager's copy is what the check would see
    assert row["logit_error"] <= row["tolerance"] < 0.1


@needs_llama_cpp
def test_edge_llm_checkpoint_of_a_non_preset_shape_exports(tmp_path: Path) -> None:
    """A trained llama of a width, depth and vocabulary no preset has: the shape is read from the checkpoint
    (the heads from the run's saved config when the checkpoint sits in its run folder)."""
    from torch.distributed.checkpoint import state_dict_saver

    from fleetbench.edge.llm.source import build_llama, checkpoint_shape

    overrides = {"dim": 128, "layers": 3, "heads": 8, "kv_heads": 2, "ffn_dim": 384, "vocab_size": 1024}
    trained = build_llama("llama3-debug", seed=5, overrides=overrides)
    run = tmp_path / "results" / "r1"
    step = run / "checkpoints" / "step_00000002"
    state_dict_saver.save({"model": trained.state_dict()}, checkpoint_id=str(step), no_dist=True)
    preset = build_llama("llama3-debug", seed=0, overrides={"layers": 1}).shape
    # no saved config: the preset's 16 heads are kept, as the trainer keeps them when only dim is changed
    guessed = checkpoint_shape(step, preset)
    assert (guessed.dim, guessed.layers, guessed.heads, guessed.kv_heads, guessed.vocab_size) == (128, 3, 16, 4, 1024)
    _write_train_record(run, overrides)
    assert checkpoint_shape(step, preset) == trained.shape
    done = run_cli(
        "edge", "llm", "--checkpoint", str(step), "--quick", "--results-dir", str(tmp_path / "out"),
        "--runtimes", "llama.cpp", "--dtypes", "f32", *QUIET,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [row] = json.loads(next(tmp_path.glob("out/*/edge/llm_results.json")).read_text())["rows"]
    assert row["agrees"] and row["greedy_equal"] == row["greedy_total"]


def _write_train_record(run: Path, overrides: dict[str, int]) -> None:
    from datetime import UTC, datetime

    from fleetbench.results.record import ResultRecord

    start = datetime(2026, 1, 1, tzinfo=UTC)
    record = ResultRecord(
        run_id=run.name, benchmark="train", host="h", device="cpu", backend="cpu", status="ok", start=start,
        end=start, duration_s=1.0, git_revision="unknown", packages={},
        config={"preset": "llama3-debug", "model": "llama", **overrides},
    )  # fmt: skip
    (run / "records.jsonl").write_text(record.model_dump_json() + "\n")


@needs_llama_cpp
def test_gguf_agreement_catches_a_reader_that_misplaces_a_weight(tmp_path: Path) -> None:
    """--gguf's verdict can be caught wrong: eager on the file's weights agrees with llama.cpp within the
    derived tolerance, and the same check refuses eager with two embedding rows swapped (a reader bug)."""
    from fleetbench.edge.llm.gguf_source import activation_block, activation_rounding_error, load_gguf
    from fleetbench.edge.llm.hf_source import load_hf
    from fleetbench.edge.llm.job import LlmRow, Reference, _export_gguf, _fill, eager_reference
    from test_edge_llm import _measure

    path = _export_gguf(load_hf(write_hf(tmp_path / "hf", HF_CONFIG, hf_weights(HF_CONFIG))), tmp_path / "g", "q8_0")
    model, dtype = load_gguf(path)
    assert dtype == "q8_0" and activation_block(dtype) == 32
    prompt = torch.randint(0, 512, (24,), generator=torch.Generator().manual_seed(3)).tolist()
    out = _measure("llama.cpp", path, True, prompt, tmp_path)
    for swapped in (False, True):
        if swapped:
            with torch.no_grad():
                rows = model.tok_embeddings.weight
                rows[[prompt[0], prompt[1]]] = rows[[prompt[1], prompt[0]]]
        reference = eager_reference(model, prompt, 6)
        own = activation_rounding_error(model, prompt, reference[0], dtype)
        assert own > 0
        row = LlmRow("llama.cpp", dtype, True)
        _fill(row, out, Reference(*reference, {("llama.cpp", dtype): own}), tmp_path / "logits.npy", 1.0)
        assert row.ok and row.agrees != swapped, (swapped, row.logit_error, row.tolerance)


@needs_mlx
def test_mlx_runs_on_the_device_its_row_names() -> None:
    """MLX is no longer pinned to the CPU: the worker's default device is the one the record names."""
    import mlx.core as mx

    from fleetbench.edge.llm.runtimes import prepare

    device = prepare("mlx")
    assert device == ("gpu" if mx.is_available(mx.gpu) else "cpu")
    assert mx.default_device() == (mx.gpu if device == "gpu" else mx.cpu)


@pytest.mark.skipif(
    importlib.util.find_spec("executorch") is None, reason="executorch not installed: 'fleetbench[mobile]'"
)
def test_executorch_names_each_delegate_it_does_not_run_and_why() -> None:
    from executorch.extension.pybindings.portable_lib import _get_registered_backend_names

    from fleetbench.edge.llm.runtimes import executorch_delegates_not_run

    registered = set(_get_registered_backend_names())
    lines = dict(executorch_delegates_not_run())
    assert set(lines) == {"Vulkan", "CoreML", "MPS"} and "XnnpackBackend" in registered
    for delegate, backend in (("Vulkan", "VulkanBackend"), ("CoreML", "CoreMLBackend"), ("MPS", "MPSBackend")):
        assert (f"this runtime has no {backend}" in lines[delegate]) == (backend not in registered)
