"""The metric catalogue: every metric the suite exports, declared once.

Benchmarks, exporters, dashboards, the offline report and the tests read this module; a metric
that is not declared here cannot be recorded. Naming follows prometheus.io/docs/practices/naming:
`fleetbench_` prefix, base units (`_seconds`, `_bytes`), ratios 0-1 as `_ratio`, counters `_total`.
GPU utilisation, framebuffer use, power and temperature are left to the DCGM exporter; the edge job's
temperatures are its devices' state around each measurement (phones and boards have no DCGM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

PREFIX = "fleetbench_"

# Labels every series carries: who ran what, where. Values are bounded per run (no steps, no times).
COMMON_LABELS: tuple[str, ...] = ("benchmark", "run_id", "host", "device", "backend", "rank")

MetricKind = Literal["gauge", "counter", "histogram", "summary"]

# Which way a figure improves; None for figures that describe rather than rank (a time share).
Better = Literal["higher", "lower"]

# Unit -> the name suffix it requires and the Grafana unit a panel uses for it.
UNITS: dict[str, tuple[str, str]] = {
    "seconds": ("_seconds", "s"),
    "bytes": ("_bytes", "bytes"),
    "ratio": ("_ratio", "percentunit"),
    "flop_per_second": ("_flop_per_second", "flops"),
    "bytes_per_second": ("_bytes_per_second", "Bps"),
    "timestamp": ("_timestamp_seconds", "dateTimeAsIso"),
    "info": ("_info", "none"),
    "celsius": ("_celsius", "celsius"),
    "count": ("", "short"),
    "joules": ("_joules", "joule"),
    "watts": ("_watts", "watt"),
}

NAME_PATTERN = re.compile(r"^fleetbench_[a-z][a-z0-9_]*[a-z0-9]$")


@dataclass(frozen=True)
class MetricSpec:
    """One declared metric: name, type, unit, help text, its own labels and which way it is better."""

    name: str
    kind: MetricKind
    unit: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None
    better: Better | None = None

    @property
    def label_names(self) -> tuple[str, ...]:
        """Common labels first, then the metric's own."""
        return COMMON_LABELS + self.labels

    @property
    def grafana_unit(self) -> str:
        """The unit name a Grafana panel uses for this metric's unit."""
        return UNITS[self.unit][1]

    @property
    def exposed_names(self) -> tuple[str, ...]:
        """Series names as they appear in an exposition (what PromQL queries name)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_count", f"{self.name}_sum")
        if self.kind == "summary":
            return (self.name, f"{self.name}_count", f"{self.name}_sum")
        return (self.name,)


def _spec(
    name: str,
    kind: MetricKind,
    unit: str,
    help: str,
    *labels: str,
    buckets: tuple[float, ...] | None = None,
    better: Better | None = None,
) -> MetricSpec:
    return MetricSpec(name=name, kind=kind, unit=unit, help=help, labels=labels, buckets=buckets, better=better)


# One entry per metric, laid out as a table; the formatter would scatter it.
# fmt: off
CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        # --- every run -------------------------------------------------------------------------
        _spec("fleetbench_run_info", "gauge", "info",
              "Constant 1; labels carry the run's software identity", "version", "git_revision"),
        _spec("fleetbench_run_start_timestamp_seconds", "gauge", "timestamp",
              "Unix time the run started"),
        _spec("fleetbench_run_end_timestamp_seconds", "gauge", "timestamp",
              "Unix time the run ended (set once, at the end)"),
        _spec("fleetbench_run_duration_seconds", "gauge", "seconds",
              "Wall-clock duration of the run so far, or of the whole run once ended"),
        _spec("fleetbench_run_success", "gauge", "count",
              "Whether the run ended successfully: 1 ok, 0 failed; absent while running"),
        _spec("fleetbench_run_last_success_timestamp_seconds", "gauge", "timestamp",
              "Unix time of the end of the last successful run of this benchmark on this host/rank"),
        # --- memory of the process and of the device allocator ---------------------------------
        _spec("fleetbench_process_peak_rss_bytes", "gauge", "bytes",
              "Peak resident set size of the benchmark process (getrusage ru_maxrss)", better="lower"),
        _spec("fleetbench_memory_peak_allocated_bytes", "gauge", "bytes",
              "Peak bytes held by tensors in the device allocator (torch.cuda.max_memory_allocated)", better="lower"),
        _spec("fleetbench_memory_peak_reserved_bytes", "gauge", "bytes",
              "Peak bytes reserved by the device caching allocator (torch.cuda.max_memory_reserved)"),
        # --- the matmul / copy probe -----------------------------------------------------------
        _spec("fleetbench_probe_op_seconds", "gauge", "seconds",
              "Median time of one probe operation (torch.utils.benchmark)", "probe", "dtype", "size", better="lower"),
        _spec("fleetbench_probe_op_spread_ratio", "gauge", "ratio",
              "Interquartile range of the probe's timings divided by their median", "probe", "dtype", "size"),
        _spec("fleetbench_probe_achieved_flop_per_second", "gauge", "flop_per_second",
              "Achieved floating-point operations per second (FLOPs from torch.utils.flop_counter)",
              "probe", "dtype", "size", better="higher"),
        _spec("fleetbench_probe_achieved_bytes_per_second", "gauge", "bytes_per_second",
              "Achieved memory traffic per second (bytes read plus bytes written)", "probe", "dtype", "size", better="higher"),
        _spec("fleetbench_probe_operations_total", "counter", "count",
              "Probe operations timed", "probe", "dtype", "size"),
        # --- profiling ---
        # fleetbench profile (torch.profiler trace + analytical roofline), fleetbench ncu (Nsight
        # Compute), fleetbench roofline. `kernel` and `op` hold names shortened by
        # fleetbench.profile.names.label (full names stay in the result record); `class` is one of
        # memory_bound, compute_bound, balanced, latency_bound, cache_resident (above the measured
        # DRAM roof: data from caches), unknown, not_measured (ncu returned NaN:
        # replay failed); `category` one of compute,
        # communication, memory, idle; `gpu` the device index in the trace; `source` measured or
        # datasheet.
        _spec("fleetbench_profile_time_share_ratio", "gauge", "ratio",
              "Share of the device span in compute, communication, memory copies or idle (HTA definitions)",
              "gpu", "category"),
        _spec("fleetbench_profile_trace_span_seconds", "gauge", "seconds",
              "Span of device activity in the profiled trace, first kernel start to last kernel end", "gpu", better="lower"),
        _spec("fleetbench_profile_comm_overlap_ratio", "gauge", "ratio",
              "Share of the device's communication time during which computation runs too (HTA's overlap)",
              "gpu", better="higher"),
        _spec("fleetbench_profile_straggler_gap_ratio", "gauge", "ratio",
              "How far the straggler rank is above the median of the ranks in one figure (step_time, span or "
              "exposed_communication), as a ratio of that median; set in the straggler rank's record",
              "figure", better="lower"),
        _spec("fleetbench_profile_host_wait_seconds", "gauge", "seconds",
              "Device idle time (no stream running) while a stream waited for the host to launch its next kernel (HTA host wait, not summed over streams)", "gpu", better="lower"),
        _spec("fleetbench_profile_op_seconds", "gauge", "seconds",
              "Self time of one operator over the profiled steps (device time on GPU, CPU time on CPU)", "op", better="lower"),
        _spec("fleetbench_profile_op_achieved_flop_per_second", "gauge", "flop_per_second",
              "Achieved FLOP/s of one operator (FLOPs counted by torch.profiler with_flops)", "op"),
        _spec("fleetbench_profile_op_arithmetic_intensity_flop_per_byte", "gauge", "count",
              "FLOPs per byte of tensor traffic of one operator (inputs read once, outputs written once)", "op"),
        _spec("fleetbench_profile_op_compute_peak_ratio", "gauge", "ratio",
              "Achieved FLOP/s of one operator over the peak FLOP/s of its dtype on this device", "op"),
        _spec("fleetbench_profile_op_memory_peak_ratio", "gauge", "ratio",
              "Achieved bytes/s of one operator over the peak memory bandwidth of this device", "op"),
        _spec("fleetbench_profile_op_class_info", "gauge", "info",
              "Constant 1; the class label says what limits the operator", "op", "class"),
        _spec("fleetbench_profile_peak_flop_per_second", "gauge", "flop_per_second",
              "Peak FLOP/s under the roofline: measured by the matmul probe, or from the datasheet",
              "dtype", "source", better="higher"),
        _spec("fleetbench_profile_peak_bytes_per_second", "gauge", "bytes_per_second",
              "Peak memory bandwidth under the roofline: measured copy/triad, or from the datasheet", "source", better="higher"),
        _spec("fleetbench_kernel_duration_seconds", "gauge", "seconds",
              "GPU time of one kernel summed over its profiled launches (gpu__time_duration.sum)", "kernel", better="lower"),
        _spec("fleetbench_kernel_launches_total", "counter", "count",
              "Profiled launches of one kernel", "kernel"),
        _spec("fleetbench_kernel_compute_sol_ratio", "gauge", "ratio",
              "Compute speed-of-light of one kernel (sm__throughput.avg.pct_of_peak_sustained_elapsed)",
              "kernel", better="higher"),
        _spec("fleetbench_kernel_memory_sol_ratio", "gauge", "ratio",
              "Memory speed-of-light of one kernel "
              "(gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed)", "kernel", better="higher"),
        _spec("fleetbench_kernel_dram_sol_ratio", "gauge", "ratio",
              "DRAM throughput of one kernel (gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed)", "kernel"),
        _spec("fleetbench_kernel_achieved_flop_per_second", "gauge", "flop_per_second",
              "Achieved FLOP/s of one kernel (fp16/fp32/fp64 SASS thread instructions, FMA as two)", "kernel"),
        _spec("fleetbench_kernel_dram_bytes", "gauge", "bytes",
              "DRAM bytes read and written by one kernel over its profiled launches", "kernel"),
        _spec("fleetbench_kernel_arithmetic_intensity_flop_per_byte", "gauge", "count",
              "FLOPs per DRAM byte of one kernel", "kernel"),
        _spec("fleetbench_kernel_class_info", "gauge", "info",
              "Constant 1; the class label says what limits the kernel", "kernel", "class"),
        # --- edge ---
        # fleetbench edge run: kernels on Vulkan/Metal/D3D12 GPUs through wgpu, the tiny model on
        # PyTorch MPS, ExecuTorch programs. `kernel` is a name from fleetbench.edge.kernels.KERNELS;
        # `dtype` float32, float16, or u32 (copy); `size` the configured problem (1024 = M=N=K,
        # 2048x1024 = rows x cols, 64MiB, 4M elements, 256wg x 1024); `timing` timestamp (GPU
        # timestamp queries) or wallclock (host clock around a synchronised submit); `percentile`
        # p50, p90 or p99; `runtime` executorch, eager or mps; `model` the model's short name; `kind`
        # current_allocated or driver_allocated. The adapter is the common `device` label, its API
        # (vulkan, metal, d3d12, opengl) the common `backend` label.
        _spec("fleetbench_edge_kernel_latency_seconds", "histogram", "seconds",
              "Latency of one kernel dispatch, every timed dispatch of every try",
              "kernel", "dtype", "size", "timing",
              buckets=(1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)),
        _spec("fleetbench_edge_kernel_latency_percentile_seconds", "gauge", "seconds",
              "Percentile of the kernel's dispatch latency over all tries", "kernel", "dtype", "size", "timing",
              "percentile", better="lower"),
        _spec("fleetbench_edge_kernel_achieved_flop_per_second", "gauge", "flop_per_second",
              "Achieved FLOP/s of the kernel at its median latency (FMA counted as two)",
              "kernel", "dtype", "size", "timing", better="higher"),
        _spec("fleetbench_edge_kernel_achieved_bytes_per_second", "gauge", "bytes_per_second",
              "Achieved memory traffic of the kernel at its median latency (bytes read plus bytes written once)",
              "kernel", "dtype", "size", "timing", better="higher"),
        _spec("fleetbench_edge_kernel_variation_ratio", "gauge", "ratio",
              "Run-to-run variation: coefficient of variation of the tries' median latencies",
              "kernel", "dtype", "size", "timing"),
        _spec("fleetbench_edge_kernel_tries_total", "counter", "count",
              "Tries run until the median latency was stable or the bound on tries was reached",
              "kernel", "dtype", "size", "timing"),
        _spec("fleetbench_edge_kernel_dispatches_total", "counter", "count",
              "Timed kernel dispatches", "kernel", "dtype", "size", "timing"),
        _spec("fleetbench_edge_kernel_max_abs_error", "gauge", "count",
              "Largest absolute difference of the kernel's output from the numpy reference",
              "kernel", "dtype", "size"),
        _spec("fleetbench_edge_kernel_max_rel_error", "gauge", "count",
              "Largest absolute difference from the numpy reference over the largest reference magnitude",
              "kernel", "dtype", "size"),
        _spec("fleetbench_edge_kernel_correct", "gauge", "count",
              "Whether the kernel's output matched the numpy reference within tolerance: 1 yes, 0 no",
              "kernel", "dtype", "size"),
        _spec("fleetbench_edge_gemm_peak_ratio", "gauge", "ratio",
              "GEMM FLOP/s over the float32 FMA peak FLOP/s measured on the same adapter in the same run "
              "(every GEMM multiplies and accumulates in f32, whatever its storage dtype)",
              "kernel", "dtype", "size", better="higher"),
        _spec("fleetbench_edge_adapter_info", "gauge", "info",
              "Constant 1; labels describe the adapter the edge kernels ran on",
              "vendor", "adapter_type", "driver", "shader_f16", "timestamp_query", "subgroups",
              "cooperative_matrix"),
        # Thermal state (fleetbench.edge.thermal): `phase` before or after a kernel's or model's tries,
        # baseline (idle, before the first kernel) or end (after the last); `source` thermal_zone,
        # hwmon, nvidia-smi, adb, pmset or tegrastats; `sensor` the source's name for it (bounded by
        # the hardware).
        _spec("fleetbench_edge_kernel_temperature_celsius", "gauge", "celsius",
              "Hottest sensor's temperature just before or just after the kernel's tries",
              "kernel", "dtype", "size", "phase"),
        _spec("fleetbench_edge_kernel_throttled", "gauge", "count",
              "Whether a throttle indicator was active around the kernel's tries: 1 yes, 0 no; absent "
              "where no indicator could be read", "kernel", "dtype", "size"),
        _spec("fleetbench_edge_kernel_cooldown_seconds", "gauge", "seconds",
              "Time waited before the kernel for the device to cool back to its idle temperature",
              "kernel", "dtype", "size"),
        _spec("fleetbench_edge_model_temperature_celsius", "gauge", "celsius",
              "Hottest sensor's temperature just before or just after the model's timed passes",
              "runtime", "model", "phase"),
        _spec("fleetbench_edge_model_throttled", "gauge", "count",
              "Whether a throttle indicator was active around the model's timed passes: 1 yes, 0 no",
              "runtime", "model"),
        _spec("fleetbench_edge_thermal_sensor_celsius", "gauge", "celsius",
              "Temperature of each sensor at the run's idle baseline and at its end", "source", "sensor", "phase"),
        _spec("fleetbench_edge_thermal_source_up", "gauge", "count",
              "Whether the thermal source gave a reading in this run: 1 yes, 0 absent (the record says why)",
              "source"),
        _spec("fleetbench_edge_cooldown_timeouts_total", "counter", "count",
              "Cooldowns that gave up before the device was back within the margin of its idle temperature"),
        _spec("fleetbench_edge_model_load_seconds", "gauge", "seconds",
              "Time to load the model's program and method, or to move the eager model to its device",
              "runtime", "model"),
        _spec("fleetbench_edge_model_latency_seconds", "histogram", "seconds",
              "Latency of one forward pass of the model", "runtime", "model",
              buckets=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)),
        _spec("fleetbench_edge_model_latency_mean_seconds", "gauge", "seconds",
              "Mean latency of the model's timed forward passes", "runtime", "model"),
        _spec("fleetbench_edge_model_latency_trimmed_mean_seconds", "gauge", "seconds",
              "Trimmed mean latency of the model's forward passes (edge.trim_ratio dropped at each end)",
              "runtime", "model", better="lower"),
        _spec("fleetbench_edge_model_latency_percentile_seconds", "gauge", "seconds",
              "Percentile of the model's forward latency", "runtime", "model", "percentile", better="lower"),
        _spec("fleetbench_edge_model_max_abs_error", "gauge", "count",
              "Largest absolute difference of the model's output from eager PyTorch on the same input",
              "runtime", "model"),
        _spec("fleetbench_edge_model_memory_bytes", "gauge", "bytes",
              "MPS memory after the timed passes (torch.mps.current_allocated_memory, driver_allocated_memory)",
              "model", "kind"),
        # fleetbench edge llm: the llama-family model in each edge LLM runtime (llama.cpp, MLX). `phase`
        # is pp (prompt processing) or tg (token generation), llama-bench's; `mmap` true or false;
        # `runtime` llama.cpp (its CPU build) or llama.cpp-vulkan (its Vulkan build), mlx, executorch.
        _spec("fleetbench_edge_llm_tokens_per_second", "gauge", "count",
              "Tokens per second of a runtime's phase (pp: the prompt as one batch, tg: one token at a time)",
              "runtime", "phase", "dtype", "mmap", "percentile", better="higher"),
        _spec("fleetbench_edge_llm_time_to_first_token_seconds", "gauge", "seconds",
              "Time from a prompt to its first generated token", "runtime", "dtype", "mmap", "percentile",
              better="lower"),
        _spec("fleetbench_edge_llm_load_seconds", "gauge", "seconds",
              "Time to load the exported model into the runtime, its files in the page cache (warm)",
              "runtime", "dtype", "mmap", better="lower"),
        _spec("fleetbench_edge_llm_cold_load_seconds", "gauge", "seconds",
              "Time to load the exported model after its files were dropped from the page cache",
              "runtime", "dtype", "mmap", better="lower"),
        _spec("fleetbench_edge_llm_rss_bytes", "gauge", "bytes",
              "Resident memory of the runtime's process (load, peak), of the interpreter and the runtime's "
              "imports (imports), and the model's own share: after the load and at the peak minus the imports "
              "(model_load, model_peak)",
              "runtime", "dtype", "mmap", "phase", better="lower"),
        _spec("fleetbench_edge_llm_energy_per_token_joules", "gauge", "joules",
              "Energy per token of a runtime's timed tries (prompt and generated tokens), from edge.energy_sources",
              "runtime", "dtype", "mmap", "source", better="lower"),
        _spec("fleetbench_edge_llm_logit_error_ratio", "gauge", "ratio",
              "Largest |logit - eager PyTorch logit| over the prompt, divided by the largest |eager logit|",
              "runtime", "dtype", better="lower"),
        _spec("fleetbench_edge_llm_temperature_celsius", "gauge", "celsius",
              "Hottest moving sensor's temperature just before or just after the runtime's worker",
              "runtime", "dtype", "mmap", "phase"),
        _spec("fleetbench_edge_llm_throttled", "gauge", "count",
              "Whether a throttle indicator was active around the runtime's worker: 1 yes, 0 no",
              "runtime", "dtype", "mmap"),
        _spec("fleetbench_edge_llm_agreement", "gauge", "count",
              "One (1) when the runtime's logits are within the dtype's tolerance and (f32) its greedy tokens equal eager's",
              "runtime", "dtype"),
        # --- fleetbench collectives (nccl-tests' figures): `op` all_reduce, all_gather, reduce_scatter or
        # all_to_all; `size` the operation's bytes (nccl-tests' size column: the whole array); `ranks` the
        # world size. algbw = size / time; busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n (the others).
        _spec("fleetbench_collective_op_seconds", "gauge", "seconds",
              "Mean time of one collective operation, averaged over the ranks (nccl-tests' time)",
              "op", "size", "ranks", better="lower"),
        _spec("fleetbench_collective_algorithm_bytes_per_second", "gauge", "bytes_per_second",
              "Algorithm bandwidth of a collective: its size in bytes over its time (nccl-tests' algbw)",
              "op", "size", "ranks", better="higher"),
        _spec("fleetbench_collective_bus_bytes_per_second", "gauge", "bytes_per_second",
              "Bus bandwidth of a collective: algorithm bandwidth times nccl-tests' factor of the rank count "
              "(busbw), comparable with the links' bandwidth", "op", "size", "ranks", better="higher"),
        # --- energy (fleetbench.energy) of the timed work of a run: `source` nvml (the rank's GPU: NVML's
        # total-energy counter), rapl (the machine's CPU packages, read by a node's first rank), or at the
        # edge a sampled power source (tegrastats, powermetrics, battery, adb); where no source is readable
        # the record says why and these are absent.
        _spec("fleetbench_energy_joules", "gauge", "joules",
              "Energy drawn during the run's timed work (NVML GPU energy, RAPL CPU package energy, or sampled "
              "board power at the edge)", "source"),
        _spec("fleetbench_energy_per_step_joules", "gauge", "joules",
              "Energy per step of the run's timed work", "source", better="lower"),
        _spec("fleetbench_energy_per_token_joules", "gauge", "joules",
              "Energy per token processed (training: tokens of the ranks the source covers)", "source", better="lower"),
        _spec("fleetbench_energy_average_watts", "gauge", "watts",
              "Average power over the run's timed work", "source"),
        # --- a generic benchmark loop (telemetry overhead measurement, trainers) ---------------
        _spec("fleetbench_step_seconds", "gauge", "seconds", "Wall-clock time of the latest step", better="lower"),
        _spec("fleetbench_steps_total", "counter", "count", "Steps completed"),
        _spec("fleetbench_last_step_timestamp_seconds", "gauge", "timestamp",
              "Unix time the latest reported step ended (the stall alert compares it with the step time)"),
        # --- training ---------------------------------------------------------------------------
        # Step time and step count use fleetbench_step_seconds / fleetbench_steps_total above; device
        # allocator peaks use fleetbench_memory_peak_*_bytes, CPU ranks fleetbench_process_peak_rss_bytes.
        _spec("fleetbench_train_loss", "gauge", "count",
              "Training loss (cross-entropy, mean over the global batch) at the latest logged step", better="lower"),
        _spec("fleetbench_train_grad_norm", "gauge", "count",
              "Global L2 norm of the gradients at the latest logged step, before clipping"),
        _spec("fleetbench_train_step", "gauge", "count",
              "Training steps completed, counting those done before a resume"),
        _spec("fleetbench_train_data_seconds", "gauge", "seconds",
              "Time per step spent producing the batch (generation and host-to-device copy), "
              "mean over the latest log interval"),
        _spec("fleetbench_train_tokens_per_second", "gauge", "count",
              "Training throughput of the whole job in tokens per second over the latest log interval", better="higher"),
        _spec("fleetbench_train_device_tokens_per_second", "gauge", "count",
              "Training throughput per device (rank) in tokens per second over the latest log interval", better="higher"),
        _spec("fleetbench_train_tokens_total", "counter", "count",
              "Tokens this rank has trained on in this process"),
        _spec("fleetbench_train_achieved_flop_per_second", "gauge", "flop_per_second",
              "Model FLOP/s per device: FLOPs per token (6N + 12 L H D T) times tokens per second per device"),
        _spec("fleetbench_train_peak_flop_per_second", "gauge", "flop_per_second",
              "Peak FLOP/s per device that MFU divides by (GPU table or measured CPU matmul)"),
        _spec("fleetbench_train_mfu_ratio", "gauge", "ratio",
              "Model FLOPs utilisation: achieved model FLOP/s over the device's peak; absent when unknown", better="higher"),
        _spec("fleetbench_train_alloc_retries_total", "counter", "count",
              "CUDA caching allocator retries (cache flushes after a failed allocation)"),
        _spec("fleetbench_train_ooms_total", "counter", "count",
              "Out-of-memory errors raised in training steps"),
        _spec("fleetbench_train_checkpoint_seconds", "gauge", "seconds",
              "Wall-clock time of the latest distributed checkpoint save"),
        _spec("fleetbench_train_checkpoints_total", "counter", "count",
              "Distributed checkpoints written by this process"),
        # --- fleetbench compare and history (pushed with --pushgateway; benchmark="compare"/"history") ---
        # `base` and `new` are the run ids compared (for --rounds, each side's last process), `compared`
        # the benchmark whose figure it is, `metric` the headline metric, `figure` its labels as k=v.
        _spec("fleetbench_compare_change_ratio", "gauge", "ratio",
              "Relative change (new - base) / base of a headline figure, labelled with the verdict fleetbench "
              "compare gave it (better, worse, no significant change, no direction, not judged, unstable, "
              "not enough independent samples to judge)",
              "base", "new", "compared", "metric", "figure", "verdict"),
        _spec("fleetbench_history_step_ratio", "gauge", "ratio",
              "Relative change (after - before) / before of a step fleetbench history found in a headline "
              "metric's series, at the first run after the step",
              "compared", "metric", "figure", "at_run", "commit"),
    )
}


# fmt: on

# The headline of each benchmark: the few figures a person and `fleetbench compare` look at first.
# A record's headline names these metrics; their unit and better direction come from the entries
# above, so they are declared once. Profile time shares describe where time went and rank nothing.
HEADLINES: dict[str, tuple[str, ...]] = {
    "probe": (
        "fleetbench_probe_achieved_flop_per_second",
        "fleetbench_probe_achieved_bytes_per_second",
    ),
    "train": (
        "fleetbench_train_device_tokens_per_second",
        "fleetbench_train_mfu_ratio",
        "fleetbench_step_seconds",
        "fleetbench_memory_peak_allocated_bytes",
        "fleetbench_process_peak_rss_bytes",
        "fleetbench_train_loss",
    ),
    "profile": (
        "fleetbench_profile_trace_span_seconds",
        "fleetbench_profile_time_share_ratio",
        "fleetbench_profile_op_seconds",
    ),
    "trace": (
        "fleetbench_profile_trace_span_seconds",
        "fleetbench_profile_time_share_ratio",
        "fleetbench_profile_comm_overlap_ratio",
        "fleetbench_profile_straggler_gap_ratio",
    ),
    "ncu": (
        "fleetbench_kernel_duration_seconds",
        "fleetbench_kernel_compute_sol_ratio",
        "fleetbench_kernel_memory_sol_ratio",
    ),
    "roofline": (
        "fleetbench_profile_peak_flop_per_second",
        "fleetbench_profile_peak_bytes_per_second",
        "fleetbench_kernel_duration_seconds",
        "fleetbench_kernel_compute_sol_ratio",
        "fleetbench_kernel_memory_sol_ratio",
        "fleetbench_profile_op_seconds",
    ),
    "edge": (
        "fleetbench_edge_kernel_latency_percentile_seconds",
        "fleetbench_edge_kernel_achieved_flop_per_second",
        "fleetbench_edge_gemm_peak_ratio",
        "fleetbench_edge_model_latency_percentile_seconds",
        "fleetbench_edge_model_latency_trimmed_mean_seconds",
    ),
    "collectives": (
        "fleetbench_collective_bus_bytes_per_second",
        "fleetbench_collective_op_seconds",
    ),
    "edge-llm": (
        "fleetbench_edge_llm_tokens_per_second",
        "fleetbench_edge_llm_time_to_first_token_seconds",
        "fleetbench_edge_llm_load_seconds",
    ),
}


def spec(name: str) -> MetricSpec:
    """The catalogue entry of `name`; KeyError (naming the catalogue) for a metric not declared."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"metric {name!r} is not in the catalogue (fleetbench.catalogue)") from None


def naming_problems(metric: MetricSpec) -> list[str]:
    """What breaks the naming rules; the tests require an empty list for every entry."""
    return _name_problems(metric) + _label_problems(metric)


def _name_problems(metric: MetricSpec) -> list[str]:
    """Name, unit suffix, counter suffix and help text."""
    problems = []
    if not NAME_PATTERN.fullmatch(metric.name):
        problems.append("name must be fleetbench_ followed by snake_case")
    if metric.unit not in UNITS:
        problems.append(f"unknown unit {metric.unit!r}")
    else:
        suffix = UNITS[metric.unit][0]
        base = metric.name.removesuffix("_total")
        if suffix and not base.endswith(suffix):
            problems.append(f"unit {metric.unit} requires the suffix {suffix}")
    if metric.kind == "counter" and not metric.name.endswith("_total"):
        problems.append("counters end in _total")
    if metric.kind != "counter" and metric.name.endswith("_total"):
        problems.append("only counters end in _total")
    if not metric.help or not metric.help[0].isupper():
        problems.append("help must be a sentence")
    return problems


def _label_problems(metric: MetricSpec) -> list[str]:
    """Own labels and the better direction."""
    problems = []
    if set(metric.labels) & set(COMMON_LABELS) or len(set(metric.labels)) != len(metric.labels):
        problems.append("labels repeat a common label or each other")
    if metric.better is not None and metric.kind not in ("gauge", "counter"):
        problems.append("only gauges and counters carry a better direction (a headline is one value)")
    for forbidden in ("step", "timestamp", "time", "le", "quantile", "job", "instance"):
        if forbidden in metric.labels:
            problems.append(f"label {forbidden!r} is reserved or unbounded")
    return problems
