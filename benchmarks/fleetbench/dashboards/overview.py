"""Cluster overview: firing alerts, every run with its status, hosts, device probes, energy, GPU time, DCGM
beside ours, and Slurm."""

from __future__ import annotations

from fleetbench.dashboards.definition import Dashboard, Panel, PanelKind, Query, Row, sel, unit_of

# DCGM exporter series (documented names; labels gpu, UUID, modelName, Hostname). Ours do not repeat them.
DCGM_HOST = 'Hostname=~"$host"'

runs = Row(
    "Runs",
    (
        Panel(
            "Run status",
            "table",
            (Query(f"max by (benchmark, run_id, host) ({sel('fleetbench_run_success')})", instant=True),),
            "none",
            "1 = the run ended successfully, 0 = it failed (absent while a run is still going)",
            width=12,
        ),
        Panel(
            "Last success",
            "table",
            (
                Query(
                    f"max by (benchmark, host) ({sel('fleetbench_run_last_success_timestamp_seconds')}) * 1000",
                    instant=True,
                ),
            ),
            "dateTimeAsIso",
            "End time of the latest successful run per benchmark and host",
            width=12,
        ),
        Panel(
            "Run duration",
            "bargauge",
            (
                Query(
                    f"max by (benchmark, run_id) ({sel('fleetbench_run_duration_seconds')})",
                    legend="{{benchmark}} {{run_id}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_run_duration_seconds"),
            "Wall-clock duration of each run",
            width=12,
        ),
        Panel(
            "Hosts",
            "stat",
            (Query(f"count(count by (host) ({sel('fleetbench_run_info')}))", instant=True),),
            "short",
            "Hosts that reported at least one run in the selection",
            width=6,
        ),
        Panel(
            "Peak RSS per host",
            "bargauge",
            (Query(f"max by (host) ({sel('fleetbench_process_peak_rss_bytes')})", legend="{{host}}", instant=True),),
            unit_of("fleetbench_process_peak_rss_bytes"),
            "Largest resident set of any benchmark process per host",
            width=6,
        ),
    ),
)

probes = Row(
    "Device probes",
    (
        Panel(
            "Matmul achieved FLOP/s",
            "timeseries",
            (
                Query(
                    sel("fleetbench_probe_achieved_flop_per_second"), legend="{{host}} {{device}} n={{size}} {{dtype}}"
                ),
            ),
            unit_of("fleetbench_probe_achieved_flop_per_second"),
            "FLOP/s of torch.matmul at each size (FLOPs from torch.utils.flop_counter)",
        ),
        Panel(
            "Copy bandwidth",
            "timeseries",
            (
                Query(
                    sel("fleetbench_probe_achieved_bytes_per_second", probe="copy"),
                    legend="{{host}} {{device}} {{size}}",
                ),
            ),
            unit_of("fleetbench_probe_achieved_bytes_per_second"),
            "Bytes read plus written per second by a tensor copy",
        ),
    ),
)


def energy_panel(title: str, metric: str, description: str) -> Panel:
    """One energy figure of every run that read a power source, per benchmark, host and source."""
    return Panel(
        title,
        "bargauge",
        (
            Query(
                f"max by (benchmark, host, run_id, source) ({sel(metric)})",
                legend="{{benchmark}} {{host}} {{run_id}} ({{source}})",
                instant=True,
            ),
        ),
        unit_of(metric),
        description,
        width=8,
        power_only=True,
    )


energy = Row(
    "Energy",
    (
        energy_panel(
            "Average power",
            "fleetbench_energy_average_watts",
            "Average power over each run's timed work: NVML (GPU), RAPL (CPU packages) or the board's sampled "
            "power (tegrastats, powermetrics, battery, adb); runs without a readable source say why in their record",
        ),
        energy_panel(
            "Energy per step",
            "fleetbench_energy_per_step_joules",
            "Joules per training or profiled step (the source's share: one GPU, or a node's CPU packages)",
        ),
        energy_panel(
            "Energy per token",
            "fleetbench_energy_per_token_joules",
            "Joules per token processed (training: the tokens of the ranks the source covers)",
        ),
    ),
)


def dcgm_panel(title: str, series: str, scale: str, unit: str, description: str) -> Panel:
    """One DCGM exporter series per GPU and host; `scale` turns DCGM's unit into the panel's."""
    return Panel(
        title,
        "timeseries",
        (Query(f"{series}{{{DCGM_HOST}}}{scale}", legend="{{Hostname}} gpu{{gpu}}"),),
        unit,
        f"{series}{description}",
        gpu_only=True,
        width=8,
    )


dcgm = Row(
    "GPUs (DCGM exporter)",
    (
        dcgm_panel(
            "GPU utilisation", "DCGM_FI_DEV_GPU_UTIL", " / 100", "percentunit", ": share of time a kernel was running"
        ),
        dcgm_panel(
            "Framebuffer used",
            "DCGM_FI_DEV_FB_USED",
            " * 1024 * 1024",
            "bytes",
            " (MiB, shown in bytes): device memory in use by every process",
        ),
        dcgm_panel(
            "DRAM active",
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "",
            "percentunit",
            ": share of cycles the memory interface was busy",
        ),
        dcgm_panel(
            "Tensor pipe active",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "",
            "percentunit",
            ": share of cycles the tensor cores were busy",
        ),
        dcgm_panel("Power", "DCGM_FI_DEV_POWER_USAGE", "", "watt", ""),
        dcgm_panel("Temperature", "DCGM_FI_DEV_GPU_TEMP", "", "celsius", ""),
        dcgm_panel(
            "SM clock", "DCGM_FI_DEV_SM_CLOCK", " * 1e6", "hertz", " (MHz, shown in Hz): falls when the GPU throttles"
        ),
        dcgm_panel("Memory clock", "DCGM_FI_DEV_MEM_CLOCK", " * 1e6", "hertz", " (MHz, shown in Hz)"),
        dcgm_panel(
            "Clock throttle reasons",
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            "",
            "none",
            ": NVML bitmask; 4 SW power cap, 8 HW slowdown, 32 SW thermal, 64 HW thermal, 128 power brake "
            "(1 idle, 2 application clocks and 16 sync boost are not faults)",
        ),
        dcgm_panel(
            "NVLink transmitted",
            "DCGM_FI_PROF_NVLINK_TX_BYTES",
            "",
            "Bps",
            ": bytes per second sent over the GPU's NVLinks, headers and payload",
        ),
        dcgm_panel(
            "NVLink received",
            "DCGM_FI_PROF_NVLINK_RX_BYTES",
            "",
            "Bps",
            ": bytes per second received over the GPU's NVLinks, headers and payload",
        ),
        dcgm_panel(
            "PCIe transmitted",
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            "",
            "Bps",
            ": bytes per second sent over PCIe, headers and payload",
        ),
        dcgm_panel(
            "PCIe received",
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            "",
            "Bps",
            ": bytes per second received over PCIe, headers and payload",
        ),
        dcgm_panel(
            "Last XID error", "DCGM_FI_DEV_XID_ERRORS", "", "none", ": code of the last XID the driver logged (0: none)"
        ),
        dcgm_panel(
            "Uncorrectable ECC errors",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "",
            "short",
            ": double-bit ECC errors since the driver loaded (the GPU needs a reset)",
        ),
        dcgm_panel(
            "Correctable ECC errors",
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "",
            "short",
            ": single-bit ECC errors since the driver loaded (corrected; a steady rise foretells DBEs)",
        ),
        dcgm_panel(
            "PCIe replays", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "", "short", ": PCIe packets retried (link errors)"
        ),
    ),
)

alerts = Row(
    "Alerts (fleetbench alert rules)",
    (
        Panel(
            "Firing alerts",
            "stat",
            (Query('count(ALERTS{alertstate="firing"}) or vector(0)', instant=True),),
            "short",
            "Alerts of fleetbench's rules (services/alert_rules.yml) firing now: throttling, XID/ECC, stalled "
            "steps, stale pushes, exporters down, memory at the cap",
            width=6,
        ),
        Panel(
            "Alerts firing now",
            "table",
            (
                Query(
                    "max by (alertname, severity, instance, Hostname, gpu, benchmark, run_id, rank) "
                    '(ALERTS{alertstate="firing"})',
                    instant=True,
                ),
            ),
            "none",
            "One line per firing alert with where it fires (Prometheus' ALERTS series; pending ones left out)",
            width=18,
            alert_only=True,
        ),
    ),
)

gpu_time = Row(
    "GPU time breakdown (torch.profiler traces on GPUs)",
    (
        Panel(
            "Time share per GPU",
            "bargauge",
            (
                Query(
                    f"max by (host, gpu, category) ({sel('fleetbench_profile_time_share_ratio')})",
                    legend="{{host}} gpu{{gpu}} {{category}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_time_share_ratio"),
            "Compute, communication, memory copies and idle as Holistic Trace Analysis defines them (GPU traces only)",
            gpu_only=True,
        ),
        Panel(
            "Host launch wait",
            "bargauge",
            (
                Query(
                    f"max by (host, gpu) ({sel('fleetbench_profile_host_wait_seconds')})",
                    legend="{{host}} gpu{{gpu}}",
                    instant=True,
                ),
            ),
            unit_of("fleetbench_profile_host_wait_seconds"),
            "GPU idle while the host had not yet launched the next kernel (GPU traces only)",
            gpu_only=True,
        ),
    ),
)


def collective_panel(title: str, metric: str, description: str, kind: PanelKind = "bargauge") -> Panel:
    """One figure of `fleetbench collectives` per operation, size and rank count (not run by the demo)."""
    return Panel(
        title,
        kind,
        (
            Query(
                f"max by (op, size, ranks) ({sel(metric)})",
                legend="{{op}} {{size}} B, {{ranks}} ranks",
                instant=True,
            ),
        ),
        unit_of(metric),
        description,
        width=8,
        outside_demo=True,
    )


collectives = Row(
    "Collectives (fleetbench collectives: nccl-tests' figures)",
    (
        collective_panel(
            "Bus bandwidth by size",
            "fleetbench_collective_bus_bytes_per_second",
            "nccl-tests' busbw: algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and "
            "all-to-all; compare with the links' bandwidth (NVLink, PCIe, InfiniBand)",
        ),
        collective_panel(
            "Algorithm bandwidth by size",
            "fleetbench_collective_algorithm_bytes_per_second",
            "nccl-tests' algbw: the operation's bytes over its time",
        ),
        collective_panel(
            "Time per operation",
            "fleetbench_collective_op_seconds",
            "Mean time of one operation averaged over the ranks; at small sizes, the latency",
        ),
    ),
)


def slurm_panel(title: str, expr: str, legend: str, description: str, kind: PanelKind = "timeseries") -> Panel:
    """One panel of the Slurm exporter's series (the cluster's, not a run's: no run filter)."""
    return Panel(
        title,
        kind,
        (Query(expr, legend=legend, instant=kind in {"table", "stat"}),),
        "short",
        description,
        slurm_only=True,
        width=6,
    )


slurm = Row(
    "Slurm (the Slurm exporter beside slurmctld)",
    (
        slurm_panel(
            "Slurm nodes by state",
            "sum by (state) (fleetbench_slurm_nodes)",
            "{{state}}",
            "Nodes per state from sinfo: idle, allocated, mixed, down, drained ...",
        ),
        slurm_panel(
            "Slurm jobs by state",
            "sum by (state) (fleetbench_slurm_jobs)",
            "{{state}}",
            "Jobs per state from squeue: pending and running, and the finished ones slurmctld still remembers",
        ),
        slurm_panel(
            "Slurm CPUs",
            "sum by (state) (fleetbench_slurm_cpus)",
            "{{state}}",
            "CPUs allocated, idle, other (down or drained) and in total",
        ),
        slurm_panel(
            "Slurm node states",
            "max by (node, partition, state) (fleetbench_slurm_node_state)",
            "{{node}} {{state}}",
            "Each node with its partition and state (sinfo)",
            kind="table",
        ),
    ),
)

OVERVIEW = Dashboard(
    uid="fleetbench-overview",
    title="fleetbench / Cluster overview",
    description="Every run with its status and last success, the hosts, device probes, energy, DCGM GPU metrics and Slurm",
    benchmarks=(),
    rows=(alerts, runs, probes, collectives, energy, gpu_time, dcgm, slurm),
)
