"""What both decoders are built of: RMSNorm, and a block whose forward can be recomputed in backward.

The seed's `Decoder` (decoder.py) and the llama-family `Llama` (llama.py) differ in attention and MLP,
not in these: one RMSNorm (fp32, a learned scale; torchtitan's nn.RMSNorm computes the same) and one
activation-checkpointing switch, which the trainer sets on every block (parallel.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn

from fleetbench.train.ac import AcPolicy, checkpointed


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


class CheckpointedBlock(nn.Module, ABC):
    """A transformer block on (batch, seq, dim): `block` is its computation; with
    `activation_checkpointing` set, its activations are recomputed in backward instead of kept (all of
    them, or with `ac_policy` selective_op all but the expensive ops' outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.activation_checkpointing = False
        self.ac_policy: AcPolicy = "full"  # with activation_checkpointing: full or selective_op (train/ac.py)

    @abstractmethod
    def block(self, x: torch.Tensor) -> torch.Tensor:
        """The block's computation, without checkpointing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block on (batch, seq, dim); with activation checkpointing, recomputed in backward."""
        if self.activation_checkpointing and torch.is_grad_enabled():
            return checkpointed(self.block, x, self.ac_policy)
        return self.block(x)
