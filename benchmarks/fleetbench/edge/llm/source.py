"""The llama-family model the edge runtimes run: a fresh, seeded init of a `train` preset, or the weights
of a trainer checkpoint (a DCP step folder, read without a process group, or a consolidated
`torch.save` state dict)."""

from __future__ import annotations

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
    _check_memory(preset, shape)
    model = Llama(shape)
    if checkpoint is None:
        init_weights(model, seed)
    else:
        _load(model, checkpoint)
    return model.eval()


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
