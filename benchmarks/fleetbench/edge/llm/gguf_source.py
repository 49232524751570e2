"""An existing llama GGUF file (`edge llm --gguf FILE`): run as it is by llama.cpp, and read into the suite's
llama for the eager reference its agreement is checked against.

The shape comes from the file's `llama.*` metadata, the weights from its tensors, dequantized by the
`gguf` package (the reference Python of llama.cpp's formats), so eager PyTorch computes with exactly
the values the file holds. Q and K are in Meta's adjacent-pair layout in a GGUF (convert_hf_to_gguf.py
permutes them so), as the suite's llama has them. RoPE: no `rope_freqs.weight` is plain RoPE; one
equal to Llama 3's default scaling is that scaling; any other is refused. A file without
`output.weight` ties the output head to the embedding, as llama.cpp does.

Tolerance: the weights need no rounding (eager has the file's values), but llama.cpp's CPU matrix
products round the activations (to q8_0/q8_K blocks for quantized weights, to f16 for f16 weights);
that rounding is bounded by q8_0's, so the tolerance is derived from eager's logit error with the
file's weights passed once more through q8_0 (f16 where a row is not a multiple of 32), as the
suite's own exports derive theirs; a float32 file keeps the float32 tolerance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file
from fleetbench.train.llama import Llama
from fleetbench.train.plan import ModelShape
from fleetbench.train.rope import LLAMA3_ROPE_SCALING, rope_scale_factors

ACCEPTED = "accepted: a GGUF file of architecture llama (llama.cpp's format, as convert_hf_to_gguf.py writes it)"


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return None
    value = field.contents()
    return value


def file_type_name(reader: Any) -> str:
    """The file's type as the suite names dtypes (f32, f16, q8_0, q4_0, q4_k_m, ...)."""
    import gguf

    code = _field(reader, "general.file_type")
    if code is None:
        return "unknown"
    try:
        name = gguf.LlamaFileType(int(code)).name.lower()
    except ValueError:
        return f"file type {code}"
    return name.removeprefix("mostly_").removeprefix("all_")


def read_header(path: Path) -> Any:
    """The GGUF reader of `path`; a UserError in one line for a missing file or one that is no GGUF."""
    import gguf

    readable_file(path, "--gguf", ACCEPTED)
    with path.open("rb") as handle:
        head = handle.read(4)
    if head != b"GGUF":
        raise UserError(f"--gguf {path}: not a GGUF file (it begins {head!r}); {ACCEPTED}")
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError, UnicodeDecodeError) as exc:
        raise UserError(f"--gguf {path} is damaged ({type(exc).__name__}: {exc}); {ACCEPTED}") from None


def load_gguf(path: Path) -> tuple[Llama, str]:
    """The suite's llama with the file's weights, and the file's type name; a UserError for anything else."""
    from fleetbench.edge.llm.gguf_quant import parameter_name, read_gguf_tensors

    reader = read_header(path)
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise UserError(f"--gguf {path}: architecture {arch!r}; {ACCEPTED}")
    try:
        tensors = read_gguf_tensors(path)
    except (NotImplementedError, ValueError) as exc:
        raise UserError(f"--gguf {path}: a tensor type the gguf package cannot read ({exc}); {ACCEPTED}") from None
    if "token_embd.weight" not in tensors:
        raise UserError(f"--gguf {path} has no token_embd.weight; {ACCEPTED}")
    vocab, dim = tensors["token_embd.weight"][1].shape
    heads = _field(reader, "llama.attention.head_count")
    numbers = {
        "llama.block_count": _field(reader, "llama.block_count"),
        "llama.feed_forward_length": _field(reader, "llama.feed_forward_length"),
        "llama.attention.head_count": heads,
    }
    missing = [key for key, value in numbers.items() if value is None]
    if missing:
        raise UserError(f"--gguf {path} lacks {', '.join(missing)}; {ACCEPTED}")
    theta = float(_field(reader, "llama.rope.freq_base") or 10000.0)
    kv_heads = int(_field(reader, "llama.attention.head_count_kv") or heads)
    scaling = None
    if "rope_freqs.weight" in tensors:
        freqs = tensors["rope_freqs.weight"][1]
        if not np.allclose(freqs, rope_scale_factors(dim // int(heads), theta, LLAMA3_ROPE_SCALING), rtol=1e-5):
            raise UserError(f"--gguf {path}: rope_freqs.weight is not Llama 3's default scaling; {ACCEPTED}")
        scaling = LLAMA3_ROPE_SCALING
    shape = ModelShape(
        dim=int(dim),
        layers=int(numbers["llama.block_count"]),
        heads=int(heads),
        ffn_dim=int(numbers["llama.feed_forward_length"]),
        vocab_size=int(vocab),
        model="llama",
        kv_heads=kv_heads,
        rope_theta=theta,
        norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon") or 1e-5),
        rope_scaling=scaling,
    )
    state = {name: torch.from_numpy(values) for t, (_k, values) in tensors.items() if (name := parameter_name(t))}
    state.setdefault("output.weight", state["tok_embeddings.weight"])
    model = Llama(shape)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        detail = lines[1] if len(lines) > 1 else (lines[0] if lines else "")
        raise UserError(f"--gguf {path}: its tensors do not fit its metadata ({detail[:200]}); {ACCEPTED}") from None
    return model.eval(), file_type_name(reader)


def activation_proxy(dtype: str, shape: ModelShape) -> str:
    """The rounding whose weight error stands in for llama.cpp's activation rounding on a file of `dtype`."""
    if dtype == "f32":
        return "f32"
    return "q8_0" if shape.dim % 32 == 0 and shape.ffn_dim % 32 == 0 else "f16"
