"""`fleetbench profile`: torch.profiler capture of a workload, its trace summary, peaks and roofline.

Steps A (macro trace) and C (analytical roofline); step B, Nsight Compute, is `profile/jobs/ncu.py`,
and the roofline of an existing report or profile run is `profile/jobs/roofline.py`. Everything goes
to results/<run_id>/profile/. The workload runs under the profiler before the run folder is made,
so a script or module that fails leaves no folder behind.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.devices import DeviceInfo, resolve_device
from fleetbench.energy.meter import EnergyMeter
from fleetbench.fsutil import check_writable_dir
from fleetbench.gpus import Peaks, peaks_from_datasheet
from fleetbench.job import Job, JobResult, Progress, RunContext
from fleetbench.profile.capture import CaptureResult, Recording, record, write_capture
from fleetbench.profile.classify import thresholds_of
from fleetbench.profile.export import record_ops, record_peaks, record_trace, write_json
from fleetbench.profile.peaks import local_peaks
from fleetbench.profile.roofline.analysis import Roofline, analytical_roofline, op_rows, plot_roofline
from fleetbench.profile.trace.summary import TraceSummary, summarize_trace
from fleetbench.profile.workloads import UserCodeFailed, Workload, resolve_workload
from fleetbench.telemetry.energy import record_energy
from fleetbench.telemetry.session import open_run

BENCHMARK = "profile"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileOutcome:
    """What one `fleetbench profile` run found, as its closing display needs it."""

    summary: TraceSummary
    capture: CaptureResult
    peaks: Peaks
    roofline: Roofline
    rows: list[dict[str, Any]]  # the top ops, from roofline.analysis.op_rows
    device: str
    run_dir: Path
    top: int


def _record(workload: Workload, config: FleetbenchConfig, device: DeviceInfo, progress: Progress) -> Recording:
    """Run the workload under torch.profiler, before the run folder exists.

    A script or module that fails leaves nothing behind: its own traceback (its frames only) is
    shown at the info level, then its one-line error.
    """
    try:
        with progress.task("torch.profiler") as task:
            return record(workload, config.profile, device, task.update)
    except UserCodeFailed as exc:
        if exc.traceback:
            log.info("%s", exc.traceback)
        raise


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[ProfileOutcome]:
    """Capture the configured workload, summarise the trace, classify the top ops on the roofline."""
    cfg = config.profile
    device = resolve_device(cfg.device)
    workload = resolve_workload(config, device)  # validates inputs before any folder is created
    thresholds = thresholds_of(cfg)
    check_writable_dir(context.run_dir, "results dir", "--results-dir")
    log.info("profile: %s on %s (%s)", workload.description, device.name, device.backend)
    # the profiled steps' energy, the profiler's own overhead included (as their times are)
    meter = EnergyMeter(gpu_index=(device.torch_device.index or 0) if device.backend == "cuda" else None).start()
    recording = _record(workload, config, device, context.progress)  # the run folder is made once this succeeded
    energy = meter.stop()
    with open_run(config, context, BENCHMARK, cfg, device.name, device.backend) as bench:
        out_dir = bench.run_dir / "profile"
        result = write_capture(recording, cfg, device, out_dir)
        summary = summarize_trace(result.files["trace"], top=cfg.top)
        if summary.note:
            log.info(summary.note)
        result.files["trace_summary"] = write_json(out_dir / "trace_summary.json", summary.to_dict())
        peaks = local_peaks(cfg, device, workload.dtype, context.progress)
        roofline = analytical_roofline(result.ops, peaks, thresholds)
        result.files["roofline_json"] = write_json(out_dir / "roofline.json", roofline.to_dict())
        result.files["roofline_png"] = plot_roofline(roofline, out_dir / "roofline.png", cfg.roofline_labels)
        rows = op_rows(result.ops, peaks, thresholds, cfg.top)
        record_trace(bench, summary)
        record_ops(bench, rows)
        record_peaks(bench, peaks)
        record_energy(bench, energy, steps=result.steps_recorded, tokens=0)
        if device.backend == "cuda":
            record_peaks(bench, peaks_from_datasheet(device.name))
        for path in result.files.values():
            bench.add_artifact(path)
        bench.summary.update(
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
    outcome = ProfileOutcome(summary, result, peaks, roofline, rows, device.name, bench.run_dir, cfg.top)
    return JobResult([bench.result()], outcome)


JOB: Job[ProfileOutcome] = run
