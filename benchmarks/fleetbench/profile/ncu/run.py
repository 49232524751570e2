"""`fleetbench ncu run`: capture a program under Nsight Compute, then summarise the report as a run.

The program is `profile.ncu.program`, or by default the profile workload run bare by
`fleetbench.profile.ncu.target` with this run's own config. The report goes to
`profile.ncu.report`, or results/<run_id>/ncu/report.ncu-rep.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

import yaml
from rich.console import Console

from fleetbench.config.schema import FleetbenchConfig, ProfileConfig
from fleetbench.devices import resolve_device
from fleetbench.errors import UserError
from fleetbench.profile.classify import thresholds_of
from fleetbench.profile.display import show_ncu
from fleetbench.profile.export import record_ncu, write_json
from fleetbench.profile.ncu.command import find_ncu, report_path, run_ncu
from fleetbench.profile.ncu.readers import INSTALL_HINT
from fleetbench.profile.ncu.summary import NcuSummary, overview, summarize_path
from fleetbench.profile.roofline.analysis import Roofline, ncu_roofline, plot_roofline
from fleetbench.results.record import ResultRecord
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "ncu"

log = logging.getLogger(__name__)


def export_summary(
    bench: BenchmarkRun, summary: NcuSummary, cfg: ProfileConfig, out_dir: Path, console: Console
) -> Roofline:
    """Metrics, summary JSON, roofline PNG and JSON of a summarised report, then the tables."""
    record_ncu(bench, summary, cfg.top)
    summary_path = write_json(out_dir / "ncu_summary.json", summary.to_dict())
    roofline = ncu_roofline(summary)
    png = plot_roofline(roofline, out_dir / "roofline.png", cfg.roofline_labels)
    roofline_path = write_json(out_dir / "roofline.json", roofline.to_dict())
    for path in (summary_path, png, roofline_path):
        bench.add_artifact(path)
    bench.summary.update(
        {
            "ncu": overview(summary, cfg.top),
            "roofline": {"points": len(roofline.points), "notes": roofline.notes, "peaks": roofline.peaks},
        }
    )
    show_ncu(console, summary, cfg.top, (summary_path, png))
    return roofline


def target_program(config: FleetbenchConfig, out_dir: Path) -> list[str]:
    """The default program: the profile workload, bare, reading this run's config from a file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path = out_dir / "target-config.yaml"
    config_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    return [sys.executable, "-m", "fleetbench.profile.ncu.target", "--config", str(config_path)]


def _local_gpu() -> tuple[str, str]:
    try:
        local = resolve_device("cuda")
    except UserError:  # torch sees no GPU here; the report names the device it profiled
        return "unknown", "cuda"
    return local.name, local.backend


def run(config: FleetbenchConfig, console: Console) -> ResultRecord:
    """Capture under ncu, then summarise the report into metrics, a roofline and the record."""
    from fleetbench.profile.ncu.target import NVTX_INCLUDE  # the target imports torch; a summary needs neither

    cfg = config.profile
    ncu = cfg.ncu
    if not ncu.program and ncu.nvtx_include is None:
        ncu = ncu.model_copy(update={"nvtx_include": NVTX_INCLUDE})
    find_ncu(ncu.executable)  # before any folder is made
    device, backend = _local_gpu()
    with open_run(config, BENCHMARK, cfg, device, backend) as bench:
        out_dir = bench.run_dir / "ncu"
        program = list(ncu.program) or target_program(config, out_dir)
        target = report_path(ncu.report if ncu.report is not None else out_dir / "report")
        log.info("ncu %s", " ".join(program))
        capture = run_ncu(ncu, target, program, echo=log.info)
        if capture.report.is_relative_to(bench.run_dir):
            bench.add_artifact(capture.report)
        bench.summary["command"] = capture.command
        bench.summary["report"] = str(capture.report)
        if capture.returncode:
            bench.summary["program_status"] = capture.returncode
            log.warning(
                "the profiled program exited with status %d; the report holds what ran before", capture.returncode
            )
        if importlib.util.find_spec("ncu_report") is None:
            note = f"report kept at {capture.report}; to summarise it here: {INSTALL_HINT}"
            bench.summary["notes"] = [note]
            log.warning(note)
        else:
            summary = summarize_path(capture.report, thresholds_of(cfg), cfg.ncu.gpu, cfg.ncu.peak)
            export_summary(bench, summary, cfg, out_dir, console)
    return bench.result()


def record_report(config: FleetbenchConfig, console: Console, report: Path) -> ResultRecord:
    """`fleetbench ncu summarize --record`: an existing report becomes a run of its own."""
    cfg = config.profile
    summary = summarize_path(report, thresholds_of(cfg), cfg.ncu.gpu, cfg.ncu.peak)
    device = summary.devices[0] if summary.devices else "unknown"
    with open_run(config, BENCHMARK, cfg, device, "cuda") as bench:
        out_dir = bench.run_dir / "ncu"
        out_dir.mkdir(parents=True, exist_ok=True)
        export_summary(bench, summary, cfg, out_dir, console)
    return bench.result()
