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


def base_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """Unscaled inverse frequencies of each rotated pair (head_dim / 2 floats)."""
    return (1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))).astype(np.float32)


def rope_scale_factors(head_dim: int, theta: float) -> np.ndarray:
    """Per frequency, what Llama 3's scaling divides the base frequency by (1 for high frequencies).

    The same numbers llama.cpp reads from a GGUF's `rope_freqs.weight`.
    """
    base = base_frequencies(head_dim, theta)
    wavelen = 2 * math.pi / base
    low_wavelen = ROPE_ORIGINAL_CONTEXT / ROPE_LOW_FREQ_FACTOR
    high_wavelen = ROPE_ORIGINAL_CONTEXT / ROPE_HIGH_FREQ_FACTOR
    smooth = (ROPE_ORIGINAL_CONTEXT / wavelen - ROPE_LOW_FREQ_FACTOR) / (ROPE_HIGH_FREQ_FACTOR - ROPE_LOW_FREQ_FACTOR)
    smoothed = 1.0 / ((1 - smooth) / ROPE_SCALING_FACTOR + smooth)
    factors = np.where(wavelen > low_wavelen, ROPE_SCALING_FACTOR, smoothed)
    return np.where(wavelen < high_wavelen, 1.0, factors).astype(np.float32)


def rope_inverse_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """Inverse frequencies with Llama 3 scaling applied."""
    inverse: np.ndarray = (base_frequencies(head_dim, theta) / rope_scale_factors(head_dim, theta)).astype(np.float32)
    return inverse
