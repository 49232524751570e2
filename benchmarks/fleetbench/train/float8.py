"""Float8 training through torchao: its tensorwise and rowwise recipes, on GPUs whose table entry has FP8.

`torchao.float8.convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe),
module_filter_fn=...)` swaps the model's `nn.Linear` layers for `Float8Linear`, whose matmuls run as
`torch._scaled_mm` on FP8 tensor cores with dynamic scales (tensorwise: one scale per tensor;
rowwise: one per row, more accurate, a little slower), the way torchtitan's Float8Converter calls it.
Left out, as torchtitan leaves them out: the output head (the last linear) and linears whose
dimensions are not multiples of 16 (what `_scaled_mm` needs). The seed block's attention
projections live inside `nn.MultiheadAttention` (its own weights, not an `nn.Linear` it calls) and
stay in bf16.

Refused, with one line, where it cannot run: on the CPU, on a GPU whose GPU-table entry has no FP8
(fleetbench.gpus: CC 8.9 and later, MI300X), on a GPU the table lacks, and without bf16
mixed precision (the recipes cast from bf16).
"""

from __future__ import annotations

from typing import Literal

from torch import nn

from fleetbench.devices import DeviceInfo
from fleetbench.errors import UserError
from fleetbench.gpus import datasheet_peak

Float8Recipe = Literal["off", "tensorwise", "rowwise"]
RECIPES = ("tensorwise", "rowwise")


def float8_refusal(recipe: str, device: DeviceInfo, bf16: bool) -> str | None:
    """Why `train.float8=recipe` cannot run on `device`, in one line; None when it can (or is off)."""
    if recipe == "off":
        return None
    said = f"train.float8={recipe}"
    if device.backend != "cuda":
        return (
            f"{said} needs a GPU with FP8 tensor cores (CC 8.9+: Ada, Hopper, Blackwell; MI300X) and this run is "
            f"on the {device.backend.upper()} ({device.name}); accepted here: train.float8=off"
        )
    sheet = datasheet_peak(device.name)
    if sheet is None:
        return (
            f"{said}: {device.name!r} is not in the GPU table (fleetbench.gpus), so whether it has FP8 "
            "tensor cores is unknown; accepted here: train.float8=off"
        )
    if not sheet.has_fp8:
        return (
            f"{said}: the {sheet.model} has no FP8 tensor cores (GPU table, CC {sheet.cc}); accepted: train.float8=off"
        )
    if not bf16:
        return f"{said} casts from bf16: it needs train.mixed_precision=bf16 (or unset on CUDA); accepted: bf16"
    return None


def check_float8(recipe: str, device: DeviceInfo, bf16: bool) -> None:
    """Raise the refusal as a UserError (exit 2) before anything is launched."""
    refusal = float8_refusal(recipe, device, bf16)
    if refusal is not None:
        raise UserError(refusal)


def _convertible(module: nn.Module, fqn: str) -> bool:
    """torchtitan's filter: every nn.Linear but the output head, with both dimensions multiples of 16."""
    if not isinstance(module, nn.Linear):
        return True  # containers are walked into
    if type(module) is not nn.Linear or fqn == "output" or fqn.endswith(".output"):
        return False  # MultiheadAttention's out_proj (a subclass it never calls as a module) and the head
    return module.in_features % 16 == 0 and module.out_features % 16 == 0


def apply_float8(model: nn.Module, recipe: str) -> int:
    """Swap the model's eligible linears for torchao's Float8Linear of `recipe`; returns how many were swapped."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # type: ignore[import-untyped]

    config = Float8LinearConfig.from_recipe_name(recipe)
    convert_to_float8_training(model, config=config, module_filter_fn=_convertible)
    return float8_linears(model)


def float8_linears(model: nn.Module) -> int:
    """How many of the model's layers are torchao's Float8Linear (0 without train.float8)."""
    return sum(type(m).__name__ == "Float8Linear" for m in model.modules())
