"""The llama-family decoder (`train.model=llama`): RoPE, SwiGLU, grouped-query attention, RMSNorm, causal.

The architecture of torchtitan's Llama 3 (`torchtitan.models.llama3`), which llama.cpp, MLX and
ExecuTorch all run: parameter names follow Meta's checkpoints (`attention.wq`, `feed_forward.w1`, ...),
and RoPE rotates adjacent pairs (Meta's layout, llama.cpp's LLAMA_ROPE_TYPE_NORM, MLX's
`traditional=True`), with Llama 3's frequency scaling. tests/test_train_llama.py checks that the
logits equal torchtitan's model loaded with the same weights.

RoPE is computed in real arithmetic (cos/sin) rather than torchtitan's complex multiply, so the same
module exports with torch.export; the frequencies are recomputed from the shape in each forward (a
few hundred floats), so meta-device init needs no buffer fix-up.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fleetbench.train.blocks import CheckpointedBlock, RMSNorm
from fleetbench.train.plan import ModelShape
from fleetbench.train.rope import LLAMA3_ROPE_SCALING, RopeScaling, rope_inverse_frequencies


def rope_frequencies(
    head_dim: int,
    theta: float,
    device: torch.device | None = None,
    scaling: RopeScaling | None = LLAMA3_ROPE_SCALING,
) -> torch.Tensor:
    """Inverse frequencies of each rotated pair, Llama 3 scaling applied (head_dim / 2 floats)."""
    return torch.from_numpy(rope_inverse_frequencies(head_dim, theta, scaling)).to(device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs of (batch, seq, heads, head_dim) by the angles of (seq, head_dim / 2)."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


class Attention(nn.Module):
    """Causal grouped-query attention with RoPE on queries and keys."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.n_kv_heads, shape.head_dim
        self.theta, self.rope_scaling = shape.rope_theta, shape.rope_scaling
        self.wq = nn.Linear(shape.dim, self.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(shape.dim, self.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(shape.dim, self.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.heads * self.head_dim, shape.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention over (batch, seq, dim), each position seeing itself and those before it."""
        batch, seq, _ = x.shape
        q = self.wq(x).view(batch, seq, self.heads, self.head_dim)
        k = self.wk(x).view(batch, seq, self.kv_heads, self.head_dim)
        v = self.wv(x).view(batch, seq, self.kv_heads, self.head_dim)
        angles = torch.outer(
            torch.arange(seq, device=x.device, dtype=torch.float32),
            rope_frequencies(self.head_dim, self.theta, x.device, self.rope_scaling),
        )
        cos, sin = angles.cos(), angles.sin()
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_heads != self.heads:  # each group of heads shares one key/value head, as torchtitan's repeat_kv
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=2)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        result: torch.Tensor = self.wo(out.transpose(1, 2).reshape(batch, seq, -1))
        return result


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The gated MLP of (..., dim)."""
        result: torch.Tensor = self.w2(F.silu(self.w1(x)) * self.w3(x))
        return result


class LlamaBlock(CheckpointedBlock):
    """One pre-norm llama block: attention, then the SwiGLU MLP, each with a residual."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(shape.dim, shape.norm_eps)
        self.attention = Attention(shape)
        self.ffn_norm = RMSNorm(shape.dim, shape.norm_eps)
        self.feed_forward = FeedForward(shape.dim, shape.ffn_dim)

    def block(self, x: torch.Tensor) -> torch.Tensor:
        """Attention, then the SwiGLU MLP, each after its norm (torchtitan's norm_eps) and with a residual."""
        h = x + self.attention(self.attention_norm(x))
        out: torch.Tensor = h + self.feed_forward(self.ffn_norm(h))
        return out


class Llama(nn.Module):
    """The llama decoder of a ModelShape: embedding, `layers` blocks, final norm, output head."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.tok_embeddings = nn.Embedding(shape.vocab_size, shape.dim)
        self.layers = nn.ModuleList(LlamaBlock(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.dim, shape.norm_eps)
        self.output = nn.Linear(shape.dim, shape.vocab_size, bias=False)

    def blocks(self) -> list[LlamaBlock]:
        """The transformer blocks, each of which becomes its own FSDP group."""
        return [layer for layer in self.layers if isinstance(layer, LlamaBlock)]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, seq, vocab) for token ids (batch, seq)."""
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        logits: torch.Tensor = self.output(self.norm(x))
        return logits


def llama_param_counts(shape: ModelShape) -> tuple[int, int]:
    """(all parameters, non-embedding parameters) of a llama shape, without building the model."""
    d, f, v, kv = shape.dim, shape.ffn_dim, shape.vocab_size, shape.n_kv_heads * shape.head_dim
    per_block = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * f  # norms, wq and wo, wk and wv, SwiGLU
    total = v * d + shape.layers * per_block + d + d * v
    return total, total - v * d
