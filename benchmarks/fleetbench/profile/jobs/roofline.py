"""`fleetbench roofline`: a roofline chart and record from an ncu report (`profile.roofline_ncu`), the
ops of a profile run (`profile.roofline_ops`), or this device's peaks alone. Output: results/<run_id>/roofline/."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.devices import DeviceInfo, resolve_device
from fleetbench.errors import UserError
from fleetbench.gpus import Peaks, peaks_from_datasheet
from fleetbench.job import Job, JobResult, Progress, RunContext
from fleetbench.profile.capture import load_ops
from fleetbench.profile.classify import thresholds_of
from fleetbench.profile.export import record_ncu, record_ops, record_peaks, write_json
from fleetbench.profile.ncu.summary import NcuSummary, summarize_path
from fleetbench.profile.peaks import local_peaks
from fleetbench.profile.roofline.analysis import (
    OpStat,
    Roofline,
    analytical_roofline,
    ncu_roofline,
    op_rows,
    plot_roofline,
)
from fleetbench.results.store import RECORDS_FILE, read_records
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "roofline"


@dataclass(frozen=True)
class RooflineOutcome:
    """What the roofline job shows: the roofs it drew against, the chart's points, the chart."""

    shown: list[Peaks]
    roofline: Roofline
    top: int
    png: Path


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


def read_ops(path: Path) -> tuple[list[OpStat], str | None]:
    """The ops of a profile run and the device they were profiled on."""
    ops_file, device = resolve_ops_path(path)
    try:
        return load_ops(ops_file), device
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{ops_file} is not an ops.json written by fleetbench profile ({exc})") from None


def _from_ncu(bench: BenchmarkRun, summary: NcuSummary, top: int) -> tuple[Roofline, list[Peaks]]:
    roofline = ncu_roofline(summary)
    record_ncu(bench, summary, top)
    return roofline, [Peaks(**roofline.peaks)] if roofline.peaks else []


def _from_peaks(
    bench: BenchmarkRun, config: FleetbenchConfig, device: DeviceInfo, ops: list[OpStat] | None, progress: Progress
) -> tuple[Roofline, list[Peaks]]:
    cfg = config.profile
    peaks = local_peaks(cfg, device, None, progress)
    shown = [peaks]
    record_peaks(bench, peaks)
    if device.backend == "cuda" and (sheet := peaks_from_datasheet(device.name)) is not None:
        shown.append(sheet)
        record_peaks(bench, sheet)
    if ops is None:
        title = f"roofs of {device.name} (measured peaks; no points: pass --ops or --ncu)"
        return Roofline(title=title, source="peaks", device=device.name, peaks=asdict(peaks)), shown
    thresholds = thresholds_of(cfg)
    record_ops(bench, op_rows(ops, peaks, thresholds, cfg.top))
    return analytical_roofline(ops, peaks, thresholds), shown


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[RooflineOutcome]:
    """Points from the report or the ops, roofs measured here (or the report's own), chart and record."""
    cfg = config.profile
    summary = (
        summarize_path(cfg.roofline_ncu, thresholds_of(cfg), cfg.ncu.gpu, cfg.ncu.peak)
        if cfg.roofline_ncu is not None
        else None
    )
    ops, ops_device = read_ops(cfg.roofline_ops) if cfg.roofline_ops is not None else (None, None)
    device = resolve_device(cfg.device) if summary is None else None
    if device is not None and ops_device is not None and ops_device != device.name:
        raise UserError(
            f"the ops were profiled on {ops_device!r} but this machine is {device.name!r}; run "
            "fleetbench roofline on the machine that profiled them (its peaks are measured here)"
        )
    if summary is not None:
        name, backend = (summary.devices[0] if summary.devices else "unknown"), "cuda"
    else:
        assert device is not None
        name, backend = device.name, device.backend
    with open_run(config, context, BENCHMARK, cfg, name, backend) as bench:
        out_dir = bench.run_dir / "roofline"
        out_dir.mkdir(parents=True, exist_ok=True)
        if summary is not None:
            roofline, shown = _from_ncu(bench, summary, cfg.top)
        else:
            assert device is not None
            roofline, shown = _from_peaks(bench, config, device, ops, context.progress)
        png = plot_roofline(roofline, out_dir / "roofline.png", cfg.roofline_labels)
        bench.add_artifact(png)
        bench.add_artifact(write_json(out_dir / "roofline.json", roofline.to_dict()))
        bench.summary.update(
            {
                "source": roofline.source,
                "points": [asdict(p) for p in roofline.points[: cfg.top]],
                "peaks": [asdict(p) for p in shown],
                "notes": roofline.notes,
            }
        )
    return JobResult([bench.result()], RooflineOutcome(shown, roofline, cfg.top, png))


JOB: Job[RooflineOutcome] = run
