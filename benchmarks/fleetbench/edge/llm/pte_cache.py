"""The llama model as an ExecuTorch program that decodes: a static key/value cache in mutable buffers and a
dynamic sequence length, the shape ExecuTorch's own llama export (`--use_kv_cache --enable_dynamic_shape`)
gives its models.

`forward(tokens (1, seq), start (1,))` writes the keys and values of positions start .. start+seq-1 into
the cache and attends each position to every cached one up to itself, so one method serves both a
prompt from an empty cache (start 0, seq = the prompt) and one token after it (seq 1). Positions past
the current one are masked, so what the cache held before is never read: a new prompt needs no reset.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from fleetbench.edge.native import native_stderr, optional_module
from fleetbench.fsutil import write_bytes_atomic
from fleetbench.train.llama import Llama, apply_rope, rope_frequencies

CACHE_PREFIX = "kv_cache_"


class CachedLlama(nn.Module):
    """A Llama's weights (shared, not copied) with a `context`-position key/value cache per layer."""

    inv_freq: torch.Tensor  # a buffer: RoPE's inverse frequencies

    def __init__(self, model: Llama, context: int) -> None:
        super().__init__()
        self.model, self.context = model, context
        shape = model.shape
        for index in range(shape.layers):
            for kind in ("k", "v"):
                cache = torch.zeros(1, context, shape.n_kv_heads, shape.head_dim)
                self.register_buffer(f"{CACHE_PREFIX}{kind}{index}", cache, persistent=False)
        self.register_buffer(
            "inv_freq",
            rope_frequencies(shape.head_dim, shape.rope_theta, None, shape.rope_scaling).float(),
            persistent=False,
        )

    def forward(self, tokens: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """Logits (1, seq, vocab) of `tokens` (1, seq) at positions start .. start+seq-1, the cache updated."""
        seq = tokens.shape[1]
        positions = start + torch.arange(seq, dtype=torch.long)
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        cos, sin = angles.cos(), angles.sin()
        visible = torch.arange(self.context, dtype=torch.long)[None, :] <= positions[:, None]
        x = self.model.tok_embeddings(tokens)
        for index, layer in enumerate(self.model.blocks()):
            attention = layer.attention
            h = layer.attention_norm(x)
            q = attention.wq(h).view(1, seq, attention.heads, attention.head_dim)
            k = attention.wk(h).view(1, seq, attention.kv_heads, attention.head_dim)
            v = attention.wv(h).view(1, seq, attention.kv_heads, attention.head_dim)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            keys: torch.Tensor = getattr(self, f"{CACHE_PREFIX}k{index}")
            values: torch.Tensor = getattr(self, f"{CACHE_PREFIX}v{index}")
            keys.index_copy_(1, positions, k)
            values.index_copy_(1, positions, v)
            if attention.kv_heads != attention.heads:
                keys = keys.repeat_interleave(attention.heads // attention.kv_heads, dim=2)
                values = values.repeat_interleave(attention.heads // attention.kv_heads, dim=2)
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), attn_mask=visible
            )
            x = x + attention.wo(out.transpose(1, 2).reshape(1, seq, -1))
            x = x + layer.feed_forward(layer.ffn_norm(x))
        logits: torch.Tensor = self.model.output(self.model.norm(x))
        return logits


def export_cached_pte(model: Llama, context: int, example_tokens: int, path: Path) -> Path:
    """`model` with a `context`-position cache, exported with a dynamic sequence length (1 .. context) and
    lowered to XNNPACK; written to `path` atomically."""
    exir = optional_module("executorch.exir")
    partitioner = optional_module("executorch.backends.xnnpack.partition.xnnpack_partitioner").XnnpackPartitioner
    initialised = optional_module("executorch.exir.passes.init_mutable_pass").InitializedMutableBufferPass
    cached = CachedLlama(model, context).eval()
    example = (torch.zeros((1, max(2, min(example_tokens, context))), dtype=torch.long), torch.tensor([0]))
    seq = torch.export.Dim("seq", min=1, max=context)
    with torch.no_grad(), native_stderr([]):
        exported = torch.export.export(cached, example, dynamic_shapes=({1: seq}, None), strict=True)
        edge = exir.to_edge_transform_and_lower(exported, partitioner=[partitioner()])
        # The cache starts as zeros in the program: masked positions then never hold NaN bit patterns
        # (0 x NaN would reach the output through the attention weights).
        program = edge.to_executorch(exir.ExecutorchBackendConfig(passes=[initialised([CACHE_PREFIX])]))
    write_bytes_atomic(path, program.buffer, "ExecuTorch program")
    return path
