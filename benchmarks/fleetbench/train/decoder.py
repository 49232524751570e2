"""The reference decoder: token embedding, blocks of RMSNorm -> MultiheadAttention and RMSNorm -> MLP, head.

Weights are initialised by `init_weights`, which draws every parameter's *full* value from its own
seeded generator and copies in only this rank's shard. The result does not depend on the number of
ranks or on meta-device init, so a sharded run and an unsharded one start from identical weights.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator

import torch
from torch import nn

from fleetbench.train.ac import checkpointed
from fleetbench.train.llama import Llama
from fleetbench.train.plan import ModelShape


class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned scale, computed in fp32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise over the last dimension; the result has the input's dtype."""
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


class Block(nn.Module):
    """One pre-norm transformer block: causal self-attention, then the MLP, each with a residual."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(shape.dim)
        self.attn = nn.MultiheadAttention(shape.dim, shape.heads, batch_first=True)
        self.ffn_norm = RMSNorm(shape.dim)
        self.ffn = nn.Sequential(
            nn.Linear(shape.dim, shape.ffn_dim, bias=False),
            nn.SiLU(),
            nn.Linear(shape.ffn_dim, shape.dim, bias=False),
        )
        self.activation_checkpointing = False
        self.ac_policy = "full"  # with activation_checkpointing: full or selective_op (train/ac.py)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[1]
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).triu(1)
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h, attn_mask=causal, is_causal=True, need_weights=False)[0]
        mlp: torch.Tensor = self.ffn(self.ffn_norm(x))
        return x + mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block on (batch, seq, dim); with activation checkpointing, recomputed in backward."""
        if self.activation_checkpointing and torch.is_grad_enabled():
            return checkpointed(self._forward, x, self.ac_policy)
        return self._forward(x)


class Decoder(nn.Module):
    """The reference decoder of a ModelShape: embedding, `layers` blocks, output head."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.tok_embeddings = nn.Embedding(shape.vocab_size, shape.dim)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.output = nn.Linear(shape.dim, shape.vocab_size, bias=False)

    def blocks(self) -> list[Block]:
        """The transformer blocks, each of which becomes its own FSDP group."""
        return [layer for layer in self.layers if isinstance(layer, Block)]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, seq, vocab) for token ids (batch, seq)."""
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        logits: torch.Tensor = self.output(x)
        return logits


TrainModel = Decoder | Llama  # what the trainer builds for `train.model` seed or llama


def build_decoder(shape: ModelShape) -> TrainModel:
    """The decoder of `shape`'s family: the seed's `Decoder`, or the llama-family `Llama` (train/llama.py)."""
    return Llama(shape) if shape.model == "llama" else Decoder(shape)


def param_counts(shape: ModelShape) -> tuple[int, int]:
    """(all parameters, non-embedding parameters) computed from the shape, without building the model."""
    if shape.model == "llama":
        from fleetbench.train.llama import llama_param_counts

        return llama_param_counts(shape)
    d, f, v = shape.dim, shape.ffn_dim, shape.vocab_size
    per_block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d * f  # norms, in_proj, out_proj, MLP
    total = v * d + shape.layers * per_block + d * v
    return total, total - v * d


def _init_rule(name: str, shape: ModelShape) -> tuple[str, float]:
    """torchtitan's scheme: embeddings N(0,1), weights N(0,0.02) with depth-scaled output projections,
    head N(0, dim^-0.5); norms 1, biases 0. Truncated at 2 or 3 sigma."""
    if name.endswith("bias"):
        return "zeros", 0.0
    if name.endswith("norm.weight"):
        return "ones", 0.0
    if name == "tok_embeddings.weight":
        return "normal", 1.0
    if name == "output.weight":
        return "trunc3", shape.dim**-0.5
    if name.endswith(("attn.out_proj.weight", "ffn.2.weight")):
        return "trunc2", 0.02 / math.sqrt(2 * shape.layers)
    if name.endswith(("attention.wo.weight", "feed_forward.w2.weight", "feed_forward.w3.weight")):
        layer = int(name.split(".")[1])  # torchtitan's llama3 scales by the block's own depth
        return "trunc2", 0.02 / math.sqrt(2 * (layer + 1))
    return "trunc2", 0.02


def _full_value(name: str, size: torch.Size, shape: ModelShape, seed: int, device: torch.device) -> torch.Tensor:
    rule, std = _init_rule(name, shape)
    if rule == "zeros":
        return torch.zeros(size, device=device)
    if rule == "ones":
        return torch.ones(size, device=device)
    generator = torch.Generator(device=device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    value = torch.empty(size, device=device)
    if rule == "normal":
        return value.normal_(0.0, std, generator=generator)
    cut = 2.0 if rule == "trunc2" else 3.0
    return nn.init.trunc_normal_(value, 0.0, std, -cut * std, cut * std, generator=generator)


def named_parameters_for_init(model: nn.Module) -> Iterator[tuple[str, nn.Parameter]]:
    """Parameter names without wrapper prefixes (torch.compile's `_orig_mod.`), so the rule table applies."""
    for name, param in model.named_parameters():
        yield name.replace("_orig_mod.", ""), param


@torch.no_grad()
def init_weights(model: TrainModel, seed: int) -> None:
    """Initialise in place. Sharded parameters (DTensors) receive their slice of the full value."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    for name, param in named_parameters_for_init(model):
        local = param.to_local() if isinstance(param, DTensor) else param
        full = _full_value(name, param.shape, model.shape, seed, local.device)
        if isinstance(param, DTensor):
            shard = distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None)
            local.copy_(shard.to_local())
        else:
            local.copy_(full)
