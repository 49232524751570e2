"""`fleetbench report`: render every dashboard's panels for one run, and write results/<run_id>/report/."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from fleetbench.dashboards.definition import Dashboard
from fleetbench.dashboards.registry import DASHBOARDS
from fleetbench.report.charts import draw
from fleetbench.report.comparison import COMPARE_DIR, CompareTo, draw_overlays, section
from fleetbench.report.page import render_page
from fleetbench.report.sources import PrometheusSource, RecordsSource
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient

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


def build_report(run_dir: Path, prometheus_url: str | None, compare_to: CompareTo | None = None) -> Path:
    """Render the run's dashboards and write `<run_dir>/report/index.html`; return the page's path.

    Panels query Prometheus at `prometheus_url`; with None, or when it is not up (a warning), they
    are drawn from the run's result records instead. With `compare_to` (`comparison.prepare`), the
    page gains a comparison section, its overlay plots under `<run_dir>/report/compare/`.
    """
    records = read_records(run_dir)
    run_id = run_dir.name
    client = PrometheusClient(prometheus_url) if prometheus_url else None
    if client is not None and not client.ready():
        log.warning("Prometheus at %s is not up: rendering panels from the records", prometheus_url)
        client = None
    start = min(r.start for r in records).timestamp()
    end = max(r.end for r in records).timestamp()
    source = PrometheusSource(client, run_id, start, end) if client else RecordsSource(records)
    out = run_dir / REPORT_DIR
    (out / "panels").mkdir(parents=True, exist_ok=True)
    rendered = []
    for dashboard in dashboards_for({r.benchmark for r in records}):
        images = []
        for panel in dashboard.panels():
            data = source.panel(panel)
            if not data.series and panel.gpu_only:
                # DCGM and GPU-trace panels on a machine without GPUs
                log.debug("%s: skipped %r: GPU-only, no data", dashboard.uid, panel.title)
                continue
            png = out / "panels" / panel_file(dashboard, panel.title)
            images.append((panel.title, draw(data, png)))
        log.debug("%s: %d panels from %s", dashboard.uid, len(images), "Prometheus" if client else "the records")
        rendered.append((dashboard, images))
    comparison = ""
    if compare_to is not None:
        comparison = section(compare_to, draw_overlays(compare_to, run_dir, out / COMPARE_DIR))
    artifacts = sorted(p for p in run_dir.rglob("*.png") if REPORT_DIR not in p.relative_to(run_dir).parts)
    page = out / "index.html"
    tmp = page.with_suffix(".tmp")
    tmp.write_text(
        render_page(run_id, records, rendered, artifacts, "Prometheus" if client else "result records", comparison),
        encoding="utf-8",
    )
    tmp.replace(page)
    return page
