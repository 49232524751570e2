"""Agreement tolerances derived from each export's own rounding of the very same weights.

A fixed tolerance per dtype hides export bugs: q8_0's 5e-2 was four times q8_0's own error on the
model, wide enough for a dequantisation scale doubled on a whole attention matrix. Here eager
PyTorch runs once more with the weights exactly as the export stores them (f16 casts; q8_0 quantised
and dequantised by the `gguf` package, llama.cpp's own reference code; norms kept as each export keeps
them), and its logits' distance from the float32 reference is that dtype's own error on this model
and prompt. A runtime may add rounding of its own (activations in f16 or quantised to q8 for the
matrix products), so the tolerance is MARGIN times that error, never under the float32 one.

4-bit: llama.cpp's Q4_0 and Q4_K_M files are made by llama.cpp's own quantizer, which picks each
tensor's type itself (fleetbench.edge.llm.gguf_quant); the weights are read back from the file (the
`gguf` package dequantizes them) after each tensor was checked against the model. MLX's int4 is
`mx.quantize` (groups of MLX_GROUP values, an affine scale and bias each) of every matrix, the
embedding included, as `mlx.nn.quantize` stores it.

MLX f16 computes in float16 throughout (a float16 model's activations are float16 arrays), which
moved llama3-debug's logits by 1.05e-3 where its weights' rounding alone moved them by 3.3e-4 (a
tolerance of 6.5e-4 then failed a right export); its own error is eager PyTorch's with the model in
float16 (weights and activations: 1.04e-3 on the same model and prompt).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

F32_TOLERANCE = 1e-4  # float32 export: only the order of float operations differs
MARGIN = 2.0
MLX_GROUP, MLX_BITS = 64, 4  # mlx.nn.quantize's defaults
# llama.cpp's GPU builds compute the prompt's matrix products with f16 operands where the device has f16
# arithmetic (ggml-vulkan's mul_mm): the rounding of one operand to f16, the order of the f16 export's own
# error on the same weights, whatever the export's dtype. Measured on lavapipe (2-layer llama3-debug,
# 24-token prompt): the f32 export 3.1e-4 off eager, 1.2e-5 with GGML_VK_DISABLE_F16=1 (the CPU build:
# 1.3e-5), the f16 export's own error 3.7e-4. So a row of such a build is held to the larger of its
# export's own error and the f16 one.
ARITHMETIC_DTYPE = {"vulkan": "f16"}
# Where a build's arithmetic is rounder than any tolerance derived here: f16 matrices on Vulkan, whose
# prompt matmuls ggml-vulkan accumulates in f16 where the device has f16 (4.8e-3 off eager on lavapipe,
# 3.7e-4, the export's own, with GGML_VK_DISABLE_F16=1). A default run lists these as skipped with why;
# asked for by name (--backend vulkan --dtypes f16) they run, and the check judges them as any row.
UNDERIVED = {
    ("vulkan", "f16"): "ggml-vulkan accumulates the prompt's f16 x f16 matmuls in f16 (4.8e-3 off eager on "
    "lavapipe, the export's own 3.7e-4 with GGML_VK_DISABLE_F16=1) and no tolerance for f16 accumulation is "
    "derived; `--backend vulkan --dtypes f16` runs it"
}


def stored(array: np.ndarray, runtime: str, dtype: str) -> np.ndarray:
    """`array` as `runtime`'s export stores it at `dtype`, back in float32."""
    array = array.astype(np.float32)
    if dtype == "f32":
        return array
    if runtime == "llama.cpp":
        if array.ndim == 1:  # the GGUF export keeps norms in f32, as llama.cpp's converter does
            return array
        if dtype == "q8_0":
            import gguf

            kind = gguf.GGMLQuantizationType.Q8_0
            restored: np.ndarray = gguf.quants.dequantize(gguf.quants.quantize(array, kind), kind)
            return restored.reshape(array.shape).astype(np.float32)
    if runtime == "mlx" and dtype == "int4":
        if array.ndim == 1:
            return array
        import mlx.core as mx

        packed = mx.quantize(mx.array(array), group_size=MLX_GROUP, bits=MLX_BITS)
        return np.array(mx.dequantize(*packed, group_size=MLX_GROUP, bits=MLX_BITS)).astype(np.float32)
    return array.astype(np.float16).astype(np.float32)  # f16: GGUF matrices, and every MLX array


def logit_error(logits: np.ndarray, reference: np.ndarray) -> float:
    """Largest |logit - reference| over the largest |reference|: the agreement's measure."""
    return float(np.abs(logits - reference).max() / np.abs(reference).max())


def quantisation_error(
    model: Any, prompt: list[int], reference: np.ndarray, runtime: str, dtype: str, export: Path | None = None
) -> float:
    """The logit error of eager PyTorch running `model` with its weights as `runtime` stores them at `dtype`;
    for llama.cpp's 4-bit types, as the exported file `export` stores them (gguf_quant.WrongExport where
    a tensor there is not the model's)."""
    import torch

    if dtype == "f32":
        return 0.0
    rounded = copy.deepcopy(model)
    state = {name: t.detach().float().cpu().numpy() for name, t in rounded.state_dict().items()}
    if runtime == "llama.cpp" and dtype in ("q4_0", "q4_k_m"):
        from fleetbench.edge.llm.gguf_quant import stored_weights

        if export is None:
            raise ValueError(f"llama.cpp {dtype}: the error is read from the quantized file; pass export")
        weights, _types = stored_weights(export, state)
    else:
        weights = {name: stored(array, runtime, dtype) for name, array in state.items()}
    with torch.no_grad():
        for name, tensor in rounded.state_dict().items():
            tensor.copy_(torch.from_numpy(weights[name]))
        if runtime == "mlx" and dtype == "f16":
            rounded = rounded.half()  # MLX's float16 model computes in float16 too
        logits = rounded(torch.tensor([prompt]))[0].float().numpy()
    return logit_error(logits, reference)


def row_error(quant_errors: dict[tuple[str, str], float], runtime: str, dtype: str, backend: str) -> float:
    """The error a row of `runtime`'s `backend` build may show from rounding alone: its export's own, or
    the rounding of the build's arithmetic (ARITHMETIC_DTYPE) where that is the larger."""
    own = quant_errors[runtime, dtype]
    arithmetic = ARITHMETIC_DTYPE.get(backend)
    return own if arithmetic is None else max(own, quant_errors[runtime, arithmetic])


def tolerance(quant_error: float) -> float:
    """The agreement tolerance of an export whose own rounding moves the logits by `quant_error`."""
    return max(F32_TOLERANCE, MARGIN * quant_error)
