"""Write the llama-family model (fleetbench.train.llama) as a GGUF file llama.cpp loads, with the `gguf` package.

Architecture `llama`, tensors under llama.cpp's names (token_embd, blk.N.attn_q, ...). The weights
are already in Meta's layout (RoPE on adjacent pairs, llama.cpp's LLAMA_ROPE_TYPE_NORM), so Q and K
are written as they are, without the permutation convert_hf_to_gguf.py undoes for Hugging Face
checkpoints; Llama 3's frequency scaling goes in `rope_freqs.weight`, as that script writes it.

The tokenizer is byte-level like the trainer's text data: ids 0-255 are the bytes (`<0xNN>`, type
BYTE, which llama.cpp's SentencePiece-style "llama" tokenizer falls back to), then `<s>` and `</s>`,
the rest unused. The benchmark feeds token ids, so no text goes through it; it is there so the
file is complete and any llama.cpp tool loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from fleetbench.train.llama import Llama
from fleetbench.train.rope import ROPE_ORIGINAL_CONTEXT, rope_scale_factors

GgufType = Literal["f32", "f16", "q8_0"]
BOS_ID, EOS_ID = 256, 257

# fleetbench parameter name (inside layers.N.) -> llama.cpp tensor name (inside blk.N.)
BLOCK_TENSORS = {
    "attention_norm.weight": "attn_norm.weight",
    "attention.wq.weight": "attn_q.weight",
    "attention.wk.weight": "attn_k.weight",
    "attention.wv.weight": "attn_v.weight",
    "attention.wo.weight": "attn_output.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "feed_forward.w1.weight": "ffn_gate.weight",
    "feed_forward.w3.weight": "ffn_up.weight",
    "feed_forward.w2.weight": "ffn_down.weight",
}
TOP_TENSORS = {
    "tok_embeddings.weight": "token_embd.weight",
    "norm.weight": "output_norm.weight",
    "output.weight": "output.weight",
}


def gguf_name(name: str) -> str:
    """llama.cpp's name of a fleetbench llama parameter."""
    if name in TOP_TENSORS:
        return TOP_TENSORS[name]
    _layers, index, rest = name.split(".", 2)
    return f"blk.{index}.{BLOCK_TENSORS[rest]}"


def _tokenizer(writer: Any, gguf: Any, vocab_size: int) -> None:
    tokens, types = [], []
    for i in range(vocab_size):
        if i < 256:
            tokens.append(f"<0x{i:02X}>")
            types.append(gguf.TokenType.BYTE)
        elif i in (BOS_ID, EOS_ID):
            tokens.append("<s>" if i == BOS_ID else "</s>")
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(f"<unused{i}>")
            types.append(gguf.TokenType.UNUSED)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab_size)
    writer.add_token_types(types)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(False)


def _tensor(gguf: Any, array: np.ndarray, dtype: GgufType) -> tuple[np.ndarray, Any]:
    """The array as stored and its GGML type: norms (1-D) stay f32, as llama.cpp's converter keeps them."""
    if array.ndim == 1 or dtype == "f32":
        return array.astype(np.float32), gguf.GGMLQuantizationType.F32
    if dtype == "f16":
        return array.astype(np.float16), gguf.GGMLQuantizationType.F16
    kind = gguf.GGMLQuantizationType.Q8_0
    return gguf.quants.quantize(array.astype(np.float32), kind), kind


def export_gguf(model: Llama, path: Path, dtype: GgufType, name: str = "fleetbench-llama") -> Path:
    """Write `model` to `path` in `dtype` (f32, f16 or q8_0 for the matrices); returns the path."""
    import gguf

    shape = model.shape
    if dtype == "q8_0" and (shape.dim % 32 or shape.ffn_dim % 32):
        raise ValueError(f"q8_0 needs rows of a multiple of 32 values; dim {shape.dim}, ffn_dim {shape.ffn_dim}")
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16}.get(
        dtype, gguf.LlamaFileType.MOSTLY_Q8_0
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    scaling = shape.rope_scaling
    writer.add_context_length(int(scaling[3]) if scaling else ROPE_ORIGINAL_CONTEXT)
    writer.add_embedding_length(shape.dim)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn_dim)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.n_kv_heads)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.norm_eps)
    writer.add_vocab_size(shape.vocab_size)
    writer.add_file_type(file_type)
    _tokenizer(writer, gguf, shape.vocab_size)
    if scaling is not None:  # no rope_freqs: llama.cpp's plain RoPE
        writer.add_tensor("rope_freqs.weight", rope_scale_factors(shape.head_dim, shape.rope_theta, scaling))
    for param_name, tensor in model.state_dict().items():
        data, kind = _tensor(gguf, tensor.detach().float().cpu().numpy(), dtype)
        writer.add_tensor(gguf_name(param_name), data, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
