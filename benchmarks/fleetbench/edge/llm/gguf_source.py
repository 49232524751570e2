"""An existing llama GGUF file (`edge llm --gguf FILE`): run as it is by llama.cpp, and read into the suite's
llama for the eager reference its agreement is checked against.

The shape comes from the file's `llama.*` metadata, the weights from its tensors, dequantized by the
`gguf` package (the reference Python of llama.cpp's formats), so eager PyTorch computes with exactly
the values the file holds. Q and K are in Meta's adjacent-pair layout in a GGUF (convert_hf_to_gguf.py
permutes them so), as the suite's llama has them. RoPE: no `rope_freqs.weight` is plain RoPE; one
equal to Llama 3's default scaling is that scaling; any other is refused. A file without
`output.weight` ties the output head to the embedding, as llama.cpp does.

Tolerance: the weights need no rounding (eager has the file's values), but llama.cpp's CPU matrix
products round their inputs, the activations: to q8_0 blocks (32 values, one scale) for weights of
32-value block types, to q8_K blocks (256 values) for k-quants, to f16 for f16 weights. Eager runs once
more with every linear layer's input rounded so (`activation_rounding_error`), and the tolerance is
MARGIN times that logit error, as the suite's own exports derive theirs from their weights' rounding;
a float32 file keeps the float32 tolerance. (Rounding the file's weights once more would measure
nothing: a dequantized q8_0 block quantizes back to itself.)
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


def activation_block(dtype: str) -> int | None:
    """The block llama.cpp's CPU path quantizes a matrix product's activations to for weights of `dtype`:
    256 (q8_K) for k-quants, 32 (q8_0) for the other quantized types; 0 for f16 (rounded to f16); None for f32."""
    if dtype == "f32":
        return None
    if dtype in ("f16", "bf16"):
        return 0
    return 256 if "_k" in dtype else 32


def round_activations(x: torch.Tensor, block: int) -> torch.Tensor:
    """`x` as llama.cpp hands it to a matrix product: f16 (block 0), or int8 blocks of `block` values with
    one scale each (max |x| / 127, as ggml's quantize_row_q8_0 / q8_K); float32 again."""
    if block == 0:
        return x.half().float()
    width = x.shape[-1]
    if width % block:
        return x
    blocks = x.float().reshape(-1, block)
    scale = blocks.abs().amax(dim=1, keepdim=True) / 127.0
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return (torch.round(blocks / safe).clamp(-127, 127) * scale).reshape(x.shape).to(x.dtype)


def activation_rounding_error(model: Llama, prompt: list[int], reference: np.ndarray, dtype: str) -> float:
    """The logit error of eager with every linear layer's input rounded as llama.cpp rounds it for `dtype`."""
    from fleetbench.edge.llm.tolerance import logit_error

    block = activation_block(dtype)
    if block is None:
        return 0.0

    def hook(_module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return (round_activations(inputs[0], block), *inputs[1:])

    handles = [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([prompt]))[0].float().numpy()
    finally:
        for handle in handles:
            handle.remove()
    return logit_error(logits, reference)
