"""Llama 3's RoPE frequencies in numpy, shared by the torch model, the GGUF export and the MLX module
(which must not import torch: its worker's load time and memory are MLX's alone)."""

from __future__ import annotations

import math

import numpy as np

# Llama 3.1's RoPE frequency scaling, as torchtitan's RoPE.Config defaults it.
ROPE_SCALING_FACTOR = 8.0
ROPE_LOW_FREQ_FACTOR = 1.0
ROPE_HIGH_FREQ_FACTOR = 4.0
ROPE_ORIGINAL_CONTEXT = 8192
# (factor, low_freq_factor, high_freq_factor, original context): Llama 3's scaling as a ModelShape
# holds it; None on a shape means plain RoPE (Llama 2 and most other llama-family checkpoints).
RopeScaling = tuple[float, float, float, float]
LLAMA3_ROPE_SCALING: RopeScaling = (
    ROPE_SCALING_FACTOR,
    ROPE_LOW_FREQ_FACTOR,
    ROPE_HIGH_FREQ_FACTOR,
    float(ROPE_ORIGINAL_CONTEXT),
)


def base_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """Unscaled inverse frequencies of each rotated pair (head_dim / 2 floats)."""
    return (1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))).astype(np.float32)


def rope_scale_factors(head_dim: int, theta: float, scaling: RopeScaling | None = LLAMA3_ROPE_SCALING) -> np.ndarray:
    """Per frequency, what Llama 3's scaling divides the base frequency by (1 for high frequencies; all 1
    without scaling).

    The same numbers llama.cpp reads from a GGUF's `rope_freqs.weight`.
    """
    base = base_frequencies(head_dim, theta)
    if scaling is None:
        return np.ones_like(base)
    factor, low, high, original = scaling
    wavelen = 2 * math.pi / base
    low_wavelen = original / low
    high_wavelen = original / high
    smooth = (original / wavelen - low) / (high - low)
    smoothed = 1.0 / ((1 - smooth) / factor + smooth)
    factors = np.where(wavelen > low_wavelen, factor, smoothed)
    return np.where(wavelen < high_wavelen, 1.0, factors).astype(np.float32)


def rope_inverse_frequencies(
    head_dim: int, theta: float, scaling: RopeScaling | None = LLAMA3_ROPE_SCALING
) -> np.ndarray:
    """Inverse frequencies with Llama 3 scaling applied (none where `scaling` is None)."""
    factors = rope_scale_factors(head_dim, theta, scaling)
    inverse: np.ndarray = (base_frequencies(head_dim, theta) / factors).astype(np.float32)
    return inverse
