"""`fleetbench report`: render every dashboard's panels for one run, and write results/<run_id>/report/."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from fleetbench.dashboards.definition import Dashboard
from fleetbench.dashboards.registry import DASHBOARDS
from fleetbench.errors import UserError
from fleetbench.fsutil import check_output_file, ensure_writable_dir, readable_file, write_text_atomic
from fleetbench.report.charts import draw
from fleetbench.report.comparison import COMPARE_DIR, CompareTo, draw_overlays, section
from fleetbench.report.page import render_page
from fleetbench.report.sources import PrometheusSource, RecordsSource
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient

if TYPE_CHECKING:
    from fleetbench.results.record import ResultRecord

REPORT_DIR = "report"

log = logging.getLogger(__name__)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def panel_file(dashboard: Dashboard, title: str) -> str:
    """The file name of a panel's PNG under report/panels/."""
    return f"{dashboard.uid}--{_slug(title)}.png"


def dashboards_for(benchmarks: set[str]) -> list[Dashboard]:
    """The overview, and each benchmark dashboard the run has records for (not those comparing two runs)."""
    return [d for d in DASHBOARDS if d.one_run and (not d.benchmarks or set(d.benchmarks) & benchmarks)]


def run_plots(run_dir: Path) -> list[Path]:
    """The PNGs the run's benchmarks drew (not the report's own), each checked readable before anything is written."""
    plots = sorted(
        p for p in run_dir.rglob("*.png") if REPORT_DIR not in p.relative_to(run_dir).parts and not p.is_dir()
    )
    for plot in plots:
        readable_file(plot, "plot", "accepted: a readable PNG, or remove it from the run folder")
    return plots


def build_report(run_dir: Path, prometheus_url: str | None, compare_to: CompareTo | None = None) -> Path:
    """Render the run's dashboards and write `<run_dir>/report/index.html`; return the page's path.

    Panels query Prometheus at `prometheus_url`; with None, or when it is not up (a warning), they
    are drawn from the run's result records instead. With `compare_to` (`comparison.prepare`), the
    page gains a comparison section, its overlay plots under `<run_dir>/report/compare/`. What can
    be checked is checked before anything is written: the records and plots are readable, the
    report folder writable; a write that fails later (a full disk) is one line, and the page
    itself is replaced only once it is completely written.
    """
    records = read_records(run_dir)
    if not records:  # a run whose records.jsonl is empty (or blank lines): nothing to draw or time
        raise UserError(
            f"run {run_dir} holds no result records; accepted: a run with at least one record in records.jsonl"
        )
    artifacts = run_plots(run_dir)
    out = run_dir / REPORT_DIR
    if os.path.isdir(out):  # an immutable page of an earlier report: refused before anything is made
        check_output_file(out / "index.html", "report page")
    ensure_writable_dir(
        out / "panels", "report folder", "", remedy=f"make the run folder {run_dir} writable, or copy it elsewhere"
    )
    client = PrometheusClient(prometheus_url) if prometheus_url else None
    if client is not None and not client.ready():
        log.warning("Prometheus at %s is not up: rendering panels from the records", prometheus_url)
        client = None
    try:
        return _write_report(run_dir, records, artifacts, client, compare_to)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise UserError(
            f"writing the report into {out} failed at{where} ({exc.strerror or exc}); the previous page, if any, "
            "is unchanged; free space or make the folder writable and run it again"
        ) from None


def _write_report(
    run_dir: Path,
    records: list[ResultRecord],
    artifacts: list[Path],
    client: PrometheusClient | None,
    compare_to: CompareTo | None,
) -> Path:
    run_id = run_dir.name
    out = run_dir / REPORT_DIR
    start = min(r.start for r in records).timestamp()
    end = max(r.end for r in records).timestamp()
    source = PrometheusSource(client, run_id, start, end) if client else RecordsSource(records)
    rendered = []
    for dashboard in dashboards_for({r.benchmark for r in records}):
        images = []
        for panel in dashboard.panels():
            data = source.panel(panel)
            if not data.series and panel.may_be_empty:
                # DCGM and GPU-trace panels on a machine without GPUs; Slurm panels without Slurm
                log.debug("%s: skipped %r: GPU- or Slurm-only, no data", dashboard.uid, panel.title)
                continue
            png = out / "panels" / panel_file(dashboard, panel.title)
            images.append((panel.title, draw(data, png)))
        log.debug("%s: %d panels from %s", dashboard.uid, len(images), "Prometheus" if client else "the records")
        rendered.append((dashboard, images))
    comparison = ""
    if compare_to is not None:
        comparison = section(compare_to, draw_overlays(compare_to, run_dir, out / COMPARE_DIR))
    page = out / "index.html"
    html = render_page(run_id, records, rendered, artifacts, "Prometheus" if client else "result records", comparison)
    return write_text_atomic(page, html, "report page")
