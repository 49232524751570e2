"""A Hugging Face llama-family folder (config.json + *.safetensors) as the suite's llama model.

The config is read with Hugging Face's LlamaConfig semantics and defaults (transformers is not a
dependency: the fields are read here with pydantic): hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads (unset: one per head), intermediate_size, vocab_size,
rope_theta (10000), rms_norm_eps (1e-6), tie_word_embeddings (false), rope_scaling (none, or
rope_type "llama3"). What the suite's llama cannot compute is refused in one line: another
architecture, a head_dim other than hidden_size / heads, biases, another activation, other RoPE
scalings (linear, dynamic, yarn).

Weights: every *.safetensors file of the folder (one file or shards), read with the `safetensors`
library, renamed to the suite's names (q_proj -> attention.wq, gate_proj -> feed_forward.w1, ...).
Hugging Face stores q_proj and k_proj permuted for its rotate-half RoPE; they are permuted back to
Meta's adjacent pairs (what convert_hf_to_gguf.py does for llama.cpp). With tied embeddings the
output head is the embedding. The tokenizer files are not read: the benchmark feeds token ids, never
text, so the GGUF carries the suite's byte-level token table (gguf_export) sized to the model's
vocabulary; a user's own tokenizer is not carried into the exports (a limit, said in docs/edge-llm.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, ValidationError

from fleetbench.errors import UserError
from fleetbench.train.llama import Llama
from fleetbench.train.plan import ModelShape
from fleetbench.train.rope import RopeScaling

ARCHITECTURES = ("LlamaForCausalLM",)
ACCEPTED = "accepted: a Hugging Face LlamaForCausalLM folder (config.json and *.safetensors)"
MIN_VOCAB = 258  # the GGUF's byte-level token table: 256 bytes, then <s> and </s>

# Hugging Face name inside model.layers.N. -> the suite's name inside layers.N.
BLOCK_NAMES = {
    "input_layernorm.weight": "attention_norm.weight",
    "self_attn.q_proj.weight": "attention.wq.weight",
    "self_attn.k_proj.weight": "attention.wk.weight",
    "self_attn.v_proj.weight": "attention.wv.weight",
    "self_attn.o_proj.weight": "attention.wo.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "feed_forward.w1.weight",
    "mlp.up_proj.weight": "feed_forward.w3.weight",
    "mlp.down_proj.weight": "feed_forward.w2.weight",
}
TOP_NAMES = {"model.embed_tokens.weight": "tok_embeddings.weight", "model.norm.weight": "norm.weight", "lm_head.weight": "output.weight"}  # fmt: skip


class HfLlamaConfig(BaseModel):
    """The fields of a Hugging Face LlamaConfig the suite's llama reads, with LlamaConfig's defaults."""

    model_config = ConfigDict(extra="ignore")

    architectures: list[str] | None = None
    model_type: str | None = None
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None
    intermediate_size: int
    vocab_size: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    rope_scaling: dict[str, Any] | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    attention_bias: bool = False
    mlp_bias: bool = False


def read_config(folder: Path) -> HfLlamaConfig:
    """config.json of `folder`, checked to be a llama the suite can compute; a UserError otherwise."""
    path = folder / "config.json"
    if not folder.exists():
        raise UserError(f"--hf {folder} not found; {ACCEPTED}")
    if not folder.is_dir():
        raise UserError(f"--hf {folder} is a file, not a folder; {ACCEPTED}")
    if not path.is_file():
        raise UserError(f"--hf {folder} has no config.json; {ACCEPTED}")
    try:
        raw = json.loads(path.read_text())
        config = HfLlamaConfig.model_validate(raw)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"--hf {path} cannot be read as JSON ({exc}); {ACCEPTED}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise UserError(f"--hf {path}: {where}: {first['msg']}; {ACCEPTED}") from None
    named = config.architectures or ([] if config.model_type is None else [config.model_type])
    if not (set(named) & {*ARCHITECTURES, "llama"}):
        raise UserError(f"--hf {path}: architecture {', '.join(named) or 'not named'} is not a llama; {ACCEPTED}")
    _check_computable(config, path)
    return config


def _check_computable(config: HfLlamaConfig, path: Path) -> None:
    heads = config.num_attention_heads
    if config.hidden_size % heads or (config.head_dim not in (None, config.hidden_size // heads)):
        raise UserError(
            f"--hf {path}: head_dim {config.head_dim} with hidden_size {config.hidden_size} and {heads} heads; "
            "accepted: head_dim = hidden_size / num_attention_heads"
        )
    kv = config.num_key_value_heads or heads
    if heads % kv:
        raise UserError(f"--hf {path}: {heads} heads do not group into {kv} key/value heads; {ACCEPTED}")
    if config.hidden_act != "silu" or config.attention_bias or config.mlp_bias:
        raise UserError(
            f"--hf {path}: hidden_act {config.hidden_act}, attention_bias {config.attention_bias}, mlp_bias "
            f"{config.mlp_bias}; accepted: silu without biases (the llama architecture)"
        )
    if config.vocab_size < MIN_VOCAB:
        raise UserError(f"--hf {path}: vocab_size {config.vocab_size}; accepted: at least {MIN_VOCAB}")
    rope_scaling(config, path)


def rope_scaling(config: HfLlamaConfig, path: Path) -> RopeScaling | None:
    """The shape's RoPE scaling: None (plain RoPE) or Llama 3's four numbers."""
    scaling = config.rope_scaling
    if not scaling:
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return None
    if kind != "llama3":
        raise UserError(f"--hf {path}: rope_scaling type {kind!r}; accepted: none, default or llama3")
    try:
        return (
            float(scaling["factor"]),
            float(scaling["low_freq_factor"]),
            float(scaling["high_freq_factor"]),
            float(scaling["original_max_position_embeddings"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"--hf {path}: rope_scaling llama3 without a number for {exc}; {ACCEPTED}") from None


def shape_of(config: HfLlamaConfig, path: Path) -> ModelShape:
    """The suite's llama shape of a checked config."""
    return ModelShape(
        dim=config.hidden_size,
        layers=config.num_hidden_layers,
        heads=config.num_attention_heads,
        ffn_dim=config.intermediate_size,
        vocab_size=config.vocab_size,
        model="llama",
        kv_heads=config.num_key_value_heads,
        rope_theta=config.rope_theta,
        norm_eps=config.rms_norm_eps,
        rope_scaling=rope_scaling(config, path),
    )


def unpermute(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Hugging Face's rotate-half q/k rows back to Meta's adjacent pairs (convert_hf_to_gguf.py's permute)."""
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def suite_name(hf_name: str) -> str | None:
    """The suite's parameter name of a Hugging Face tensor name; None for one it has no parameter for."""
    if hf_name in TOP_NAMES:
        return TOP_NAMES[hf_name]
    if hf_name.startswith("model.layers."):
        _model, _layers, index, rest = hf_name.split(".", 3)
        if rest in BLOCK_NAMES:
            return f"layers.{index}.{BLOCK_NAMES[rest]}"
    return None


def _read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError, safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UserError(f"--hf {folder} has no *.safetensors file; {ACCEPTED}")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 - safe_open is no mapping
                    tensors[name] = handle.get_tensor(name)
        except (SafetensorError, OSError, ValueError) as exc:
            raise UserError(f"--hf {file} is not a readable safetensors file ({exc}); {ACCEPTED}") from None
    return tensors


def load_hf(folder: Path) -> Llama:
    """The suite's llama with the folder's weights (float32), checked finite; a UserError for anything else."""
    config = read_config(folder)
    shape = shape_of(config, folder / "config.json")
    tensors = _read_tensors(folder)
    state: dict[str, torch.Tensor] = {}
    for hf_name, tensor in tensors.items():
        name = suite_name(hf_name)
        if name is None:
            continue  # rotary_emb.inv_freq of older exports: recomputed from the config
        value = tensor.float()
        if name.endswith("attention.wq.weight"):
            value = unpermute(value, shape.heads)
        elif name.endswith("attention.wk.weight"):
            value = unpermute(value, shape.n_kv_heads)
        state[name] = value
    if "output.weight" not in state and config.tie_word_embeddings and "tok_embeddings.weight" in state:
        state["output.weight"] = state["tok_embeddings.weight"]
    model = Llama(shape)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        lines = str(exc).strip().splitlines()
        detail = next((line.strip() for line in lines[1:] if line.strip()), lines[0] if lines else "")
        raise UserError(f"--hf {folder}: the weights do not fit its config.json ({detail[:200]}); {ACCEPTED}") from None
    bad = [name for name, tensor in model.state_dict().items() if not bool(torch.isfinite(tensor).all())]
    if bad:
        raise UserError(f"--hf {folder} has NaN or infinite weights in {len(bad)} tensor(s) (first: {bad[0]})")
    return model.eval()
