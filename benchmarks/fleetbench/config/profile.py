"""Section `profile`: `fleetbench profile` / `ncu` / `roofline` (what to profile, how, how to classify it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from fleetbench.config.strict import StrictModel

__all__ = ["NcuConfig", "ProfileConfig", "ProfileThresholds", "Ratio"]

Ratio = Annotated[float, Field(ge=0, le=1)]
# `profile.ncu.peak`: KEY=NUMBER[UNIT] pairs, comma-separated (parsed by fleetbench.gpus.parse_peak).
PEAK_PATTERN = (
    r"^\s*(dram|fp32|tensor|bf16|fp16)\s*=\s*[0-9.eE+]+\s*[A-Za-z/]*\s*"
    r"(,\s*(dram|fp32|tensor|bf16|fp16)\s*=\s*[0-9.eE+]+\s*[A-Za-z/]*\s*)*$"
)


class ProfileThresholds(StrictModel):
    """Class boundaries on compute and memory utilisation, 0-1: NVIDIA's SOLBottleneck rule's by default
    (see fleetbench.profile.classify)."""

    high_throughput_at: Ratio = Field(default=0.80, description="a unit at or above this is busy: the bound")
    latency_bound_below: Ratio = Field(default=0.60, description="both units below this: latency_bound")
    leads_by: Ratio = Field(default=0.10, description="in between, a unit this far ahead is the bound")

    @model_validator(mode="before")
    @classmethod
    def _replaced(cls, data: object) -> object:
        if isinstance(data, dict):
            old = sorted(set(data) & set(REPLACED_THRESHOLDS))
            if old:
                raise ValueError(
                    f"{', '.join(old)}: replaced when the classes took NVIDIA's SOLBottleneck rule; set "
                    "high_throughput_at (0.80), latency_bound_below (0.60) or leads_by (0.10) instead "
                    "(docs/configuration.md, profile)"
                )
        return data

    @model_validator(mode="after")
    def _ordered(self) -> ProfileThresholds:
        if self.latency_bound_below > self.high_throughput_at:
            raise ValueError("latency_bound_below must not exceed high_throughput_at")
        return self


# The seed's thresholds, named in the error that says what replaced them.
REPLACED_THRESHOLDS = (
    "memory_bound_compute_below",
    "memory_bound_memory_above",
    "compute_bound_compute_above",
    "compute_bound_memory_below",
)


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
    program: list[str] = Field(
        default_factory=list, max_length=256, description="program and its arguments; empty: the profile workload"
    )
    report: Path | None = Field(default=None, description="report to write; default: <run folder>/ncu/report.ncu-rep")
    gpu: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="the GPU a report was captured on, where the report does not name it (CSV, console log): "
        "its datasheet peaks derive the figures a narrow capture lacks",
    )
    peak: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        pattern=PEAK_PATTERN,
        description="peaks of a GPU the datasheet table lacks, e.g. 'dram=864GB/s,fp32=91.6TFLOPS,tensor=366TFLOPS' "
        "(dram in GB/s or TB/s, fp32 and tensor in TFLOPS or GFLOPS): used instead of the table",
    )


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
    roofline_ncu: Path | None = Field(default=None, description="`fleetbench roofline`: the kernels of this ncu report")
    roofline_ops: Path | None = Field(
        default=None, description="`fleetbench roofline`: the ops of this profile run folder (or its ops.json)"
    )
    ncu: NcuConfig = Field(default_factory=NcuConfig)

    @model_validator(mode="after")
    def _workload_inputs(self) -> ProfileConfig:
        if self.roofline_ncu is not None and self.roofline_ops is not None:
            raise ValueError("give profile.roofline_ncu (--ncu) or profile.roofline_ops (--ops), not both")
        if self.script is not None and self.module is not None:
            raise ValueError("give profile.script or profile.module, not both")
        if self.workload == "script" and self.script is None:
            raise ValueError("workload 'script' needs profile.script=PATH")
        if self.workload == "module" and self.module is None:
            raise ValueError("workload 'module' needs profile.module=NAME")
        return self
