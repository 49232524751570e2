"""`report --compare BASE`: the comparison section of the page, built on `fleetbench compare`.

The tables are `compare`'s own rows (`formats.row_cells`: same columns, same verdicts), one HTML
table per benchmark under the same heading, with its mismatch and config differences. Below them,
plots of both runs on the same axes, from the files the run folders hold: train loss and tokens/s
per step, and each edge kernel's latency distributions. A baseline keeps records only, so against a
baseline the page says which plots it cannot draw.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

from fleetbench.compare.formats import COLUMNS, benchmark_notes, comparison_notes, heading, mismatch_text, row_cells
from fleetbench.compare.gate import introduced_failures
from fleetbench.compare.matching import (
    BenchmarkComparison,
    Comparison,
    RunRef,
    compare_runs,
    find_calibration,
    load_run,
)
from fleetbench.compare.statistics import TestSettings
from fleetbench.compare.validity import check_records
from fleetbench.report.overlays import EDGE_RESULTS, edge_boxes, read_edge_latencies, train_overlay
from fleetbench.report.page import data_uri
from fleetbench.results.store import RECORDS_FILE, read_records
from fleetbench.train.history import HISTORY_FILE, read_history

COMPARE_DIR = "compare"
VERDICT_CLASS = {"better": "better", "worse": "worse"}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareTo:
    """What the report compares its run with: the comparison of the records, and the base's folder
    (None for a baseline, which keeps records but no history or latency files)."""

    comparison: Comparison
    base_dir: Path | None


@dataclass(frozen=True)
class Plots:
    """The overlay images drawn, and a line for each plot that could not be drawn and why."""

    images: list[tuple[str, Path]]
    notes: list[str]


def base_folder(ref: str, results_root: Path) -> Path | None:
    """The folder of the run BASE names, in `load_run`'s order (folder, then run id); None for a baseline."""
    path = Path(ref)
    if path.is_dir():
        return path
    candidate = results_root / ref
    return candidate if (candidate / RECORDS_FILE).is_file() else None


def prepare(
    ref: str,
    run_dir: Path,
    results_root: Path,
    settings: TestSettings,
    allow_mismatch: bool = False,
    noise_factor: float = 2.0,
) -> CompareTo:
    """Load BASE and compare the run with it as `fleetbench compare` does (same noise, same verdicts); a bad
    BASE, a figure that is no measurement, or runs with no benchmark in common, is a UserError.

    Called before anything is rendered, so a bad BASE leaves no report behind.
    """
    base = load_run(ref, results_root)
    new = RunRef(run_dir.name, run_dir.name, read_records(run_dir))
    check_records(new.label, new.records)
    calibration = find_calibration(base, new, results_root)
    comparison = compare_runs(base, new, settings, allow_mismatch, calibration, noise_factor)
    return CompareTo(comparison, base_folder(ref, results_root))


def benchmark_table(bench: BenchmarkComparison) -> str:
    """The benchmark's rows as `compare` prints them, the verdict cell classed by direction."""
    head = "".join(f"<th>{escape(column)}</th>" for column in COLUMNS)
    rows = []
    for row in bench.rows:
        cells = row_cells(row)
        tds = "".join(f"<td>{escape(cells[column])}</td>" for column in COLUMNS[:-1])
        verdict = cells["verdict"]
        css = VERDICT_CLASS.get(verdict, "")
        rows.append(f'<tr>{tds}<td class="verdict {css}">{escape(verdict)}</td></tr>')
    return f'<table class="compare"><tr>{head}</tr>{"".join(rows)}</table>'


def benchmark_block(comparison: Comparison, bench: BenchmarkComparison) -> str:
    """Heading, config differences, the mismatch and notes, then the table (none when not compared)."""
    parts = [f"<h3>{escape(heading(comparison, bench))}</h3>"]
    parts += [f'<p class="config">config {escape(diff)}</p>' for diff in bench.config_diff]
    if bench.mismatch:
        marked = "compared anyway (--allow-mismatch)" if bench.compared else "not compared"
        parts.append(f'<p class="mismatch">mismatch ({marked}): {escape(mismatch_text(bench))}</p>')
    parts += [f'<p class="mismatch note">{escape(note)}</p>' for note in benchmark_notes(bench)]
    if bench.rows:
        parts.append(benchmark_table(bench))
    return "".join(parts)


def _names(comparison: Comparison) -> tuple[str, str]:
    return comparison.base.run_id, comparison.new.run_id


def _train_plot(compare_to: CompareTo, run_dir: Path, out_dir: Path, plots: Plots) -> None:
    base_label = compare_to.comparison.base.label
    if compare_to.base_dir is None:
        plots.notes.append(f"train curves of {base_label}: not available (a baseline keeps records, no step history)")
        return
    base, new = read_history(compare_to.base_dir), read_history(run_dir)
    missing = [label for label, rows in ((base_label, base), (run_dir.name, new)) if not rows]
    if missing:
        plots.notes.append(f"train curves: no {HISTORY_FILE} in {', '.join(missing)}")
        return
    path = train_overlay(base, new, _names(compare_to.comparison), out_dir / "train_overlay.png")
    plots.images.append(("train: loss and tokens/s per step", path))


def _edge_plots(compare_to: CompareTo, run_dir: Path, out_dir: Path, plots: Plots) -> None:
    base_label = compare_to.comparison.base.label
    if compare_to.base_dir is None:
        plots.notes.append(f"edge latency distributions of {base_label}: not available (a baseline keeps records)")
        return
    base, new = read_edge_latencies(compare_to.base_dir), read_edge_latencies(run_dir)
    missing = [label for label, found in ((base_label, base), (run_dir.name, new)) if not found]
    if missing:
        plots.notes.append(f"edge latency distributions: no timed kernels in {EDGE_RESULTS} of {', '.join(missing)}")
        return
    kernels: dict[str, list[tuple[str, list[float], list[float]]]] = {}
    for key, latencies in new.items():  # in the new run's order
        if key in base:
            kernels.setdefault(key[0], []).append((f"{key[1]} {key[2]}", base[key], latencies))
    for kernel, variants in kernels.items():
        path = edge_boxes(kernel, variants, _names(compare_to.comparison), out_dir / f"edge_{_slug(kernel)}.png")
        plots.images.append((f"edge {kernel}: latency, base vs new", path))
    unmatched = sorted({k[0] for k in new.keys() ^ base.keys()} - kernels.keys())
    if unmatched:
        plots.notes.append(f"edge kernels timed in one run only (no boxes): {', '.join(unmatched)}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "kernel"


def draw_overlays(compare_to: CompareTo, run_dir: Path, out_dir: Path) -> Plots:
    """The overlay PNGs of the benchmarks both runs have, written fresh into `out_dir`."""
    for old in out_dir.glob("*.png"):
        old.unlink()  # a plot of an earlier --compare must not pass for this one's
    plots = Plots([], [])
    common = {bench.benchmark for bench in compare_to.comparison.benchmarks}
    if common & {"train", "edge"}:
        out_dir.mkdir(parents=True, exist_ok=True)
    if "train" in common:
        _train_plot(compare_to, run_dir, out_dir, plots)
    if "edge" in common:
        _edge_plots(compare_to, run_dir, out_dir, plots)
    log.debug("compare overlays: %d drawn, %d not", len(plots.images), len(plots.notes))
    return plots


def section(compare_to: CompareTo, plots: Plots) -> str:
    """The page's "Comparison with BASE" section: tables, then the overlays inlined as data URIs."""
    comparison = compare_to.comparison
    parts = [
        f'<h2 id="comparison">Comparison with {escape(comparison.base.label)}</h2>',
        f'<p class="meta">base {escape(comparison.base.label)} → new {escape(comparison.new.label)}: '
        "the latest successful rank-0 record of each benchmark; the same table as fleetbench compare</p>",
    ]
    parts += [f'<p class="meta">{escape(line)}</p>' for line in comparison_notes(comparison)]
    parts += [
        f'<p class="mismatch regression">regression: {escape(failure.describe())}</p>'
        for failure in introduced_failures(comparison)
    ]
    parts += [benchmark_block(comparison, bench) for bench in comparison.benchmarks]
    for side, names in (("base", comparison.only_base), ("new", comparison.only_new)):
        if names:
            parts.append(f'<p class="meta">only in {side}: {escape(", ".join(names))}</p>')
    if plots.images or plots.notes:
        parts.append("<h3>Base and new on the same axes</h3>")
        parts += [f'<p class="meta">{escape(note)}</p>' for note in plots.notes]
        cells = "".join(
            f'<div class="panel overlay"><img alt="{escape(title)}" src="{data_uri(path)}"></div>'
            for title, path in plots.images
        )
        parts.append(f'<div class="grid">{cells}</div>')
    return "\n".join(parts)
