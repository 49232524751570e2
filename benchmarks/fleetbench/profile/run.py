"""The profiling commands end to end: telemetry, result records, artifacts, what is printed.

  run_profile        `fleetbench profile` (steps A and C): capture, trace summary, peaks, analytical
                     roofline, the top ops with class and fix. Also the demo stage.
  run_ncu_capture    `fleetbench ncu run` (step B): ncu capture, then its summary as a record
  summarize_ncu      `fleetbench ncu summarize`: read and summarise a report (printing is the CLI's)
  record_ncu_summary `fleetbench ncu summarize --record`: the same summary as a result record
  run_roofline       `fleetbench roofline`: from an ncu report, from a profile run's ops, or peaks only
Folders: results/<run_id>/profile/, .../ncu/, .../roofline/.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from fleetbench.config.schema import FleetbenchConfig, ProfileConfig
from fleetbench.devices import DeviceInfo, resolve_device
from fleetbench.errors import UserError
from fleetbench.profile.capture import capture, load_ops
from fleetbench.profile.classify import FIXES_SHORT, Thresholds, classify
from fleetbench.profile.names import short_name
from fleetbench.profile.ncu_readers import INSTALL_HINT, read_report
from fleetbench.profile.ncu_runner import find_ncu, report_path, run_ncu
from fleetbench.profile.ncu_summary import NcuSummary, summarize_report
from fleetbench.profile.ncu_target import NVTX_INCLUDE
from fleetbench.profile.peaks import Peaks, default_cache_dir, default_request, measured_peaks, peaks_from_datasheet
from fleetbench.profile.roofline import OpStat, Roofline, analytical_roofline, ncu_roofline, op_ratios, plot_roofline
from fleetbench.profile.display import (
    FixRow,
    fixes_table,
    ncu_fix_rows,
    ncu_table,
    peaks_table,
    roofline_table,
    trace_lines,
    trace_tables,
)
from fleetbench.profile.trace_summary import TraceSummary, summarize_trace
from fleetbench.profile.workloads import resolve_workload
from fleetbench.results.record import ResultRecord
from fleetbench.results.store import RECORDS_FILE, read_records
from fleetbench.runinfo import host_name, new_run_id
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun

NO_FLOPS = "no FLOP count from torch.profiler for this op (it counts matmul, conv and arithmetic ops)"
NO_FLOPS_FIX = "not classified without a FLOP count; on a GPU, fleetbench ncu run classifies its kernels"


def thresholds_of(cfg: ProfileConfig) -> Thresholds:
    return Thresholds(**cfg.thresholds.model_dump())


def _identity(config: FleetbenchConfig, benchmark: str, device: str, backend: str) -> RunIdentity:
    return RunIdentity(
        benchmark=benchmark,
        run_id=config.run.run_id or new_run_id(),
        host=host_name(),
        device=device,
        backend=backend,
        rank=0,
    )


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return path


def local_peaks(cfg: ProfileConfig, device: DeviceInfo, workload_dtype: str | None, console: Console) -> Peaks:
    request = default_request(device, cfg.peak_matmul_size, cfg.peak_copy_mib, cfg.peak_min_run_time_s, workload_dtype)
    with console.status(f"[bold]peaks[/] of {device.name} (cached per device)"):
        return measured_peaks(
            device,
            request,
            cfg.peaks_cache_dir or default_cache_dir(),
            cfg.remeasure_peaks,
            warn=lambda text: console.print(f"[yellow]{text}[/]"),
        )


def record_peaks(run: BenchmarkRun, peaks: Peaks | None) -> None:
    if peaks is None:
        return
    source = "measured" if peaks.source == "measured" else "datasheet"
    for dtype, value in peaks.flop_per_second.items():
        run.metrics.set("fleetbench_profile_peak_flop_per_second", value, dtype=dtype, source=source)
    if peaks.bytes_per_second:
        run.metrics.set("fleetbench_profile_peak_bytes_per_second", peaks.bytes_per_second, source=source)


def record_trace(run: BenchmarkRun, summary: TraceSummary) -> None:
    for device in summary.devices:
        for category, share in device.shares.items():
            run.metrics.set("fleetbench_profile_time_share_ratio", share, gpu=device.device, category=category)
        run.metrics.set("fleetbench_profile_trace_span_seconds", device.span_s, gpu=device.device)
        if summary.launch is not None:
            run.metrics.set("fleetbench_profile_host_wait_seconds", summary.launch.host_wait_s, gpu=device.device)
    for kernel in summary.top_kernels:
        run.metrics.set("fleetbench_kernel_duration_seconds", kernel.total_s, kernel=kernel.label)
        run.metrics.inc("fleetbench_kernel_launches_total", kernel.count, kernel=kernel.label)


def op_rows(ops: list[OpStat], peaks: Peaks, thresholds: Thresholds, top: int) -> list[dict[str, Any]]:
    """The top ops by self time, each with its analytical figures, class and fix."""
    rows = []
    for op in [o for o in ops if o.self_time_s > 0][:top]:
        compute, memory = op_ratios(op, peaks)
        verdict = classify(compute, memory, thresholds, "compute", "memory")
        no_flops = op.flops <= 0
        rows.append(
            {
                "label": op.label,
                "short": short_name(op.name),
                "name": op.name,
                "calls": op.count,
                "self_time_s": op.self_time_s,
                "time_s": op.time_s,
                "flops": op.flops,
                "bytes": op.bytes,
                "dtype": op.dtype,
                "flop_per_second": op.flops / op.time_s if op.flops > 0 and op.time_s > 0 else None,
                "arithmetic_intensity": op.flops / op.bytes if op.flops > 0 and op.bytes > 0 else None,
                "compute_ratio": compute,
                "memory_ratio": memory,
                "class": verdict.cls,
                "reason": NO_FLOPS if no_flops else verdict.reason,
                "fix": NO_FLOPS_FIX if no_flops else verdict.fix,
                "fix_short": "not classified: no FLOP count" if no_flops else FIXES_SHORT[verdict.cls],
            }
        )
    return rows


def record_ops(run: BenchmarkRun, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        op = row["label"]
        run.metrics.set("fleetbench_profile_op_seconds", row["self_time_s"], op=op)
        run.metrics.set("fleetbench_profile_op_class_info", 1, op=op, **{"class": row["class"]})
        if row["flop_per_second"] is not None:
            run.metrics.set("fleetbench_profile_op_achieved_flop_per_second", row["flop_per_second"], op=op)
        if row["arithmetic_intensity"] is not None:
            run.metrics.set(
                "fleetbench_profile_op_arithmetic_intensity_flop_per_byte", row["arithmetic_intensity"], op=op
            )
        if row["compute_ratio"] is not None:
            run.metrics.set("fleetbench_profile_op_compute_peak_ratio", row["compute_ratio"], op=op)
        if row["memory_ratio"] is not None:
            run.metrics.set("fleetbench_profile_op_memory_peak_ratio", row["memory_ratio"], op=op)


def run_profile(config: FleetbenchConfig, console: Console) -> ResultRecord:
    """Step A (torch.profiler) and step C (roofline) on the configured workload."""
    cfg = config.profile
    device = resolve_device(cfg.device)
    workload = resolve_workload(config, device)  # validates inputs before any folder is created
    thresholds = thresholds_of(cfg)
    identity = _identity(config, "profile", device.name, device.backend)
    console.print(f"[bold]profile[/] {workload.description} on {device.name} ({device.backend})")
    with BenchmarkRun(
        identity, config.run.results_dir, config.telemetry, config=cfg.model_dump(mode="json"), console=console
    ) as run:
        out_dir = run.run_dir / "profile"
        with console.status("[bold]torch.profiler[/]") as status:
            result = capture(
                workload, cfg, device, out_dir, progress=lambda text: status.update(f"[bold]torch.profiler[/] {text}")
            )
        summary = summarize_trace(result.files["trace"], top=cfg.top)
        result.files["trace_summary"] = _write_json(out_dir / "trace_summary.json", summary.to_dict())
        peaks = local_peaks(cfg, device, workload.dtype, console)
        roofline = analytical_roofline(result.ops, peaks, thresholds)
        result.files["roofline_json"] = _write_json(out_dir / "roofline.json", roofline.to_dict())
        result.files["roofline_png"] = plot_roofline(roofline, out_dir / "roofline.png", cfg.roofline_labels)
        rows = op_rows(result.ops, peaks, thresholds, cfg.top)
        record_trace(run, summary)
        record_ops(run, rows)
        record_peaks(run, peaks)
        if device.backend == "cuda":
            sheet = peaks_from_datasheet(device.name)
            record_peaks(run, sheet)
        for path in result.files.values():
            run.add_artifact(path)
        run.summary.update(
            {
                "workload": {"kind": workload.kind, "description": workload.description, **workload.details},
                "steps_recorded": result.steps_recorded,
                "capture_wall_s": result.wall_s,
                "sorted_by": result.sort_key,
                "trace": {
                    "device_breakdown": [{**asdict(d), "shares": d.shares} for d in summary.devices],
                    "note": summary.note,
                    "top_kernels": [
                        {"label": k.label, "name": k.name, "count": k.count, "total_s": k.total_s}
                        for k in summary.top_kernels
                    ],
                    "launch": asdict(summary.launch) if summary.launch else None,
                },
                "top_ops": rows,
                "peaks": asdict(peaks),
                "roofline": {"points": len(roofline.points), "notes": roofline.notes},
                "notes": result.notes + workload.notes,
            }
        )
    for table in trace_tables(summary):
        console.print(table)
    for line in trace_lines(summary) + result.notes + roofline.notes:
        console.print(line)
    console.print(peaks_table([peaks]))
    if roofline.points:
        console.print(roofline_table(roofline, cfg.top))
    console.print(
        f"trace (ui.perfetto.dev): {result.files['trace']}\nroofline: {result.files['roofline_png']}\n"
        f"key_averages: {result.files['key_averages']}\nresult record: {run.run_dir / RECORDS_FILE}",
        soft_wrap=True,
    )
    # Last, as the issue asks: what limits the top ops, and what to do about it.
    if not rows:
        console.print("no torch ops were recorded: nothing to classify")
        assert run.record is not None
        return run.record
    console.print(
        fixes_table(
            f"top ops on {device.name}: class and main fix",
            [
                FixRow(r["short"], r["self_time_s"], r["compute_ratio"], r["memory_ratio"], r["class"], r["fix_short"])
                for r in rows
            ],
        )
    )
    assert run.record is not None
    return run.record


# --- Nsight Compute ------------------------------------------------------------------------------------
def summarize_ncu(path: Path, cfg: ProfileConfig) -> NcuSummary:
    return summarize_report(read_report(path), thresholds_of(cfg))


def record_ncu(run: BenchmarkRun, summary: NcuSummary, top: int) -> None:
    for group in summary.groups[:top]:
        kernel = group.label
        if group.duration_s is not None:
            run.metrics.set("fleetbench_kernel_duration_seconds", group.duration_s, kernel=kernel)
        run.metrics.inc("fleetbench_kernel_launches_total", group.launches, kernel=kernel)
        for metric, value in (
            ("fleetbench_kernel_compute_sol_ratio", group.compute_sol),
            ("fleetbench_kernel_memory_sol_ratio", group.memory_sol),
            ("fleetbench_kernel_dram_sol_ratio", group.dram_sol),
            ("fleetbench_kernel_achieved_flop_per_second", group.flop_per_second),
            ("fleetbench_kernel_dram_bytes", group.dram_bytes),
            ("fleetbench_kernel_arithmetic_intensity_flop_per_byte", group.arithmetic_intensity),
        ):
            if value is not None:  # absent stays absent: no series rather than a zero
                run.metrics.set(metric, value, kernel=kernel)
        run.metrics.set("fleetbench_kernel_class_info", 1, kernel=kernel, **{"class": group.cls})


def ncu_summary_dict(summary: NcuSummary, top: int) -> dict[str, Any]:
    return {
        "report": summary.path,
        "format": summary.format,
        "devices": summary.devices,
        "launches": len(summary.kernels),
        "kernels": len(summary.groups),
        "top_kernels": [asdict(g) for g in summary.groups[:top]],
    }


def _ncu_outputs(
    run: BenchmarkRun, summary: NcuSummary, cfg: ProfileConfig, out_dir: Path, console: Console
) -> Roofline:
    record_ncu(run, summary, cfg.top)
    summary_path = _write_json(out_dir / "ncu_summary.json", summary.to_dict())
    roofline = ncu_roofline(summary)
    png = plot_roofline(roofline, out_dir / "roofline.png", cfg.roofline_labels)
    roofline_path = _write_json(out_dir / "roofline.json", roofline.to_dict())
    for path in (summary_path, png, roofline_path):
        run.add_artifact(path)
    run.summary.update(
        {
            "ncu": ncu_summary_dict(summary, cfg.top),
            "roofline": {"points": len(roofline.points), "notes": roofline.notes, "peaks": roofline.peaks},
        }
    )
    console.print(ncu_table(summary))
    console.print(fixes_table("kernels: class and main fix", ncu_fix_rows(summary, cfg.top)))
    for note in roofline.notes:
        console.print(note)
    console.print(f"summary: {summary_path}\nroofline: {png}", soft_wrap=True)
    return roofline


def default_ncu_program(config_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "fleetbench.profile.ncu_target", *config_args]


def run_ncu_capture(
    config: FleetbenchConfig, console: Console, program: list[str], report: Path | None, config_args: list[str]
) -> ResultRecord:
    """`fleetbench ncu run`: capture under ncu (default program: the profile workload), then summarise."""
    cfg = config.profile
    ncu = cfg.ncu
    if not program:
        program = default_ncu_program(config_args)
        if ncu.nvtx_include is None:
            ncu = ncu.model_copy(update={"nvtx_include": NVTX_INCLUDE})
    find_ncu(ncu.executable)  # before any folder is made
    try:
        local = resolve_device("cuda")
        identity = _identity(config, "ncu", local.name, local.backend)
    except UserError:  # torch sees no GPU here; the report will name the device it profiled
        identity = _identity(config, "ncu", "unknown", "cuda")
    with BenchmarkRun(
        identity, config.run.results_dir, config.telemetry, config=cfg.model_dump(mode="json"), console=console
    ) as run:
        out_dir = run.run_dir / "ncu"
        target = report_path(report if report is not None else out_dir / "report")
        console.print(f"[bold]ncu[/] {' '.join(program)}")
        capture_run = run_ncu(
            ncu, target, program, echo=lambda line: console.print(line, markup=False, highlight=False)
        )
        if capture_run.report.is_relative_to(run.run_dir):
            run.add_artifact(capture_run.report)
        run.summary["command"] = capture_run.command
        run.summary["report"] = str(capture_run.report)
        if capture_run.returncode:
            run.summary["program_status"] = capture_run.returncode
            console.print(
                f"[yellow]the profiled program exited with status {capture_run.returncode}; "
                "the report holds what ran before[/]"
            )
        if importlib.util.find_spec("ncu_report") is None:
            note = f"report kept at {capture_run.report}; to summarise it here: {INSTALL_HINT}"
            run.summary["notes"] = [note]
            console.print(f"[yellow]{note}[/]")
        else:
            _ncu_outputs(run, summarize_ncu(capture_run.report, cfg), cfg, out_dir, console)
    assert run.record is not None
    return run.record


def record_ncu_summary(config: FleetbenchConfig, console: Console, path: Path) -> ResultRecord:
    cfg = config.profile
    summary = summarize_ncu(path, cfg)
    identity = _identity(config, "ncu", summary.devices[0] if summary.devices else "unknown", "cuda")
    with BenchmarkRun(
        identity, config.run.results_dir, config.telemetry, config=cfg.model_dump(mode="json"), console=console
    ) as run:
        out_dir = run.run_dir / "ncu"
        out_dir.mkdir(parents=True, exist_ok=True)
        _ncu_outputs(run, summary, cfg, out_dir, console)
    assert run.record is not None
    return run.record


# --- roofline ------------------------------------------------------------------------------------------
def resolve_ops_path(path: Path) -> tuple[Path, str | None]:
    """ops.json itself, or a run folder holding profile/ops.json; with the device that profiled it."""
    ops = path / "profile" / "ops.json" if path.is_dir() else path
    if not ops.is_file():
        raise UserError(
            f"--ops {path}: no ops.json there; pass a profile run folder (results/RUN_ID) or its profile/ops.json"
        )
    run_dir = ops.parent.parent
    device = None
    if (run_dir / RECORDS_FILE).is_file():
        device = next((r.device for r in read_records(run_dir) if r.benchmark == "profile"), None)
    return ops, device


def run_roofline(
    config: FleetbenchConfig, console: Console, ncu_report: Path | None, ops_path: Path | None
) -> ResultRecord:
    cfg = config.profile
    thresholds = thresholds_of(cfg)
    if ncu_report is not None and ops_path is not None:
        raise UserError("give --ncu REPORT or --ops RUN_FOLDER, not both")
    summary = summarize_ncu(ncu_report, cfg) if ncu_report is not None else None
    ops: list[OpStat] | None = None
    ops_device = None
    if ops_path is not None:
        ops_file, ops_device = resolve_ops_path(ops_path)
        try:
            ops = load_ops(ops_file)
        except (ValueError, TypeError, KeyError) as exc:
            raise UserError(f"{ops_file} is not an ops.json written by fleetbench profile ({exc})") from None
    device = resolve_device(cfg.device) if summary is None else None
    if device is not None and ops_device is not None and ops_device != device.name:
        raise UserError(
            f"the ops were profiled on {ops_device!r} but this machine is {device.name!r}; run "
            "fleetbench roofline on the machine that profiled them (its peaks are measured here)"
        )
    name = summary.devices[0] if summary and summary.devices else device.name if device else "unknown"
    backend = "cuda" if summary is not None else device.backend if device else "unknown"
    identity = _identity(config, "roofline", name, backend)
    with BenchmarkRun(
        identity, config.run.results_dir, config.telemetry, config=cfg.model_dump(mode="json"), console=console
    ) as run:
        out_dir = run.run_dir / "roofline"
        out_dir.mkdir(parents=True, exist_ok=True)
        shown: list[Peaks] = []
        if summary is not None:
            roofline = ncu_roofline(summary)
            record_ncu(run, summary, cfg.top)
            if roofline.peaks:
                shown.append(Peaks(**roofline.peaks))
        else:
            assert device is not None
            peaks = local_peaks(cfg, device, None, console)
            shown.append(peaks)
            record_peaks(run, peaks)
            if device.backend == "cuda" and (sheet := peaks_from_datasheet(device.name)) is not None:
                shown.append(sheet)
                record_peaks(run, sheet)
            if ops is not None:
                roofline = analytical_roofline(ops, peaks, thresholds)
                record_ops(run, op_rows(ops, peaks, thresholds, cfg.top))
            else:
                roofline = Roofline(
                    title=f"roofs of {device.name} (measured peaks; no points: pass --ops or --ncu)",
                    source="peaks",
                    device=device.name,
                    peaks=asdict(peaks),
                )
        png = plot_roofline(roofline, out_dir / "roofline.png", cfg.roofline_labels)
        data = _write_json(out_dir / "roofline.json", roofline.to_dict())
        run.add_artifact(png)
        run.add_artifact(data)
        run.summary.update(
            {
                "source": roofline.source,
                "points": [asdict(p) for p in roofline.points[: cfg.top]],
                "peaks": [asdict(p) for p in shown],
                "notes": roofline.notes,
            }
        )
    console.print(peaks_table(shown))
    if roofline.points:
        console.print(roofline_table(roofline, cfg.top))
    for note in roofline.notes:
        console.print(note)
    console.print(f"roofline: {png}", soft_wrap=True)
    assert run.record is not None
    return run.record
