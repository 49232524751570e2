"""The model the edge paths run: the trainer's `tiny` preset, or a module the user names.

`edge.module` / `--module PKG.MODULE:FACTORY` names a callable that takes no arguments and returns
either `(module, example_inputs)` or a module with an `example_inputs` attribute (a tuple of tensors).
torch's global seed is set to `edge.seed` first, so factories that draw weights are reproducible and
the eager reference of an exported program has the very weights that were exported.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetbench.errors import UserError

if TYPE_CHECKING:
    import torch

TINY = "fleetbench.edge.model_factory:tiny"


@dataclass
class BuiltModel:
    """A model ready to run or export: the module in eval mode, its example inputs, and how it was made."""

    name: str  # the `model` label: tiny, or the factory's name
    spec: str  # PKG.MODULE:FACTORY, recorded so a .pte's eager reference can be rebuilt
    module: torch.nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    input_high: list[int | None]  # exclusive upper bound of integer inputs (token ids), None for floats


def tiny(seed: int = 0, batch: int = 1) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The trainer's `tiny` preset (fleetbench.train): byte-level decoder, weights from `seed`, eval mode."""
    import torch

    from fleetbench.config.train import PRESETS
    from fleetbench.train.decoder import Decoder, init_weights
    from fleetbench.train.plan import ModelShape

    preset = PRESETS["tiny"]
    shape = ModelShape(preset.dim, preset.layers, preset.heads, preset.ffn_dim, preset.vocab_size)
    model = Decoder(shape)
    init_weights(model, seed)
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, shape.vocab_size, (batch, preset.seq_len), generator=generator)
    return model, (tokens,)


def _resolve(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UserError(f"module {spec!r} is not accepted; accepted: PKG.MODULE:FACTORY")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(
            f"module {spec!r}: cannot import {module_name!r} ({exc}); accepted: an importable module"
        ) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UserError(f"module {spec!r}: {module_name} has no attribute {attr!r}") from None


def build(spec: str | None, seed: int, batch: int = 1) -> BuiltModel:
    """Build the model `spec` names (default: the tiny preset), torch seeded with `seed` first.

    Raises UserError when the factory cannot be imported, raises, or returns something other than
    (module, example_inputs) or a module with an `example_inputs` attribute.
    """
    import torch

    spec = spec or TINY
    factory = _resolve(spec)
    torch.manual_seed(seed)
    if spec == TINY:
        produced: Any = factory(seed=seed, batch=batch)
    else:
        if not callable(factory):
            raise UserError(f"module {spec!r} is not callable; accepted: a factory returning (module, inputs)")
        try:
            produced = factory()
        except Exception as exc:
            raise UserError(f"module {spec!r}: the factory raised {type(exc).__name__}: {exc}") from None
    if isinstance(produced, tuple) and len(produced) == 2 and isinstance(produced[0], torch.nn.Module):
        module, inputs = produced
    elif isinstance(produced, torch.nn.Module) and hasattr(produced, "example_inputs"):
        module, inputs = produced, produced.example_inputs
    else:
        raise UserError(
            f"module {spec!r} returned {type(produced).__name__}; accepted: (module, example_inputs) or a module "
            "with an example_inputs attribute"
        )
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise UserError(f"module {spec!r}: example inputs must be a non-empty tuple of tensors")
    module.eval()
    highs: list[int | None] = []
    for tensor in inputs:
        if tensor.dtype.is_floating_point or tensor.dtype == torch.bool:
            highs.append(None)
        else:
            highs.append(int(tensor.max().item()) + 1 if tensor.numel() else 1)
    if spec == TINY:
        highs = [int(getattr(getattr(module, "shape", None), "vocab_size", highs[0] or 1))]
    name = "tiny" if spec == TINY else spec.rpartition(":")[2]
    return BuiltModel(name=name, spec=spec, module=module, example_inputs=inputs, input_high=highs)
