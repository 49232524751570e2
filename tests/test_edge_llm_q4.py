"""4-bit llama.cpp files (Q4_0, Q4_K_M by llama.cpp's own quantizer): what the file stores is read back
and checked against the model, so a wrong scale in the file is refused before its error could widen
the tolerance derived from it (fleetbench.edge.llm.gguf_quant)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from fleetbench.edge.llm.source import build_llama

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None,
    reason="llama-cpp-python and gguf not installed: pip install 'fleetbench[llm]'",
)
SMALL = {"layers": 2, "kv_heads": 4}


def _quantized(dtype: str, folder: Path) -> tuple[torch.nn.Module, Path]:
    from fleetbench.edge.llm.job import _export_gguf

    model = build_llama("llama3-debug", seed=2, overrides=SMALL)
    return model, _export_gguf(model, folder, dtype)


def _state(model: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: t.detach().float().numpy() for name, t in model.state_dict().items()}


@pytest.mark.parametrize(("dtype", "matrix_type"), [("q4_0", "Q4_0"), ("q4_k_m", "Q4_K")])
def test_llama_cpp_quantizer_writes_4_bit_types_read_back_within_bounds(
    dtype: str, matrix_type: str, tmp_path: Path
) -> None:
    from fleetbench.edge.llm.gguf_quant import q4_0_bound, relative_rms, stored_weights

    model, path = _quantized(dtype, tmp_path)
    state = _state(model)
    weights, types = stored_weights(path, state)
    assert types["layers.0.attention.wq.weight"] == matrix_type
    assert types["layers.0.attention_norm.weight"] == "F32"  # norms are kept as they are
    if dtype == "q4_k_m":  # its mix: 6-bit for the output and half of attn_v / ffn_down
        assert types["output.weight"] == "Q6_K" and "Q6_K" in {
            types[f"layers.{i}.feed_forward.w2.weight"] for i in (0, 1)
        }
    wq = "layers.0.attention.wq.weight"
    assert 0 < relative_rms(weights[wq], state[wq]) <= q4_0_bound(state[wq])
    assert path.stat().st_size < 0.2 * (tmp_path / "model-f32.gguf").stat().st_size


@pytest.mark.parametrize("dtype", ["q4_0", "q4_k_m"])
def test_a_doubled_scale_in_the_4_bit_file_is_refused(dtype: str, tmp_path: Path) -> None:
    """Each block of Q4_0 and Q4_K begins with its f16 scale (d): doubled on blk.0.attn_q, the tensor is
    twice itself and the file check names it, while the untouched file passes."""
    import gguf

    from fleetbench.edge.llm.gguf_quant import WrongExport, stored_weights

    model, path = _quantized(dtype, tmp_path)
    stored_weights(path, _state(model))
    block_bytes = {"Q4_0": 18, "Q4_K": 144}
    reader = gguf.GGUFReader(str(path), "r+")
    [tensor] = [t for t in reader.tensors if t.name == "blk.0.attn_q.weight"]
    blocks = tensor.data.reshape(-1, block_bytes[tensor.tensor_type.name])
    scales = blocks[:, :2].copy().view(np.float16)
    blocks[:, :2] = (scales * 2).view(np.uint8)
    reader.data.flush()
    del reader, tensor, blocks
    with pytest.raises(WrongExport, match=r"layers\.0\.attention\.wq\.weight \(Q4_(0|K)\) is .* off the model's"):
        stored_weights(path, _state(model))


def test_a_wrong_export_fails_its_row_with_the_file_check_line(tmp_path: Path) -> None:
    from fleetbench.edge.llm.job import LlmRow, Reference, _fill

    ref = Reference(np.zeros((2, 4)), [0], {}, {("llama.cpp", "q4_0"): "model-q4_0.gguf: blk.0 is off"})
    row = LlmRow("llama.cpp", "q4_0", True)
    _fill(row, {"ok": True}, ref, tmp_path / "logits.npy", 1.0)
    assert not row.ok and not row.agrees and row.error == "wrong export: model-q4_0.gguf: blk.0 is off"


def test_q4_k_m_of_a_model_narrower_than_256_falls_back_per_tensor(tmp_path: Path) -> None:
    """Width 128 and MLP 384: no row is a multiple of QK_K (256), so llama.cpp stores no k-quant at all and
    falls back per tensor to 32-value block types; the file check accepts them (finer than Q4_0)."""
    from fleetbench.edge.llm.gguf_quant import stored_weights
    from fleetbench.edge.llm.job import _export_gguf

    model = build_llama("llama3-debug", seed=2, overrides={"layers": 1, "dim": 128, "heads": 8, "ffn_dim": 384})
    _weights, types = stored_weights(_export_gguf(model, tmp_path, "q4_k_m"), _state(model))
    matrices = {name: kind for name, kind in types.items() if not name.endswith("norm.weight")}
    assert not any(kind.endswith("_K") for kind in matrices.values()), matrices
    assert set(matrices.values()) <= {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}, matrices
