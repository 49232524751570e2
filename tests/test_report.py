"""The offline report: same panels as the dashboards, from Prometheus or from records; checked in Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.dashboards.registry import DASHBOARDS
from fleetbench.report.build import build_report, dashboards_for
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient

pytestmark = pytest.mark.services
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def open_in_chromium(page: Path, screenshot: Path) -> tuple[list[str], list[int]]:
    """Load the page in headless Chromium; return console errors and the natural width of each image."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
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


def test_report_from_prometheus_renders_every_panel(demo_run: Path, prometheus: PrometheusClient) -> None:
    page = build_report(demo_run, prometheus.base_url)
    text = page.read_text()
    assert page == demo_run / "report" / "index.html"
    assert "panels from Prometheus" in text
    assert "http://" not in text.replace("http://www.w3.org", ""), "the page must be self-contained"
    panels = sorted((demo_run / "report" / "panels").glob("*.png"))
    # Every panel but the GPU-only ones (DCGM, GPU traces), which have nothing to read on this machine.
    records = {r.benchmark for r in read_records(demo_run)}
    expected = [panel for dashboard in dashboards_for(records) for panel in dashboard.panels() if not panel.gpu_only]
    assert len(panels) == len(expected)
    assert text.count('<div class="panel"><img') == len(panels)
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
    records = {r.benchmark for r in read_records(copy)}
    expected = [panel for dashboard in dashboards_for(records) for panel in dashboard.panels() if not panel.gpu_only]
    assert len(list((copy / "report" / "panels").glob("*.png"))) == len(expected)


def test_report_of_a_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    result = run_cli("report", "nope", "--results-dir", str(tmp_path))
    assert result.returncode == 2
    assert "run 'nope' not found" in result.stderr
    assert len(DASHBOARDS) >= 1
