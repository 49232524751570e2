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


def _load(model: Llama, checkpoint: Path) -> None:
    """Weights from a DCP step folder (its `.metadata`) or a consolidated state dict file; UserError if they do not fit."""
    if checkpoint.is_dir():
        from torch.distributed.checkpoint import state_dict_loader as dcp_loader
        from torch.distributed.checkpoint.filesystem import FileSystemReader

        if not (checkpoint / ".metadata").is_file():
            raise UserError(f"checkpoint {checkpoint} has no .metadata; accepted: a DCP step folder (step_NNNNNNNN)")
        state = {"model": model.state_dict()}
        try:
            dcp_loader.load(state, storage_reader=FileSystemReader(str(checkpoint)), no_dist=True)
        except Exception as exc:  # DCP raises CheckpointException, RuntimeError and KeyError for a mismatch
            raise UserError(
                f"checkpoint {checkpoint} does not fit the llama model: {str(exc).splitlines()[0]}"
            ) from None
        model.load_state_dict(state["model"])
        return
    readable_file(checkpoint, "checkpoint", "a DCP step folder or a torch.save state dict")
    loaded = torch.load(checkpoint, map_location="cpu", weights_only=True)
    loaded = loaded.get("model", loaded) if isinstance(loaded, dict) else loaded
    try:
        model.load_state_dict(loaded)
    except (RuntimeError, TypeError, AttributeError) as exc:
        raise UserError(f"checkpoint {checkpoint} does not fit the llama model: {str(exc).splitlines()[0]}") from None
