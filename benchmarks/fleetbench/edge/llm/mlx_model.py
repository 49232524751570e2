"""The llama-family model as an `mlx.nn` module, and its export: safetensors + a config JSON.

The parameter names are fleetbench's own (`layers.N.attention.wq.weight`, ...), so the exported
state dict loads with `load_weights` unchanged. RoPE is `mx.fast.rope` with `traditional=True`
(adjacent pairs, Meta's layout) and Llama 3's scaled periods as `freqs`, as mlx-lm's Llama3RoPE
passes them; attention is `mx.fast.scaled_dot_product_attention`, which takes grouped key/value
heads as they are. Runs on Metal on a Mac and on the CPU (`mlx[cpu]`) on Linux.

int4: every matrix (the embedding too) stored as `mx.quantize` packs it (4-bit, groups of 64 values
with a scale and a bias each: `weight`, `scales`, `biases`), and loaded into the module after
`mlx.nn.quantize` swapped its layers for QuantizedLinear/QuantizedEmbedding, as mlx-lm does.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import mlx.core as mx
import mlx.nn as nn

from fleetbench import jsonio
from fleetbench.train.plan import ModelShape
from fleetbench.train.rope import rope_inverse_frequencies

if TYPE_CHECKING:
    from fleetbench.train.llama import Llama

MlxType = Literal["f32", "f16", "int4"]
GROUP_SIZE, BITS = 64, 4  # mlx.nn.quantize's defaults (fleetbench.edge.llm.tolerance.MLX_GROUP/MLX_BITS)
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


class Attention(nn.Module):  # type: ignore[misc]
    """Causal grouped-query attention with RoPE; `cache` holds (keys, values) for decoding."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.n_kv_heads, shape.head_dim
        self.wq = nn.Linear(shape.dim, shape.heads * shape.head_dim, bias=False)
        self.wk = nn.Linear(shape.dim, shape.n_kv_heads * shape.head_dim, bias=False)
        self.wv = nn.Linear(shape.dim, shape.n_kv_heads * shape.head_dim, bias=False)
        self.wo = nn.Linear(shape.heads * shape.head_dim, shape.dim, bias=False)
        self._periods = mx.array(1.0 / rope_inverse_frequencies(shape.head_dim, shape.rope_theta, shape.rope_scaling))

    def __call__(self, x: mx.array, cache: list[Any] | None) -> Any:
        """Attention over (batch, seq, dim) after the `cache`'s positions (appended to in place)."""
        batch, seq, _ = x.shape
        q = self.wq(x).reshape(batch, seq, self.heads, -1).transpose(0, 2, 1, 3)
        k = self.wk(x).reshape(batch, seq, self.kv_heads, -1).transpose(0, 2, 1, 3)
        v = self.wv(x).reshape(batch, seq, self.kv_heads, -1).transpose(0, 2, 1, 3)
        offset = 0 if not cache else cache[0].shape[2]
        q = mx.fast.rope(q, self.head_dim, traditional=True, base=None, scale=1.0, offset=offset, freqs=self._periods)
        k = mx.fast.rope(k, self.head_dim, traditional=True, base=None, scale=1.0, offset=offset, freqs=self._periods)
        if cache is not None:
            if cache:
                k, v = mx.concatenate([cache[0], k], axis=2), mx.concatenate([cache[1], v], axis=2)
            cache[:] = [k, v]
        out = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=self.head_dim**-0.5, mask="causal" if seq > 1 else None
        )
        return self.wo(out.transpose(0, 2, 1, 3).reshape(batch, seq, -1))


class FeedForward(nn.Module):  # type: ignore[misc]
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def __call__(self, x: mx.array) -> Any:
        """The gated MLP of (..., dim)."""
        return self.w2(nn.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):  # type: ignore[misc]
    """One pre-norm llama block."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.attention = Attention(shape)
        self.ffn_norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.feed_forward = FeedForward(shape.dim, shape.ffn_dim)

    def __call__(self, x: mx.array, cache: list[Any] | None) -> Any:
        """The block on (batch, seq, dim)."""
        h = x + self.attention(self.attention_norm(x), cache)
        return h + self.feed_forward(self.ffn_norm(h))


class MlxLlama(nn.Module):  # type: ignore[misc]
    """fleetbench's llama in MLX: logits for token ids, with an optional per-layer key/value cache."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(shape.vocab_size, shape.dim)
        self.layers = [Block(shape) for _ in range(shape.layers)]
        self.norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.output = nn.Linear(shape.dim, shape.vocab_size, bias=False)

    def __call__(self, tokens: mx.array, cache: list[list[Any]] | None = None) -> Any:
        """Logits (batch, seq, vocab) of (batch, seq) token ids; `cache` is one list per layer."""
        x = self.tok_embeddings(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, None if cache is None else cache[i])
        return self.output(self.norm(x))


def export_mlx(model: Llama, folder: Path, dtype: MlxType) -> Path:
    """`folder`/model.safetensors (weights in `dtype`) and config.json (the shape); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    target = mx.float16 if dtype == "f16" else mx.float32
    weights = {}
    for name, tensor in model.state_dict().items():
        array = mx.array(tensor.detach().float().cpu().numpy())
        if dtype == "int4" and array.ndim == 2:
            stem = name.removesuffix(".weight")
            packed, scales, biases = mx.quantize(array, group_size=GROUP_SIZE, bits=BITS)
            weights.update({f"{stem}.weight": packed, f"{stem}.scales": scales, f"{stem}.biases": biases})
        else:
            weights[name] = array.astype(target)
    mx.save_safetensors(str(folder / WEIGHTS_NAME), weights, metadata={"format": "mlx"})
    (folder / CONFIG_NAME).write_text(jsonio.dumps({"shape": asdict(model.shape), "dtype": dtype}, indent=1) + "\n")
    return folder


def shape_of(fields: dict[str, Any]) -> ModelShape:
    """The ModelShape of an exported config (JSON lists back to the tuples the shape holds)."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return ModelShape(**values)


def load_mlx(folder: Path, mmap: bool = True) -> MlxLlama:
    """The exported model. mmap: MLX's own lazy load of the file; else the file is read into memory first."""
    config = json.loads((folder / CONFIG_NAME).read_text())
    model = MlxLlama(shape_of(config["shape"]))
    if config["dtype"] == "int4":
        nn.quantize(model, group_size=GROUP_SIZE, bits=BITS)
    path = folder / WEIGHTS_NAME
    if mmap:
        weights = mx.load(str(path))
    else:
        import io

        weights = mx.load(io.BytesIO(path.read_bytes()), format="safetensors")
    assert isinstance(weights, dict)  # a safetensors file loads as a name -> array mapping
    model.load_weights(list(weights.items()))
    mx.eval(model.parameters())
    return model
