"""Training: loss, throughput, MFU, step and data time, memory per rank and host, run comparison."""

from __future__ import annotations

from fleetbench.dashboards.definition import Dashboard, Panel, Query, Row, sel, unit_of

RANK = "{{host}} rank {{rank}}"

progress = Row(
    "Progress",
    (
        Panel(
            "Loss",
            "timeseries",
            (Query(f"max by (run_id) ({sel('fleetbench_train_loss', rank='0')})", legend="{{run_id}}"),),
            "none",
            "Cross-entropy of the global batch at each logged step (rank 0)",
            width=12,
        ),
        Panel(
            "Gradient norm",
            "timeseries",
            (Query(f"max by (run_id) ({sel('fleetbench_train_grad_norm', rank='0')})", legend="{{run_id}}"),),
            "none",
            "Global L2 norm of the gradients before clipping (rank 0)",
            width=6,
        ),
        Panel(
            "Steps done",
            "stat",
            (Query(f"max by (run_id) ({sel('fleetbench_train_step')})", legend="{{run_id}}", instant=True),),
            "short",
            "Training steps completed, counting those before a resume",
            width=6,
        ),
    ),
)

throughput = Row(
    "Throughput",
    (
        Panel(
            "Tokens/s (job)",
            "timeseries",
            (Query(f"max by (run_id) ({sel('fleetbench_train_tokens_per_second')})", legend="{{run_id}}"),),
            "short",
            "Tokens per second of the whole job over the latest log interval",
            width=12,
        ),
        Panel(
            "Tokens/s per rank",
            "timeseries",
            (Query(sel("fleetbench_train_device_tokens_per_second"), legend=RANK),),
            "short",
            "Tokens per second of each device (rank)",
            width=12,
        ),
        Panel(
            "MFU",
            "timeseries",
            (Query(sel("fleetbench_train_mfu_ratio"), legend=RANK),),
            unit_of("fleetbench_train_mfu_ratio"),
            "Model FLOPs utilisation: (6N + 12 L H D T) x tokens/s per device over the device's peak",
            width=12,
        ),
        Panel(
            "FLOP/s per device",
            "timeseries",
            (
                Query(sel("fleetbench_train_achieved_flop_per_second"), legend=RANK),
                Query(f"max by (device) ({sel('fleetbench_train_peak_flop_per_second')})", legend="peak {{device}}"),
            ),
            unit_of("fleetbench_train_achieved_flop_per_second"),
            "Achieved model FLOP/s per device beside the peak MFU divides by",
            width=12,
        ),
    ),
)

timing = Row(
    "Step time",
    (
        Panel(
            "Step time per rank",
            "timeseries",
            (Query(sel("fleetbench_step_seconds", benchmark="train"), legend=RANK),),
            unit_of("fleetbench_step_seconds"),
            "Wall-clock time of the latest step on each rank",
            width=12,
        ),
        Panel(
            "Data time per rank",
            "timeseries",
            (Query(sel("fleetbench_train_data_seconds"), legend=RANK),),
            unit_of("fleetbench_train_data_seconds"),
            "Time per step spent producing and copying the batch",
            width=12,
        ),
    ),
)

memory = Row(
    "Memory",
    (
        Panel(
            "Peak memory per rank",
            "bargauge",
            (
                Query(
                    f"max by (host, rank) ({sel('fleetbench_memory_peak_allocated_bytes')})",
                    legend="allocated {{host}} rank {{rank}}",
                    instant=True,
                ),
                Query(
                    f"max by (host, rank) ({sel('fleetbench_memory_peak_reserved_bytes')})",
                    legend="reserved {{host}} rank {{rank}}",
                    instant=True,
                ),
                Query(
                    f"max by (host, rank) ({sel('fleetbench_process_peak_rss_bytes')})",
                    legend="process RSS {{host}} rank {{rank}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_memory_peak_allocated_bytes"),
            "GPU: allocator peaks (torch.cuda.memory_stats); CPU ranks: peak resident set of the process",
            width=12,
        ),
        Panel(
            "Peak memory per host",
            "bargauge",
            (
                Query(
                    f"max by (host) ({sel('fleetbench_memory_peak_reserved_bytes')} "
                    f"or {sel('fleetbench_process_peak_rss_bytes')})",
                    legend="{{host}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_process_peak_rss_bytes"),
            "Largest peak of any rank on each host",
            width=6,
        ),
        Panel(
            "Alloc retries and OOMs",
            "stat",
            (
                Query(
                    f"sum by (host) ({sel('fleetbench_train_alloc_retries_total')})",
                    legend="retries {{host}}",
                    instant=True,
                ),
                Query(f"sum by (host) ({sel('fleetbench_train_ooms_total')})", legend="OOMs {{host}}", instant=True),
            ),
            "short",
            "CUDA caching allocator retries and out-of-memory errors (GPU ranks)",
            width=6,
            gpu_only=True,
        ),
    ),
)

comparison = Row(
    "Run comparison",
    (
        Panel(
            "Tokens/s by run",
            "bargauge",
            (
                Query(
                    f"max by (run_id) ({sel('fleetbench_train_tokens_per_second')})", legend="{{run_id}}", instant=True
                ),
            ),
            "short",
            "Latest job throughput of each selected run",
            width=8,
        ),
        Panel(
            "Final loss by run",
            "bargauge",
            (Query(f"max by (run_id) ({sel('fleetbench_train_loss', rank='0')})", legend="{{run_id}}", instant=True),),
            "none",
            "Loss at the last logged step of each selected run",
            width=8,
        ),
        Panel(
            "Checkpoint save time",
            "bargauge",
            (
                Query(
                    f"max by (run_id) ({sel('fleetbench_train_checkpoint_seconds')})", legend="{{run_id}}", instant=True
                ),
            ),
            unit_of("fleetbench_train_checkpoint_seconds"),
            "Latest distributed checkpoint save of each run",
            width=8,
        ),
    ),
)

TRAINING = Dashboard(
    uid="fleetbench-training",
    title="fleetbench / Training",
    description="FSDP2 training: loss, tokens/s, MFU, step and data time, memory per rank and host, runs compared",
    benchmarks=("train",),
    rows=(progress, throughput, timing, memory, comparison),
)
