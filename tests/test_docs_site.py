"""The docs site: builds strictly with mkdocs and every page renders in headless Chromium; the README
stays an entrance that names every make target and every command."""

from __future__ import annotations

import functools
import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import launch_chromium
from fleetbench.cli.main import COMMANDS

REPO = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")
README_MAX_LINES = 300


def make_targets() -> list[str]:
    """Every target `make help` lists (a `## ` comment after the target's colon)."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return re.findall(r"^([a-zA-Z0-9_-]+):.*## ", text, flags=re.MULTILINE)


def test_readme_is_an_entrance_that_names_every_target_and_command() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "make demo" in text and "make test" in text
    missing_targets = [t for t in make_targets() if t != "help" and f"| `make {t}` |" not in text]
    assert missing_targets == [], f"README's target table lacks {missing_targets}"
    missing_commands = [c for c in COMMANDS if f"| `fleetbench {c}` |" not in text]
    assert missing_commands == [], f"README's command table lacks {missing_commands}"


def test_readme_links_point_at_files_that_exist() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        assert (REPO / target).exists(), f"README links to {target}, which is not in the tree"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it, strictly: a broken link or anchor fails the build."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, as `make docs-serve` or any static host serves it."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def nav_pages() -> list[str]:
    """Every page the site's navigation names, as its URL path."""
    import yaml

    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    pages: list[str] = []

    def walk(entries: object) -> None:
        if isinstance(entries, list):
            for entry in entries:
                walk(entry)
        elif isinstance(entries, dict):
            for value in entries.values():
                walk(value)
        elif isinstance(entries, str):
            page = entries.removesuffix(".md")
            # mkdocs serves index.md and README.md as their folder's index page
            pages.append(page.removesuffix("index").removesuffix("README"))
            if pages[-1] and not pages[-1].endswith("/"):
                pages[-1] += "/"

    walk(config["nav"])
    return pages


def test_every_docs_page_is_in_the_navigation() -> None:
    named = {p.removesuffix("/") or "index" for p in nav_pages()}
    named |= {f"{p}/README".lstrip("/") for p in named}  # results/ is results/README.md
    on_disk = {
        str(p.relative_to(REPO / "docs")).removesuffix(".md")
        for p in (REPO / "docs").rglob("*.md")
        # a run's report page (gpu-check-*, perf-<UTC time>) is listed by results/README.md, not the nav
        if not re.match(r"(gpu-check|perf)-\d{8}", p.name)
    }
    assert on_disk - named - {"index"} == set()


def test_every_page_renders_in_chromium(site: Path, served: str) -> None:
    from playwright.sync_api import sync_playwright

    pages = nav_pages()
    assert len(pages) >= 15
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            # A request the next navigation cancels (the search worker still loading) is not a failure.
            tab.on(
                "requestfailed",
                lambda r: None if "ERR_ABORTED" in (r.failure or "") else errors.append(f"request failed: {r.url}"),
            )
            for page in pages:
                errors.clear()
                response = tab.goto(f"{served}/{page}", wait_until="load")
                status = response.status if response else 0
                heading = tab.inner_text("article h1") if tab.query_selector("article h1") else ""
                words = len(tab.inner_text("article").split()) if tab.query_selector("article") else 0
                nav_links = len(tab.query_selector_all("nav.md-nav--primary a"))
                if status != 200 or not heading or words < 40 or nav_links < 10 or errors:
                    problems.append(
                        f"{page}: status {status}, h1 {heading!r}, {words} words, {nav_links} nav links, {errors}"
                    )
            tab.goto(f"{served}/api/", wait_until="load")
            api_text = tab.inner_text("article")
        finally:
            browser.close()
    assert problems == []
    # The API page is generated from the docstrings, not written by hand.
    assert "JobResult" in api_text and "HEADLINES" in api_text
