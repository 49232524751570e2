"""The trainer's two device defaults, each decided here and nowhere else: the preset and the precision.

- Preset (`train.preset` unset): `seed`, the reference workload, on CUDA; `tiny` on the CPU (and on
  any other device).
- Precision (`train.mixed_precision` unset): FSDP2's `MixedPrecisionPolicy(param_dtype=bfloat16,
  reduce_dtype=float32)` on CUDA under FSDP2; fp32 everywhere else. `--dtype bf16` (or
  `train.mixed_precision=true`) asks for the CUDA policy on the CPU too; gloo carries it.

`fleetbench train` (launcher and ranks), `fleetbench profile`'s train workload and the Make targets,
which pass neither a preset nor a dtype of their own, all take them from here. Each answer says why
it was chosen; the run's record and its first log line show it. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetbench.config.train import ModelFamily, PresetName

__all__ = [
    "CPU_PRESET",
    "CUDA_PRESET",
    "REDUCE_DTYPE",
    "Precision",
    "PresetChoice",
    "choose_precision",
    "choose_preset",
]

CUDA_PRESET: PresetName = "seed"
CPU_PRESET: PresetName = "tiny"
# train.model=llama with no preset: torchtitan's debug model on the CPU, Llama-3-8B on CUDA.
LLAMA_CUDA_PRESET: PresetName = "llama3-8b"
LLAMA_CPU_PRESET: PresetName = "llama3-debug"
REDUCE_DTYPE = "float32"  # gradients are reduce-scattered in fp32 under either policy


@dataclass(frozen=True)
class PresetChoice:
    """The preset a run trains and why: named by the user, or chosen for the device."""

    name: PresetName
    why: str


@dataclass(frozen=True)
class Precision:
    """The dtypes FSDP2 all-gathers the parameters in (and computes in) and reduces the gradients in."""

    param_dtype: str  # a torch dtype's name: bfloat16 or float32
    reduce_dtype: str
    why: str

    @property
    def bf16(self) -> bool:
        """Whether the parameters are all-gathered and used in bfloat16."""
        return self.param_dtype == "bfloat16"

    @property
    def label(self) -> str:
        """Short form for a person: `bf16 params, fp32 reduce` or `fp32`."""
        return "bf16 params, fp32 reduce" if self.bf16 else "fp32"


def choose_preset(preset: PresetName | None, backend: str, model: ModelFamily | None = None) -> PresetChoice:
    """`preset` when the user named one, else `seed` on CUDA and `tiny` on the CPU (for train.model=llama:
    `llama3-8b` on CUDA, `llama3-debug` on the CPU).

    `backend` is the device's compute API as `DeviceInfo.backend` names it: cuda, cpu or mps.
    """
    if preset is not None:
        return PresetChoice(preset, f"train.preset={preset}")
    if model == "llama":
        name = LLAMA_CUDA_PRESET if backend == "cuda" else LLAMA_CPU_PRESET
        return PresetChoice(name, f"automatic: {name} for train.model=llama on {backend.upper()}")
    if backend == "cuda":
        return PresetChoice(CUDA_PRESET, f"automatic: {CUDA_PRESET} on CUDA")
    return PresetChoice(CPU_PRESET, f"automatic: {CPU_PRESET} on {backend.upper()}")


def choose_precision(mixed_precision: bool | None, fsdp: bool, backend: str) -> Precision:
    """bf16 params with fp32 reduce when asked for (or automatically on CUDA under FSDP2), else fp32.

    `backend` as in `choose_preset`; `fsdp` is `train.fsdp` (the policy is FSDP2's).
    """
    if mixed_precision is not None:
        why = f"train.mixed_precision={'true' if mixed_precision else 'false'}"
        return Precision("bfloat16" if mixed_precision else "float32", REDUCE_DTYPE, why)
    if backend == "cuda" and fsdp:
        return Precision("bfloat16", REDUCE_DTYPE, "automatic: bf16 on CUDA under FSDP2")
    if backend == "cuda":
        return Precision("float32", REDUCE_DTYPE, "automatic: fp32 without FSDP2 (no MixedPrecisionPolicy)")
    return Precision("float32", REDUCE_DTYPE, f"automatic: fp32 on {backend.upper()}, --dtype bf16 to change")
