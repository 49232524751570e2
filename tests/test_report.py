"""The offline report: same panels as the dashboards, from Prometheus or from records; checked in Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import launch_chromium, run_cli
from fleetbench.dashboards.registry import DASHBOARDS
from fleetbench.report.build import build_report, dashboards_for, panel_file
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient

pytestmark = pytest.mark.services


def open_in_chromium(page: Path, screenshot: Path) -> tuple[list[str], list[int]]:
    """Load the page in headless Chromium; return console errors and the natural width of each image."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            tab.on("pageerror", lambda error: errors.append(str(error)))
            tab.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))
            tab.goto(page.as_uri(), wait_until="load")
            widths = tab.eval_on_selector_all("img", "images => images.map(image => image.naturalWidth)")
            tab.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return errors, widths


def panel_files(run_dir: Path) -> tuple[set[str], set[str], set[str]]:
    """The panel PNGs the report wrote, those it must write (every panel that is not GPU- or Slurm-only)
    and those it may write (those too: drawn when a CPU run has data for them, e.g. time shares)."""
    records = {r.benchmark for r in read_records(run_dir)}
    panels = [(d, p) for d in dashboards_for(records) for p in d.panels()]
    written = {p.name for p in (run_dir / "report" / "panels").glob("*.png")}
    must = {panel_file(d, p.title) for d, p in panels if not p.may_be_empty}
    may = {panel_file(d, p.title) for d, p in panels}
    return written, must, may


def test_report_from_prometheus_renders_every_panel(demo_run: Path, prometheus: PrometheusClient) -> None:
    page = build_report(demo_run, prometheus.base_url)
    text = page.read_text()
    assert page == demo_run / "report" / "index.html"
    assert "panels from Prometheus" in text
    assert "http://" not in text.replace("http://www.w3.org", ""), "the page must be self-contained"
    # Every panel; the GPU-only ones (DCGM, GPU traces) only where this machine has data for them.
    written, must, may = panel_files(demo_run)
    assert must <= written <= may
    assert text.count('<div class="panel"><img') == len(written)
    screenshot = demo_run / "report" / "screenshot.png"
    errors, widths = open_in_chromium(page, screenshot)
    assert errors == []
    assert widths and all(width > 0 for width in widths)
    assert screenshot.stat().st_size > 20_000  # a page of charts, not a blank one
    print(f"report screenshot: {screenshot}")


def test_report_falls_back_to_records_without_prometheus(demo_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / demo_run.name
    shutil.copytree(demo_run, copy, ignore=shutil.ignore_patterns("report"))
    result = run_cli("report", copy.name, "--results-dir", str(tmp_path), "--prometheus", "http://127.0.0.1:9")
    assert result.returncode == 0, result.stderr
    assert "is not up: rendering panels from the records" in result.stderr
    text = (copy / "report" / "index.html").read_text()
    assert "panels from result records" in text
    assert "Matmul achieved FLOP/s" in text
    # The Benchmarks table: headline figures and key facts, the whole summary folded away.
    assert "probe_achieved_flop_per_second" in text and "GFLOP/s" in text and "loss " in text
    assert text.count("<details><summary>full summary</summary><pre>") == len(read_records(copy))
    written, must, may = panel_files(copy)
    assert must <= written <= may


def test_report_of_a_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    result = run_cli("report", "nope", "--results-dir", str(tmp_path))
    assert result.returncode == 2
    assert "run 'nope' not found" in result.stderr
    assert len(DASHBOARDS) >= 1
