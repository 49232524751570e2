"""The llama-family model the edge runtimes run: a fresh, seeded init of a `train` preset, the weights
of a trainer checkpoint (a DCP step folder, read without a process group, or a consolidated
`torch.save` state dict), or a Hugging Face llama folder (fleetbench.edge.llm.hf_source).

A checkpoint's shape is read from the checkpoint itself, so a trained llama of any shape exports:
width, vocabulary, depth, MLP width and key/value width from its tensors' shapes; the head count,
RoPE base and norm epsilon, which no tensor shows, from the training run's saved config (the `train`
record of records.jsonl in the run folder above `checkpoints/`) where it is there and agrees with
the tensors, else from the preset (its head width)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from fleetbench.config.train import PRESETS, TrainConfig
from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file
from fleetbench.train.decoder import init_weights, param_counts
from fleetbench.train.llama import Llama
from fleetbench.train.plan import ModelShape, resolve_plan


def build_llama(
    preset: str, seed: int, checkpoint: Path | None = None, overrides: dict[str, int] | None = None
) -> Llama:
    """The preset's llama (train.model=llama, `overrides` over its shape), weights from `checkpoint` or `seed`."""
    try:
        cfg = TrainConfig.model_validate({"preset": preset, "model": "llama", **(overrides or {})})
    except ValueError as exc:
        raise UserError(
            f"edge llm: preset {preset!r} is not accepted ({exc}); accepted: {', '.join(PRESETS)}"
        ) from None
    shape = resolve_plan(cfg, world_size=1).shape
    if checkpoint is not None:
        shape = checkpoint_shape(checkpoint, shape)
    _check_memory(preset, shape)
    model = Llama(shape)
    if checkpoint is None:
        init_weights(model, seed)
    else:
        _load(model, checkpoint)
    return model.eval()


def checkpoint_shape(checkpoint: Path, preset: ModelShape) -> ModelShape:
    """The llama shape of `checkpoint`'s tensors (see the module docstring); `preset` where they say nothing
    (a checkpoint that is no llama: the load then names the mismatch)."""
    shapes = _tensor_shapes(checkpoint)
    embedding, wk, w1 = (shapes.get(n) for n in ("tok_embeddings.weight", "layers.0.attention.wk.weight", "layers.0.feed_forward.w1.weight"))  # fmt: skip
    if embedding is None or wk is None or w1 is None or len(embedding) != 2 or len(wk) != 2 or len(w1) != 2:
        return preset
    vocab, dim = embedding
    layers = len({name.split(".")[1] for name in shapes if name.startswith("layers.")})
    saved = _saved_shape(checkpoint)
    if saved is not None and (saved.vocab_size, saved.dim, saved.layers, saved.ffn_dim) == (vocab, dim, layers, w1[0]):
        return saved
    heads = preset.heads  # what the trainer keeps when only train.dim is overridden
    if dim % heads or wk[0] % (dim // heads):
        raise UserError(
            f"checkpoint {checkpoint}: width {dim} and key/value width {wk[0]} do not split into the preset's "
            f"{heads} heads, and no saved config beside it says its heads; accepted: a checkpoint inside its "
            "training run's folder (results/RUN/checkpoints/step_N), or one of the preset's head count"
        )
    kv_heads = wk[0] // (dim // heads)
    return replace(preset, dim=dim, layers=layers, ffn_dim=w1[0], vocab_size=vocab, kv_heads=kv_heads)


def _tensor_shapes(checkpoint: Path) -> dict[str, tuple[int, ...]]:
    """Parameter name -> shape, from a DCP folder's metadata or a state dict file; {} where neither reads
    (the load that follows names why)."""
    if checkpoint.is_dir():
        from torch.distributed.checkpoint.api import CheckpointException
        from torch.distributed.checkpoint.filesystem import FileSystemReader

        if not (checkpoint / ".metadata").is_file():
            return {}
        try:
            metadata = FileSystemReader(str(checkpoint)).read_metadata()
        # DCP's CheckpointException derives from BaseException; pickle and file errors from Exception
        except (Exception, CheckpointException):
            return {}
        entries = getattr(metadata, "state_dict_metadata", {})
        return {
            name.removeprefix("model."): tuple(entry.size)
            for name, entry in entries.items()
            if name.startswith("model.") and hasattr(entry, "size")
        }
    if not checkpoint.is_file():  # missing, or a FIFO or device (opening one could block): _load_file says which
        return {}
    try:
        with checkpoint.open("rb") as handle:
            if file_kind(handle.read(SNIFF_BYTES), checkpoint.stat().st_size) is not None:
                return {}
        loaded = torch.load(checkpoint, map_location="meta", weights_only=True)
    except Exception:  # unreadable or damaged: _load_file says which, in one line
        return {}
    loaded = loaded.get("model", loaded) if isinstance(loaded, dict) else loaded
    if not isinstance(loaded, dict):
        return {}
    return {str(k): tuple(v.shape) for k, v in loaded.items() if isinstance(v, torch.Tensor)}


def _saved_shape(checkpoint: Path) -> ModelShape | None:
    """The llama shape the training run's saved config gives, for a checkpoint at RUN/checkpoints/step_N."""
    from fleetbench.results.store import read_records

    run = checkpoint.resolve().parent.parent
    if not (run / "records.jsonl").is_file():
        return None
    try:
        records = read_records(run)
    except UserError:
        return None
    for record in records:
        if record.benchmark != "train":
            continue
        try:
            cfg = TrainConfig.model_validate(record.config)
            shape = resolve_plan(cfg, world_size=1).shape
        except (ValueError, UserError):
            continue
        if shape.model == "llama":
            return shape
    return None


def _check_memory(preset: str, shape: ModelShape) -> None:
    """Refuse, before allocating, a model whose fp32 weights (twice: the model and an export being
    written) do not fit in the memory available now: Llama-3-8B needs about 64 GB."""
    import psutil

    need = 2 * 4 * param_counts(shape)[0]
    available = psutil.virtual_memory().available
    if need > available:
        raise UserError(
            f"edge llm: preset {preset} needs about {need / 2**30:.0f} GiB (fp32 weights, model and export) but "
            f"{available / 2**30:.0f} GiB are available; accepted here: llama3-debug, or a host with more memory"
        )


CHECKPOINT_ACCEPTED = "accepted: a DCP step folder (step_NNNNNNNN) or a torch.save state dict of this preset's llama"
SNIFF_BYTES = 64


def file_kind(head: bytes, size: int) -> str | None:
    """What a checkpoint file that is no torch.save file is, from its first bytes; None for one torch may
    read (a zip archive, the newer format, or a pickle, the legacy one)."""
    if size == 0:
        return "the file is empty"
    if head[:4] == b"GGUF":
        return "a GGUF model (llama.cpp's format), not a trainer checkpoint"
    if head[4:8] in (b"ET12", b"FT01"):
        return "an ExecuTorch program or data file (.pte/.ptd), not a trainer checkpoint"
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":
        return None
    if len(head) >= 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < size:
        return "a safetensors file, not a trainer checkpoint"
    if size < 4:
        return f"{size} bytes, shorter than any checkpoint"
    return f"not a torch.save file (it begins {head[:8]!r})"


def _load(model: Llama, checkpoint: Path) -> None:
    """Weights from a DCP step folder (its `.metadata`) or a consolidated state dict file, all finite;
    a UserError for anything else (damaged, another format, another model or width, code in a pickle)."""
    if checkpoint.is_dir():
        _load_dcp(model, checkpoint)
    else:
        _load_file(model, checkpoint)
    bad = [name for name, tensor in model.state_dict().items() if not bool(torch.isfinite(tensor).all())]
    if bad:
        raise UserError(
            f"checkpoint {checkpoint} has NaN or infinite weights in {len(bad)} tensor(s) (first: {bad[0]}); "
            "accepted: a checkpoint of a run whose loss stayed finite"
        )


def _load_dcp(model: Llama, checkpoint: Path) -> None:
    from torch.distributed.checkpoint import state_dict_loader as dcp_loader
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    if not (checkpoint / ".metadata").is_file():
        raise UserError(f"checkpoint {checkpoint} has no .metadata; {CHECKPOINT_ACCEPTED}")
    state = {"model": model.state_dict()}
    try:
        dcp_loader.load(state, storage_reader=FileSystemReader(str(checkpoint)), no_dist=True)
    # DCP raises CheckpointException (a BaseException, not an Exception) around what its readers raised,
    # and RuntimeError, KeyError, EOFError or pickle's errors for damaged metadata.
    except (Exception, CheckpointException) as exc:
        raise UserError(
            f"checkpoint {checkpoint} is damaged or does not fit the llama model ({_first_cause(exc)}); "
            f"{CHECKPOINT_ACCEPTED}"
        ) from None
    _fit(model, state["model"], checkpoint)


def _first_cause(exc: BaseException) -> str:
    """`Type: first line` of the error underneath DCP's wrapper (its per-rank failures), cut to 200 characters."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        inner = next(iter(failures.values()))
        if isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
            exc = inner[0]
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _load_file(model: Llama, checkpoint: Path) -> None:
    import pickle

    readable_file(checkpoint, "checkpoint", CHECKPOINT_ACCEPTED)
    try:
        size = checkpoint.stat().st_size
        with checkpoint.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError as exc:
        raise UserError(
            f"checkpoint {checkpoint} cannot be read ({exc.strerror or exc}); {CHECKPOINT_ACCEPTED}"
        ) from None
    kind = file_kind(head, size)
    if kind is not None:
        raise UserError(f"checkpoint {checkpoint}: {kind}; {CHECKPOINT_ACCEPTED}")
    try:
        loaded = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only" in str(exc).lower() or "weights_only" in str(exc):
            raise UserError(
                f"checkpoint {checkpoint} holds a pickle that would run code or build objects other than tensors; "
                f"refused, nothing of it was run; {CHECKPOINT_ACCEPTED}"
            ) from None
        raise UserError(f"checkpoint {checkpoint} is damaged ({_first_cause(exc)}); {CHECKPOINT_ACCEPTED}") from None
    except Exception as exc:  # a cut or altered file: EOFError, RuntimeError (zip), KeyError, ValueError ...
        raise UserError(f"checkpoint {checkpoint} is damaged ({_first_cause(exc)}); {CHECKPOINT_ACCEPTED}") from None
    loaded = loaded.get("model", loaded) if isinstance(loaded, dict) else loaded
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise UserError(
            f"checkpoint {checkpoint} holds a {type(loaded).__name__}, not a state dict of tensors; {CHECKPOINT_ACCEPTED}"
        )
    _fit(model, loaded, checkpoint)


def _fit(model: Llama, state: dict[str, torch.Tensor], checkpoint: Path) -> None:
    """Load `state` into `model`; a UserError naming the first mismatch (another model, width or depth)."""
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError, KeyError, ValueError) as exc:
        raise UserError(
            f"checkpoint {checkpoint} does not fit the llama model ({_first_cause(exc)}); {CHECKPOINT_ACCEPTED}"
        ) from None
