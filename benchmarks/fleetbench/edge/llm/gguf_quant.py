"""4-bit GGUF files made by llama.cpp's own quantizer, and the weights as such a file stores them.

`quantize_gguf` runs `llama_model_quantize` (llama-bench users' `llama-quantize`, through the library)
on the float32 GGUF the suite exports: Q4_0, or Q4_K_M (its mix: Q4_K for most matrices, Q6_K for
the output and for half of attn_v and ffn_down). llama.cpp picks each tensor's type itself and falls
back per tensor where a row is too short for the type's block: a k-quant needs rows of a multiple of
256 values (QK_K) and drops to Q5_0/Q5_1/Q8_0 (32-value blocks) below that, F16 below 32.

`stored_weights` reads such a file back: each tensor's values dequantized by the `gguf` package (the
reference Python of llama.cpp's formats, not the C code that wrote them), so eager PyTorch can run
with the weights exactly as the file holds them (fleetbench.edge.llm.tolerance). Because the
tolerance is then derived from the file itself, the file is checked against the model first: each
tensor's relative RMS error from its source must stay within MARGIN times what the `gguf` package's
own Q4_0 (the coarsest of these types) makes of the same tensor; a wrong scale or block fails that.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Literal

import numpy as np

from fleetbench.edge.llm.gguf_export import BLOCK_TENSORS, TOP_TENSORS
from fleetbench.edge.native import native_stderr

Q4Type = Literal["q4_0", "q4_k_m"]
Q4_TYPES: tuple[str, ...] = ("q4_0", "q4_k_m")
FTYPE_NAMES = {"q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}
MARGIN = 2.0  # a stored tensor may be this many times further from its source than a Q4_0 of it


class WrongExport(ValueError):
    """A quantized file whose tensors are not the model's weights as its type can store them."""


def quantize_gguf(source: Path, path: Path, dtype: Q4Type, threads: int = 0) -> Path:
    """`source` (an f32 or f16 GGUF) quantized by llama.cpp to `dtype` at `path`; returns the path."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, FTYPE_NAMES[dtype])
    params.nthread = threads
    path.parent.mkdir(parents=True, exist_ok=True)
    with native_stderr([]):  # llama.cpp prints a line per tensor
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(path).encode(), ctypes.byref(params))
    if code != 0:
        path.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize returned {code} for {source} -> {dtype}")
    return path


def parameter_name(gguf_tensor: str) -> str | None:
    """fleetbench's name of a llama.cpp tensor; None for one the model has no parameter for (rope_freqs)."""
    for ours, theirs in TOP_TENSORS.items():
        if gguf_tensor == theirs:
            return ours
    if gguf_tensor.startswith("blk."):
        _blk, index, rest = gguf_tensor.split(".", 2)
        for ours, theirs in BLOCK_TENSORS.items():
            if rest == theirs:
                return f"layers.{index}.{ours}"
    return None


def read_gguf_tensors(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """Every tensor of a GGUF file: llama.cpp name -> (GGML type name, float32 values in PyTorch's shape)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    out = {}
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        shape = tuple(int(n) for n in reversed(tensor.shape))  # GGML lists the row length first
        out[tensor.name] = (tensor.tensor_type.name, values.reshape(shape))
    return out


def relative_rms(stored: np.ndarray, source: np.ndarray) -> float:
    """RMS of stored - source over the RMS of source."""
    scale = float(np.sqrt(np.mean(source.astype(np.float64) ** 2))) or 1.0
    return float(np.sqrt(np.mean((stored.astype(np.float64) - source) ** 2))) / scale


def q4_0_bound(source: np.ndarray) -> float:
    """MARGIN times the relative RMS error of the `gguf` package's Q4_0 of `source` (f16's where a row is
    not a multiple of 32 values, as llama.cpp then keeps the tensor in f16 or f32)."""
    import gguf

    if source.ndim < 2 or source.shape[-1] % 32:
        return MARGIN * relative_rms(source.astype(np.float16), source) + 1e-7
    kind = gguf.GGMLQuantizationType.Q4_0
    restored = gguf.quants.dequantize(gguf.quants.quantize(source, kind), kind).reshape(source.shape)
    return MARGIN * relative_rms(restored, source)


def stored_weights(path: Path, state: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The model's parameters as the quantized GGUF at `path` stores them, and each one's GGML type.

    `state`: the model's float32 parameters by fleetbench name. Raises WrongExport naming the first
    tensor that is missing, of another shape, or further from its source than q4_0_bound allows.
    """
    tensors = read_gguf_tensors(path)
    weights: dict[str, np.ndarray] = {}
    types: dict[str, str] = {}
    for gguf_tensor, (kind, values) in tensors.items():
        name = parameter_name(gguf_tensor)
        if name is not None:
            weights[name], types[name] = values, kind
    for name, source in state.items():
        if name not in weights:
            raise WrongExport(f"{path.name} has no tensor for {name}")
        if weights[name].shape != source.shape:
            raise WrongExport(f"{path.name}: {name} is {weights[name].shape}, the model's {source.shape}")
        error, bound = relative_rms(weights[name], source), q4_0_bound(source)
        if error > bound:
            raise WrongExport(
                f"{path.name}: {name} ({types[name]}) is {error:.2e} (relative RMS) off the model's weights, "
                f"over {bound:.2e} ({MARGIN:g}x a Q4_0 of it)"
            )
    return weights, types
