"""`fleetbench ncu run`: capture a program under Nsight Compute, then summarise the report as a run.

The program is `profile.ncu.program`, or by default the profile workload run bare by
`fleetbench.profile.ncu.target` with this run's own config. The report goes to
`profile.ncu.report`, or results/<run_id>/ncu/report.ncu-rep.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import yaml

from fleetbench.config.schema import FleetbenchConfig, ProfileConfig
from fleetbench.devices import resolve_device
from fleetbench.errors import UserError
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.profile.classify import Thresholds, thresholds_of
from fleetbench.profile.export import record_ncu, write_json
from fleetbench.profile.ncu import report_module
from fleetbench.profile.ncu.command import find_ncu, report_path, run_ncu
from fleetbench.profile.ncu.readers import INSTALL_HINT
from fleetbench.profile.ncu.summary import NcuSummary, overview, summarize_path
from fleetbench.profile.roofline.analysis import ncu_roofline, plot_roofline
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "ncu"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NcuOutcome:
    """A summarised report as its display needs it: the kernels, how many to show, the files written."""

    summary: NcuSummary
    top: int
    files: tuple[Path, ...]


def export_summary(bench: BenchmarkRun, summary: NcuSummary, cfg: ProfileConfig, out_dir: Path) -> NcuOutcome:
    """Metrics, summary JSON, roofline PNG and JSON of a summarised report; what to show of them."""
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
    return NcuOutcome(summary, cfg.top, (summary_path, png))


def target_program(config: FleetbenchConfig, out_dir: Path) -> list[str]:
    """The default program: the profile workload, bare, reading this run's config from a file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path = out_dir / "target-config.yaml"
    config_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    return [sys.executable, "-m", "fleetbench.profile.ncu.target", "--config", str(config_path)]


def summarize_apart(report: Path, thresholds: Thresholds, gpu: str | None, peak: str | None) -> NcuSummary:
    """Summarise a fresh capture in a fresh interpreter, not in this one.

    On an H100 (torch 2.11 with CUDA 13, Nsight Compute 2025.3.1) NVIDIA's ncu_report died of SIGSEGV
    reading the capture in this process, which has loaded torch and CUDA, while `fleetbench ncu summarize`
    read another capture of the same workload in a process of its own. A crash of the reader now costs
    one line, and the report is kept.
    """
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(summarize_path, report, thresholds, gpu, peak).result()
        except BrokenProcessPool:
            raise UserError(
                f"NVIDIA's ncu_report crashed reading {report}; the report is kept: summarise it on its own with "
                f"fleetbench ncu summarize {report}"
            ) from None


def _local_gpu() -> tuple[str, str]:
    try:
        local = resolve_device("cuda")
    except UserError:  # torch sees no GPU here; the report names the device it profiled
        return "unknown", "cuda"
    return local.name, local.backend


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[NcuOutcome | None]:
    """Capture under ncu, then summarise the report into metrics, a roofline and the record.

    The view is None where ncu_report is missing: the report is kept, and the record says how to summarise it.
    """
    from fleetbench.profile.ncu.target import NVTX_INCLUDE  # the target imports torch; a summary needs neither

    cfg = config.profile
    ncu = cfg.ncu
    if not ncu.program and ncu.nvtx_include is None:
        ncu = ncu.model_copy(update={"nvtx_include": NVTX_INCLUDE})
    find_ncu(ncu.executable)  # before any folder is made
    device, backend = _local_gpu()
    outcome = None
    with open_run(config, context, BENCHMARK, cfg, device, backend) as bench:
        out_dir = bench.run_dir / "ncu"
        program = list(ncu.program) or target_program(context.pinned(config), out_dir)
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
        if not report_module.available():
            note = f"report kept at {capture.report}; to summarise it here: {INSTALL_HINT}"
            bench.summary["notes"] = [note]
            log.warning(note)
        else:
            summary = summarize_apart(capture.report, thresholds_of(cfg), cfg.ncu.gpu, cfg.ncu.peak)
            outcome = export_summary(bench, summary, cfg, out_dir)
    return JobResult([bench.result()], outcome)


JOB: Job[NcuOutcome | None] = run


def summary_job(report: Path) -> Job[NcuOutcome]:
    """`fleetbench ncu summarize --record`: the job that makes an existing report a run of its own."""

    def record_report(config: FleetbenchConfig, context: RunContext) -> JobResult[NcuOutcome]:
        cfg = config.profile
        summary = summarize_path(report, thresholds_of(cfg), cfg.ncu.gpu, cfg.ncu.peak)
        device = summary.devices[0] if summary.devices else "unknown"
        with open_run(config, context, BENCHMARK, cfg, device, "cuda") as bench:
            out_dir = bench.run_dir / "ncu"
            out_dir.mkdir(parents=True, exist_ok=True)
            outcome = export_summary(bench, summary, cfg, out_dir)
        return JobResult([bench.result()], outcome)

    return record_report
