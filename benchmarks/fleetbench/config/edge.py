"""Section `edge`: `fleetbench edge` (wgpu kernels, the PyTorch MPS path, ExecuTorch programs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator, model_validator

from fleetbench.config.strict import StrictModel

__all__ = [
    "EDGE_KERNELS",
    "LLM_RUNTIMES",
    "THERMAL_SOURCES",
    "EdgeConfig",
    "EdgeGemmSize",
    "EdgeKernel",
    "EdgeLlmConfig",
    "LlamaBackend",
    "LlmDtype",
    "LlmRuntime",
    "ThermalSource",
]

EdgeKernel = Literal[
    "gemm_tiled",
    "gemm_vec4",
    "gemm_subgroup",
    "gemm_texture",
    "gemm_vec4_spirv",
    "softmax",
    "rmsnorm",
    "silu",
    "peak_fma",
    "peak_fma_2chain",
    "peak_fma_4chain",
    "peak_fma_spirv",
    "gemm_coopmat",
    "copy",
]
EDGE_KERNELS: tuple[str, ...] = get_args(EdgeKernel)
# Where the thermal state comes from (fleetbench.edge.thermal): sysfs classes and device tools.
ThermalSource = Literal["thermal_zone", "hwmon", "nvidia-smi", "adb", "pmset", "powermetrics", "tegrastats"]
THERMAL_SOURCES: tuple[str, ...] = get_args(ThermalSource)
# nvml and rapl keep energy counters; the others print power, sampled during the work (energy/sampled.py)
EnergySource = Literal["nvml", "rapl", "tegrastats", "powermetrics", "battery", "adb"]
EdgeGemmSize = Annotated[int, Field(ge=128, le=16384, multiple_of=128)]


LlmRuntime = Literal["llama.cpp", "mlx", "executorch"]
LLM_RUNTIMES: tuple[str, ...] = get_args(LlmRuntime)
# q4_0, q4_k_m: llama.cpp's quantizer on the f32 GGUF; int4: MLX's 4-bit (mx.quantize, groups of 64)
LlmDtype = Literal["f32", "f16", "q8_0", "q4_0", "q4_k_m", "int4"]
# llama.cpp's builds (fleetbench.edge.llm.backends): the CPU one, and the Vulkan one beside it
LlamaBackend = Literal["cpu", "vulkan"]


class EdgeLlmConfig(StrictModel):
    """`fleetbench edge llm`: the llama-family model exported once, run by each edge LLM runtime side by side."""

    preset: Literal["llama3-debug", "llama3-8b"] = Field(
        default="llama3-debug", description="a train.model=llama preset"
    )
    checkpoint: Path | None = Field(
        default=None, description="a trainer checkpoint (DCP step folder or state dict file); unset: a fresh init"
    )
    hf: Path | None = Field(
        default=None, description="a Hugging Face llama folder (config.json + *.safetensors), exported to every runtime"
    )
    gguf: Path | None = Field(default=None, description="an existing llama GGUF file, run by llama.cpp as it is")
    runtimes: list[LlmRuntime] = Field(
        default=["llama.cpp", "mlx", "executorch"],
        min_length=1,
        max_length=3,
        description="the edge LLM runtimes to run",
    )
    dtypes: list[LlmDtype] = Field(
        default=["f32", "f16", "q8_0", "q4_0", "q4_k_m", "int4"],
        min_length=1,
        max_length=6,
        description="q8_0, q4_0, q4_k_m: llama.cpp; int4: MLX; executorch: f32",
    )
    mmap: list[bool] = Field(
        default=[True, False], min_length=1, max_length=2, description="memory-mapped and/or read-in weights"
    )
    llamacpp_backends: list[LlamaBackend] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description="llama.cpp builds run side by side; unset: cpu, and vulkan where its build is installed",
    )
    gpu_layers: int | None = Field(
        default=None, ge=0, le=100000, description="layers llama.cpp offloads on a GPU backend; unset: all"
    )
    prompt_tokens: int = Field(default=128, ge=1, le=8192, description="pp: the prompt processed in one batch")
    gen_tokens: int = Field(default=32, ge=1, le=8192, description="tg: tokens generated one at a time")
    agree_tokens: int = Field(default=8, ge=1, le=256, description="greedy tokens compared with eager PyTorch")
    threads: int | None = Field(default=None, ge=1, le=1024, description="unset: the CPUs this process may use")
    min_tries: int = Field(default=3, ge=1, le=100)
    max_tries: int = Field(default=10, ge=1, le=1000)
    cv_target: float = Field(default=0.05, gt=0, le=1, description="stop when the CV of the tries' pp and tg is below")

    @field_validator("runtimes", "dtypes", "mmap", "llamacpp_backends")
    @classmethod
    def _unique(cls, value: list[object] | None) -> list[object] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("values must be unique")
        return value

    @model_validator(mode="after")
    def _bounds(self) -> EdgeLlmConfig:
        if self.min_tries > self.max_tries:
            raise ValueError(f"min_tries={self.min_tries} exceeds max_tries={self.max_tries}")
        sources = [name for name in ("checkpoint", "hf", "gguf") if getattr(self, name) is not None]
        if len(sources) > 1:
            raise ValueError(f"{' and '.join(sources)} are both set; accepted: one model source at a time")
        return self


class EdgeConfig(StrictModel):
    """`fleetbench edge`: kernels on Vulkan/Metal/D3D12 through wgpu, the PyTorch MPS path, ExecuTorch."""

    backend: Literal["auto", "vulkan", "metal", "d3d12", "opengl"] = Field(
        default="auto", description="auto: $WGPU_BACKEND_TYPE if set, else Vulkan/Metal/D3D12, whichever exists"
    )
    adapter: str | None = Field(default=None, min_length=1, description="substring of the adapter's device name")
    power_preference: Literal["high-performance", "low-power"] = "high-performance"
    kernels: list[EdgeKernel] = Field(
        default_factory=lambda: list(get_args(EdgeKernel)),
        max_length=16,
        description="[] with edge.pte: the program only",
    )
    dtypes: list[Literal["float32", "float16"]] | None = Field(
        default=None, min_length=1, max_length=2, description="unset: float32, and float16 where shader-f16 exists"
    )
    timing: Literal["auto", "timestamp", "wallclock"] = Field(
        default="auto", description="auto: GPU timestamp queries where supported, else wall clock"
    )
    gemm_sizes: list[EdgeGemmSize] = Field(default=[1024], min_length=1, max_length=8, description="M = N = K")
    rows: int = Field(default=2048, ge=1, le=1_048_576, description="softmax / rmsnorm rows")
    cols: int = Field(default=1024, ge=1, le=1_048_576, description="softmax / rmsnorm row length")
    silu_elements: int = Field(default=4 * 1024 * 1024, ge=4, le=1 << 30, multiple_of=4)
    copy_mib: int = Field(default=64, ge=1, le=4096)
    peak_workgroups: int = Field(
        default=64, ge=1, le=1 << 20, description="of 256 invocations: where the probe's sizing starts"
    )
    peak_iterations: int = Field(
        default=1024, ge=16, le=1024, description="FMA steps per chain of the count-checked dispatch, a power of two"
    )
    peak_dispatch_s: float = Field(
        default=0.1, gt=0, le=10, description="grow the peak probe's work until one dispatch takes this long"
    )
    warmup: int = Field(default=2, ge=1, le=1000, description="untimed dispatches first; the first is checked")
    try_time_s: float = Field(default=0.25, gt=0, le=600, description="time budget of one try")
    min_iterations: int = Field(default=3, ge=1, le=100_000, description="timed dispatches per try, at least")
    max_iterations: int = Field(default=200, ge=1, le=1_000_000, description="timed dispatches per try, at most")
    min_tries: int = Field(default=3, ge=1, le=100)
    max_tries: int = Field(default=5, ge=1, le=100)
    cv_target: float = Field(default=0.05, gt=0, le=1, description="stop when the CV of the tries' medians is below")
    cooldown_s: float = Field(
        default=0.25, ge=0, le=600, description="idle at least this long before each kernel/model"
    )
    cooldown_margin_c: float = Field(
        default=2.0, gt=0, le=50, description="the default cooldown target: the idle reading plus this (C)"
    )
    cooldown_timeout_s: float = Field(
        default=120.0, ge=0, le=3600, description="give up waiting after this long (a warning on the result)"
    )
    cooldown_target_c: float | None = Field(
        default=None,
        ge=-40,
        le=150,
        description="wait until the hottest moving sensor is at or under this (C); unset: idle reading + margin",
    )
    cooldown_poll_s: float = Field(default=0.5, gt=0, le=60, description="seconds between readings while waiting")
    thermal_sources: list[ThermalSource] = Field(
        default_factory=lambda: list(get_args(ThermalSource)), max_length=7, description="[]: no thermal reading"
    )
    thermal_root: Path = Field(default=Path("/"), description="the folder /sys/class/{thermal,hwmon} are read under")
    energy_sources: list[EnergySource] = Field(
        default_factory=lambda: list(get_args(EnergySource)),
        max_length=6,
        description="where the energy of the timed work is read, first figure wins; []: no energy reading",
    )
    cpu_affinity: list[Annotated[int, Field(ge=0, le=65535)]] | None = Field(
        default=None, min_length=1, max_length=1024, description="CPUs the host process may run on (Linux)"
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    mps: bool = Field(default=True, description="also run the tiny model on PyTorch MPS (Apple silicon only)")
    model_batch: int = Field(default=1, ge=1, le=1024, description="sequences per forward pass (MPS path)")
    pte: Path | None = Field(default=None, description="an ExecuTorch .pte to load and time")
    module: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$",
        description="PKG.MODULE:FACTORY for export, and the eager reference of --pte (default: the trainer's tiny)",
    )
    pte_warmup: int = Field(default=10, ge=0, le=100_000)
    pte_iterations: int = Field(default=50, ge=1, le=1_000_000)
    trim_ratio: float = Field(default=0.1, ge=0, lt=0.5, description="share dropped at each end for the trimmed mean")
    model_tolerance: float = Field(default=1e-3, gt=0, le=1, description="max |out - eager| / max |eager|")
    partitioners: list[Literal["xnnpack", "vulkan", "mps", "coreml"]] = Field(default=["xnnpack"], min_length=1)
    spirv_dir: Path | None = Field(default=None, description="default: <repo>/build/spirv, else ~/.cache")
    plot: bool = True
    llm: EdgeLlmConfig = Field(default_factory=EdgeLlmConfig, description="`edge llm`: the LLM runtimes")

    @field_validator(
        "kernels", "gemm_sizes", "dtypes", "cpu_affinity", "partitioners", "thermal_sources", "energy_sources"
    )
    @classmethod
    def _unique_values(cls, value: list[object] | None) -> list[object] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("values must be unique")
        return value

    @field_validator("peak_iterations")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError("must be a power of two (16-1024), so the probe's result stays exact in float16")
        return value

    @model_validator(mode="after")
    def _ordered_bounds(self) -> EdgeConfig:
        if self.min_tries > self.max_tries:
            raise ValueError(f"min_tries={self.min_tries} exceeds max_tries={self.max_tries}")
        if self.min_iterations > self.max_iterations:
            raise ValueError(f"min_iterations={self.min_iterations} exceeds max_iterations={self.max_iterations}")
        return self
