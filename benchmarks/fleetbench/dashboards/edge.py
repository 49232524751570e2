"""Edge: kernel latency percentiles with the device's temperature and throttling beside them, throughput,
share of peak, variation, correctness, ExecuTorch vs eager."""

from __future__ import annotations

from fleetbench.dashboards.definition import Dashboard, Panel, Query, Row, sel, unit_of

KERNEL = "{{kernel}} {{dtype}} {{size}} ({{backend}})"

latency = Row(
    "Latency",
    (
        Panel(
            "Kernel latency p50 / p90 / p99",
            "bargauge",
            (
                Query(
                    f"max by (kernel, dtype, size, backend, percentile) "
                    f"({sel('fleetbench_edge_kernel_latency_percentile_seconds')})",
                    legend="{{kernel}} {{dtype}} {{size}} {{percentile}} ({{backend}})",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_kernel_latency_percentile_seconds"),
            "Percentiles of each kernel's dispatch latency per device and backend",
            width=12,
            height=12,
        ),
        Panel(
            "Kernel latency p90 from the histogram",
            "timeseries",
            (
                Query(
                    f"histogram_quantile(0.9, sum by (le, kernel, device, backend) "
                    f"({sel('fleetbench_edge_kernel_latency_seconds_bucket')}))",
                    legend="{{kernel}} {{device}} ({{backend}})",
                ),
            ),
            unit_of("fleetbench_edge_kernel_latency_seconds"),
            "p90 estimated from the latency histogram's buckets, run after run",
            width=12,
            height=12,
        ),
    ),
)

thermal = Row(
    "Temperature and throttling (beside the latency they may have spoiled)",
    (
        Panel(
            "Kernel temperature before / after",
            "bargauge",
            (
                Query(
                    f"max by (kernel, dtype, size, phase) ({sel('fleetbench_edge_kernel_temperature_celsius')})",
                    legend="{{kernel}} {{dtype}} {{size}} {{phase}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_kernel_temperature_celsius"),
            "Hottest sensor just before and just after each kernel's tries (after a cooldown to idle)",
            width=8,
            sensor_only=True,
        ),
        Panel(
            "Throttled during the tries",
            "table",
            (
                Query(f"max by (kernel, dtype, size) ({sel('fleetbench_edge_kernel_throttled')})", instant=True),
                Query(f"max by (model, runtime) ({sel('fleetbench_edge_model_throttled')})", instant=True),
            ),
            "short",
            "1: a throttle indicator (NVML slowdown reason, Android thermal status, pmset speed limit, cooling "
            "device) was active around the figure; 0: none was",
            width=8,
            sensor_only=True,
        ),
        Panel(
            "Thermal sources and cooldowns",
            "table",
            (
                Query(f"max by (source) ({sel('fleetbench_edge_thermal_source_up')})", instant=True),
                Query(f"max by (kernel, dtype, size) ({sel('fleetbench_edge_kernel_cooldown_seconds')})", instant=True),
                Query(f"sum by (host) ({sel('fleetbench_edge_cooldown_timeouts_total')})", instant=True),
            ),
            "short",
            "Which sources gave a reading (0: absent, the record says why), the seconds waited for the device "
            "to cool back to idle before each kernel, and the cooldowns that timed out",
            width=8,
        ),
    ),
)

throughput = Row(
    "Throughput",
    (
        Panel(
            "GFLOP/s",
            "bargauge",
            (
                Query(
                    f"max by (kernel, dtype, size, backend) ({sel('fleetbench_edge_kernel_achieved_flop_per_second')})",
                    legend=KERNEL,
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_kernel_achieved_flop_per_second"),
            "Achieved FLOP/s at the median latency",
            width=8,
        ),
        Panel(
            "GB/s",
            "bargauge",
            (
                Query(
                    f"max by (kernel, dtype, size, backend) ({sel('fleetbench_edge_kernel_achieved_bytes_per_second')})",
                    legend=KERNEL,
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_kernel_achieved_bytes_per_second"),
            "Achieved memory traffic at the median latency",
            width=8,
        ),
        Panel(
            "GEMM share of peak",
            "bargauge",
            (
                Query(
                    f"max by (kernel, dtype, size, device) ({sel('fleetbench_edge_gemm_peak_ratio')})",
                    legend="{{kernel}} {{dtype}} {{size}} {{device}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_gemm_peak_ratio"),
            "GEMM FLOP/s over the same adapter's measured f32 FMA peak (the GEMMs compute in f32 for every storage dtype)",
            width=8,
        ),
    ),
)

quality = Row(
    "Variation and correctness",
    (
        Panel(
            "Run-to-run variation",
            "bargauge",
            (
                Query(
                    f"max by (kernel, dtype, size, backend) ({sel('fleetbench_edge_kernel_variation_ratio')})",
                    legend=KERNEL,
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_kernel_variation_ratio"),
            "Coefficient of variation of the tries' medians (device-farm discipline: target under 5%)",
            width=12,
        ),
        Panel(
            "Max relative error vs numpy",
            "table",
            (Query(f"max by (kernel, dtype, size) ({sel('fleetbench_edge_kernel_max_rel_error')})", instant=True),),
            "short",
            "Largest error of each kernel's output against the numpy reference",
            width=12,
        ),
    ),
)

models = Row(
    "Models: ExecuTorch vs eager",
    (
        Panel(
            "Model latency by runtime",
            "bargauge",
            (
                Query(
                    f"max by (model, runtime) ({sel('fleetbench_edge_model_latency_trimmed_mean_seconds')})",
                    legend="{{model}} {{runtime}} trimmed mean",
                    instant=True,
                ),
                Query(
                    f"max by (model, runtime) ({sel('fleetbench_edge_model_latency_percentile_seconds', percentile='p90')})",
                    legend="{{model}} {{runtime}} p90",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_model_latency_trimmed_mean_seconds"),
            "Forward latency of the same model and input in ExecuTorch and in eager PyTorch",
            width=12,
        ),
        Panel(
            "Model load time",
            "bargauge",
            (
                Query(
                    f"max by (model, runtime) ({sel('fleetbench_edge_model_load_seconds')})",
                    legend="{{model}} {{runtime}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_model_load_seconds"),
            "Time to load the program (or move the eager model)",
            width=12,
        ),
    ),
)

LLM = "{{runtime}} {{dtype}} mmap={{mmap}}"

llm = Row(
    "LLM runtimes: llama.cpp and MLX on the same llama model (edge llm)",
    (
        Panel(
            "Prefill (pp) and decode (tg) tokens/s, p50",
            "bargauge",
            (
                Query(
                    f"max by (runtime, dtype, mmap, phase) "
                    f"({sel('fleetbench_edge_llm_tokens_per_second', percentile='p50')})",
                    legend=LLM + " {{phase}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_llm_tokens_per_second"),
            "llama-bench's pp (the prompt as one batch) and tg (one token at a time) per runtime, dtype and load mode",
            width=5,
            outside_demo=True,
            height=10,
        ),
        Panel(
            "Time to first token, p50 / p99",
            "bargauge",
            (
                Query(
                    f"max by (runtime, dtype, mmap, percentile) "
                    f"({sel('fleetbench_edge_llm_time_to_first_token_seconds')})",
                    legend=LLM + " {{percentile}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_llm_time_to_first_token_seconds"),
            "From the prompt to its first generated token",
            width=5,
            outside_demo=True,
            height=10,
        ),
        Panel(
            "Load time, warm and cold: memory-mapped vs read-in",
            "bargauge",
            (
                Query(
                    f"max by (runtime, dtype, mmap) ({sel('fleetbench_edge_llm_load_seconds')})",
                    legend=LLM + " warm",
                    instant=True,
                ),
                Query(
                    f"max by (runtime, dtype, mmap) ({sel('fleetbench_edge_llm_cold_load_seconds')})",
                    legend=LLM + " cold",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_llm_load_seconds"),
            "The zero-copy claim as a number: loading the same file with mmap on and off, its pages in the "
            "page cache (warm) and dropped from it first (cold)",
            width=5,
            outside_demo=True,
            height=10,
        ),
        Panel(
            "RSS after load and peak: memory-mapped vs read-in",
            "bargauge",
            (
                Query(
                    f"max by (runtime, dtype, mmap, phase) ({sel('fleetbench_edge_llm_rss_bytes')})",
                    legend=LLM + " {{phase}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_llm_rss_bytes"),
            "Resident memory of each runtime's own process, after the load and at its peak",
            width=5,
            outside_demo=True,
            height=10,
        ),
        Panel(
            "Agrees with eager PyTorch",
            "table",
            (
                Query(
                    f"min by (runtime, dtype) ({sel('fleetbench_edge_llm_agreement')})",
                    legend="{{runtime}} {{dtype}}",
                    instant=True,
                ),
                Query(
                    f"max by (runtime, dtype) ({sel('fleetbench_edge_llm_logit_error_ratio')})",
                    legend="{{runtime}} {{dtype}} logit error",
                    instant=True,
                ),
            ),
            "short",
            "1: logits within the dtype's tolerance and (f32) greedy tokens equal; the logit error beside it",
            width=4,
            outside_demo=True,
            height=10,
        ),
        Panel(
            "Energy per token",
            "bargauge",
            (
                Query(
                    f"max by (runtime, dtype, mmap, source) ({sel('fleetbench_edge_llm_energy_per_token_joules')})",
                    legend=LLM + " ({{source}})",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_edge_llm_energy_per_token_joules"),
            "Joules per prompt or generated token over each runtime's timed tries (NVML for a GPU build's rows, "
            "RAPL, or the board's sampled power); none where the device reads no power source",
            width=8,
            outside_demo=True,
            power_only=True,
            height=8,
        ),
        Panel(
            "Temperature and throttling around each runtime",
            "table",
            (
                Query(
                    f"max by (runtime, dtype, mmap, phase) ({sel('fleetbench_edge_llm_temperature_celsius')})",
                    legend=LLM + " {{phase}}",
                    instant=True,
                ),
                Query(
                    f"max by (runtime, dtype, mmap) ({sel('fleetbench_edge_llm_throttled')})",
                    legend=LLM + " throttled",
                    instant=True,
                ),
            ),
            "short",
            "The hottest moving sensor just before and just after each runtime's worker (C), and 1 where a "
            "throttle indicator was active: a runtime measured hot or throttled is no fair comparison",
            width=16,
            outside_demo=True,
            sensor_only=True,
            height=8,
        ),
    ),
)

adapters = Row(
    "Adapters",
    (
        Panel(
            "Adapters",
            "table",
            (
                Query(
                    f"max by (device, backend, vendor, adapter_type, driver, shader_f16, timestamp_query, "
                    f"cooperative_matrix) ({sel('fleetbench_edge_adapter_info')})",
                    instant=True,
                ),
            ),
            "none",
            "What each run's adapter offers: features, timestamp queries, cooperative matrix",
            width=24,
        ),
    ),
)

EDGE = Dashboard(
    uid="fleetbench-edge",
    title="fleetbench / Edge",
    description="Vulkan/Metal kernels and small models on edge GPUs: latency percentiles, throughput, variation",
    benchmarks=("edge", "edge-llm"),
    rows=(latency, thermal, throughput, quality, models, llm, adapters),
)
