"""The self-contained HTML page of one run: panels, plots the benchmarks drew, key figures, config."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from fleetbench import jsonio
from fleetbench.dashboards.definition import Dashboard
from fleetbench.report.headline import headline_cell
from fleetbench.results.record import ResultRecord

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #1f2328; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #d0d7de; padding: 4px 8px; }
th { background: #f6f8fa; text-align: left; } .grid { display: flex; flex-wrap: wrap; gap: 12px; }
.panel { border: 1px solid #d0d7de; border-radius: 6px; padding: 6px; }
.panel img, .artifact img { display: block; max-width: 100%; } pre { background: #f6f8fa; padding: 8px; }
.meta { color: #57606a; font-size: 13px; } .failed { color: #cf222e; font-weight: bold; }
td { vertical-align: top; } ul.figures { margin: 2px 0; padding-left: 16px; } .key { font-weight: 600; }
.labels { color: #57606a; } details pre { max-height: 400px; overflow: auto; font-size: 12px; }
.verdict.better { color: #1a7f37; font-weight: bold; } .verdict.worse { color: #cf222e; font-weight: bold; }
.mismatch { color: #9a6700; } .config { font-family: monospace; font-size: 12px; margin: 2px 0; }
"""


def data_uri(png: Path) -> str:
    """The PNG inlined as a data: URI, so the page needs no other files."""
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()


def render_page(
    run_id: str,
    records: list[ResultRecord],
    panels: list[tuple[Dashboard, list[tuple[str, Path]]]],
    artifacts: list[Path],
    source: str,
    comparison: str = "",
) -> str:
    """The HTML page: records table, a comparison, each dashboard's panel images, the run's own plots, its configs.

    `panels` pairs each dashboard with its (title, PNG) images; `source` says where the panels' data
    came from ("Prometheus" or "result records"); `comparison` is the section `report --compare`
    adds (HTML, escaped by its builder), "" without one.
    """
    first = records[0]
    rows = "".join(
        f"<tr><td>{html.escape(r.benchmark)}</td><td>{r.rank}</td><td>{html.escape(r.host)}</td>"
        f"<td>{html.escape(r.device)} ({html.escape(r.backend)})</td>"
        f'<td class="{"" if r.status == "ok" else "failed"}">{r.status}</td><td>{r.duration_s:.1f} s</td>'
        f'<td class="headline">{headline_cell(r)}</td></tr>'
        for r in records
    )
    sections = []
    for dashboard, images in panels:
        cells = "".join(
            f'<div class="panel"><img alt="{html.escape(title)}" src="{data_uri(png)}"></div>' for title, png in images
        )
        sections.append(f'<h2>{html.escape(dashboard.title)}</h2><div class="grid">{cells}</div>')
    plots = "".join(
        f'<div class="panel artifact"><img alt="{html.escape(p.name)}" src="{data_uri(p)}">'
        f'<div class="meta">{html.escape(p.name)}</div></div>'
        for p in artifacts
    )
    configs = "".join(
        f"<h3>{html.escape(r.benchmark)} (rank {r.rank})</h3><pre>{html.escape(jsonio.dumps(r.config, indent=2))}</pre>"
        for r in records
        if r.rank == 0
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>fleetbench run {html.escape(run_id)}</title>
<style>{STYLE}</style></head><body>
<h1>fleetbench run {html.escape(run_id)}</h1>
<p class="meta">host {html.escape(first.host)} · git {html.escape(first.git_revision[:12])} ·
started {first.start.isoformat(timespec="seconds")} · panels from {html.escape(source)}</p>
<h2>Benchmarks</h2>
<table><tr><th>benchmark</th><th>rank</th><th>host</th><th>device</th><th>status</th><th>duration</th>
<th>headline</th></tr>{rows}</table>
{comparison}
{"".join(sections)}
<h2>Plots from the run</h2><div class="grid">{plots or '<p class="meta">none</p>'}</div>
<h2>Configuration</h2>{configs}
</body></html>
"""
