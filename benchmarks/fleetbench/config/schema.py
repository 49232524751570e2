"""The configuration schema. Every section rejects unknown keys, wrong types and out-of-range values."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleetbench.runinfo import RUN_ID_PATTERN, RUN_ID_RULE
from fleetbench.train.config import TrainConfig


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def validate_pushgateway_url(url: str) -> str:
    """Accept http(s)://host[:port][/prefix]; anything else is a typo we should catch before a run."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has an invalid port; expected http(s)://HOST[:PORT], e.g. http://127.0.0.1:9091") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("is not an http(s) URL; expected http(s)://HOST[:PORT], e.g. http://127.0.0.1:9091")
    if parts.query or parts.fragment or any(c.isspace() for c in url):
        raise ValueError("must not carry a query, fragment or spaces; expected http(s)://HOST[:PORT]")
    if port == 0:
        raise ValueError("has port 0; expected a port in 1-65535")
    return url.rstrip("/")


class RunConfig(StrictModel):
    results_dir: Path = Path("results")
    run_id: str | None = None

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        if value is not None and (not RUN_ID_PATTERN.fullmatch(value) or value in {".", ".."}):
            raise ValueError(f"use {RUN_ID_RULE}")
        return value


class TelemetryConfig(StrictModel):
    pushgateway: str | None = Field(
        default=None, description="Pushgateway base URL; unset means no push (records and .prom still written)"
    )
    push_timeout_s: float = Field(default=2.0, gt=0, le=60)
    push_retries: int = Field(default=3, ge=0, le=10)
    push_backoff_s: float = Field(default=0.2, ge=0, le=10)
    push_interval_s: float = Field(default=1.0, ge=0, le=3600, description="least time between background pushes")
    spool_dir: Path | None = Field(default=None, description="default: <results_dir>/.spool")
    textfile_dir: Path | None = Field(
        default=None, description="node_exporter textfile collector folder; the run folder is always written"
    )
    http_port: int | None = Field(default=None, ge=0, le=65535, description="serve /metrics while running")
    http_addr: str = "127.0.0.1"

    @field_validator("pushgateway")
    @classmethod
    def _pushgateway(cls, value: str | None) -> str | None:
        return None if value is None else validate_pushgateway_url(value)


Size = Annotated[int, Field(ge=16, le=16384)]
CopyMiB = Annotated[int, Field(ge=1, le=4096)]


class ProbeConfig(StrictModel):
    """The timed matmul and copy-bandwidth probe: a short real workload through the telemetry path."""

    matmul_sizes: list[Size] = Field(default=[512, 1024], min_length=1, max_length=8)
    copy_mib: list[CopyMiB] = Field(default=[64], min_length=0, max_length=8)
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    min_run_time_s: float = Field(default=0.3, gt=0, le=60)
    threads: int | None = Field(default=None, ge=1, le=1024)

    @field_validator("matmul_sizes", "copy_mib")
    @classmethod
    def _unique(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError("values must be unique")
        return value


Ratio = Annotated[float, Field(ge=0, le=1)]


class ProfileThresholds(StrictModel):
    """Class boundaries on compute and memory utilisation, 0-1 (see fleetbench.profile.classify)."""

    memory_bound_compute_below: Ratio = 0.25
    memory_bound_memory_above: Ratio = 0.75
    compute_bound_compute_above: Ratio = 0.75
    compute_bound_memory_below: Ratio = 0.50
    latency_bound_below: Ratio = 0.60

    @model_validator(mode="after")
    def _ordered(self) -> ProfileThresholds:
        if self.memory_bound_compute_below > self.compute_bound_compute_above:
            raise ValueError("memory_bound_compute_below must not exceed compute_bound_compute_above")
        if self.compute_bound_memory_below > self.memory_bound_memory_above:
            raise ValueError("compute_bound_memory_below must not exceed memory_bound_memory_above")
        return self


class NcuConfig(StrictModel):
    """How `fleetbench ncu run` calls Nsight Compute (ncu --set SET --target-processes ... -o REPORT)."""

    executable: str = Field(default="ncu", min_length=1, description="ncu binary name or path")
    set_name: str = Field(default="full", pattern=r"^[A-Za-z0-9_-]+$", description="ncu --set")
    target_processes: Literal["all", "application-only"] = "all"
    kernel_name: str | None = Field(default=None, min_length=1, description="ncu --kernel-name (regex:... too)")
    launch_skip: int | None = Field(default=None, ge=0)
    launch_count: int | None = Field(default=None, ge=1)
    clock_control: Literal["base", "none", "reset"] = "base"
    nvtx_include: str | None = Field(default=None, min_length=1, description="ncu --nvtx --nvtx-include")
    nvtx_push_pop_scope: Literal["thread", "process"] = Field(
        default="process", description="ncu --nvtx-push-pop-scope; process: autograd's backward threads count too"
    )
    extra_args: list[str] = Field(default_factory=list, max_length=32)
    timeout_s: float = Field(default=7200, gt=0, le=86400)


class ProfileConfig(StrictModel):
    """`fleetbench profile` / `ncu` / `roofline`: what to profile, how, and how to classify it."""

    workload: Literal["auto", "train", "linear", "script", "module"] = Field(
        default="auto", description="auto: script/module when given, else the trainer, else the Linear probe"
    )
    script: Path | None = None
    module: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    args: list[str] = Field(default_factory=list, max_length=256, description="argv of the script/module")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    train_preset: str | None = Field(default=None, min_length=1, description="default: tiny on CPU, seed on GPU")
    train_layers: int | None = Field(default=None, ge=1, le=1024, description="profile only the first N blocks")
    linear_size: int = Field(default=4096, ge=16, le=16384)
    linear_batch: int = Field(default=1024, ge=1, le=65536)
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        default="auto", description="Linear probe dtype; auto: float16 on GPU, float32 on CPU"
    )
    wait: int = Field(default=1, ge=0, le=100)
    warmup: int = Field(default=1, ge=0, le=100)
    active: int = Field(default=3, ge=1, le=100)
    record_shapes: bool = True
    profile_memory: bool = True
    with_flops: bool = True
    with_stack: bool = Field(default=True, description="needed by the memory timeline")
    top: int = Field(default=15, ge=1, le=500)
    gzip_above_mib: float = Field(default=20.0, ge=0, le=100000)
    thresholds: ProfileThresholds = Field(default_factory=ProfileThresholds)
    peaks_cache_dir: Path | None = Field(default=None, description="default: ~/.cache/fleetbench/peaks")
    remeasure_peaks: bool = False
    peak_matmul_size: int | None = Field(default=None, ge=16, le=16384, description="default: 2048 CPU, 8192 GPU")
    peak_copy_mib: int | None = Field(default=None, ge=1, le=4096, description="default: 256 CPU, 1024 GPU")
    peak_min_run_time_s: float = Field(default=0.3, gt=0, le=60)
    roofline_labels: int = Field(default=8, ge=0, le=100, description="points labelled on the chart")
    ncu: NcuConfig = Field(default_factory=NcuConfig)

    @model_validator(mode="after")
    def _workload_inputs(self) -> ProfileConfig:
        if self.script is not None and self.module is not None:
            raise ValueError("give profile.script or profile.module, not both")
        if self.workload == "script" and self.script is None:
            raise ValueError("workload 'script' needs profile.script=PATH")
        if self.workload == "module" and self.module is None:
            raise ValueError("workload 'module' needs profile.module=NAME")
        return self


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
    "copy",
]
EDGE_KERNELS: tuple[str, ...] = get_args(EdgeKernel)
EdgeGemmSize = Annotated[int, Field(ge=128, le=16384, multiple_of=128)]


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
    peak_workgroups: int = Field(default=64, ge=1, le=1 << 20, description="of 256 invocations")
    peak_iterations: int = Field(default=1024, ge=16, le=1024, description="FMA steps per chain, a power of two")
    warmup: int = Field(default=2, ge=1, le=1000, description="untimed dispatches first; the first is checked")
    try_time_s: float = Field(default=0.25, gt=0, le=600, description="time budget of one try")
    min_iterations: int = Field(default=3, ge=1, le=100_000, description="timed dispatches per try, at least")
    max_iterations: int = Field(default=200, ge=1, le=1_000_000, description="timed dispatches per try, at most")
    min_tries: int = Field(default=3, ge=1, le=100)
    max_tries: int = Field(default=5, ge=1, le=100)
    cv_target: float = Field(default=0.05, gt=0, le=1, description="stop when the CV of the tries' medians is below")
    cooldown_s: float = Field(default=0.25, ge=0, le=600, description="idle time before each kernel (throttling)")
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

    @field_validator("kernels", "gemm_sizes", "dtypes", "cpu_affinity", "partitioners")
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


class FleetbenchConfig(StrictModel):
    run: RunConfig = Field(default_factory=RunConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    probe: ProbeConfig = Field(default_factory=ProbeConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    profile: ProfileConfig = Field(default_factory=ProfileConfig)
    edge: EdgeConfig = Field(default_factory=EdgeConfig)
