"""The "headline" cell of the report's Benchmarks table: a record's key figures, its summary behind a fold.

A record's headline figures are what `compare` tests; the cell shows the most telling few of them in
the catalogue's HEADLINES order (values as `compare` prints them), one benchmark-specific line from
the summary (train: loss first -> last, tokens/s, MFU; profile: the top op and its class; edge:
the slowest p50 and the best GEMM/peak), and the whole summary as JSON in a collapsed <details>.
Records written before headlines existed show a few scalar summary keys instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

from fleetbench import jsonio
from fleetbench.catalogue import CATALOGUE, HEADLINES
from fleetbench.compare.formats import human, short_metric
from fleetbench.results.record import HeadlineFigure, ResultRecord

# At most this many figures per record, and at most PER_METRIC of one metric before every other
# metric of the record has had its turn: an edge run has a p50 and a rate for each of dozens of
# kernels, which would otherwise crowd out its GEMM/peak ratios and model latencies.
CAP = 6
PER_METRIC = 3

# Metrics shown before the rest of HEADLINES order: an edge run's GEMM/peak ratios say the most in
# the least room, then the model latencies, then the (slowest) kernels' p50.
SHOWN_FIRST: dict[str, tuple[str, ...]] = {
    "edge": (
        "fleetbench_edge_gemm_peak_ratio",
        "fleetbench_edge_model_latency_percentile_seconds",
        "fleetbench_edge_kernel_latency_percentile_seconds",
    ),
}

# Labels in the order they read best ("gemm_vec4 float32 256 p50"); `timing` is the same for every
# kernel of an edge run and says nothing per figure.
LABEL_ORDER = ("probe", "kernel", "op", "runtime", "model", "gpu", "category", "dtype", "size", "percentile")
QUIET_LABELS = frozenset({"timing"})

FALLBACK_KEYS = 6


def metric_order(benchmark: str) -> list[str]:
    """The benchmark's headline metrics in the order the cell shows them."""
    first = SHOWN_FIRST.get(benchmark, ())
    return [*first, *(m for m in HEADLINES.get(benchmark, ()) if m not in first)]


def _group_key(order: list[str]) -> Callable[[str], int]:
    return lambda metric: order.index(metric) if metric in order else len(order)


def _ranked(figures: list[HeadlineFigure]) -> list[HeadlineFigure]:
    """One metric's figures, the largest first unless higher is better (the slowest kernel, the biggest
    time share, the op that took longest); higher-is-better figures keep the run's order (its sizes)."""
    if figures and figures[0].better == "higher":
        return figures
    return sorted(figures, key=lambda f: -f.value if math.isfinite(f.value) else math.inf)


def pick_figures(benchmark: str, headline: list[HeadlineFigure], cap: int = CAP) -> tuple[list[HeadlineFigure], int]:
    """The figures the cell shows, grouped by metric in display order, and how many it leaves out."""
    groups: dict[str, list[HeadlineFigure]] = {}
    for figure in headline:
        groups.setdefault(figure.metric, []).append(figure)
    metrics = sorted(groups, key=_group_key(metric_order(benchmark)))
    ranked = {m: _ranked(groups[m]) for m in metrics}
    chosen = [f for m in metrics for f in ranked[m][:PER_METRIC]][:cap]
    chosen += [f for m in metrics for f in ranked[m][PER_METRIC:]][: cap - len(chosen)]
    position = {id(f): (metrics.index(f.metric), ranked[f.metric].index(f)) for f in chosen}
    chosen.sort(key=lambda f: position[id(f)])
    return chosen, len(headline) - len(chosen)


def labels_shown(labels: dict[str, str]) -> str:
    """A figure's labels as values in reading order, unknown labels as k=v after them."""
    known = [labels[k] for k in LABEL_ORDER if k in labels]
    other = [f"{k}={v}" for k, v in sorted(labels.items()) if k not in LABEL_ORDER and k not in QUIET_LABELS]
    return " ".join(known + other)


def figure_item(figure: HeadlineFigure) -> str:
    """One figure as a list item: metric, labels, value (and how many samples it summarises)."""
    samples = f' <span class="meta">n={len(figure.samples)}</span>' if figure.samples else ""
    return (
        f'<li><span class="metric">{escape(short_metric(figure.metric))}</span> '
        f'<span class="labels">{escape(labels_shown(figure.labels))}</span> '
        f"<b>{escape(human(figure.value, figure.unit))}</b>{samples}</li>"
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _train_line(summary: dict[str, Any]) -> list[str]:
    first, last = _number(summary.get("first_loss")), _number(summary.get("final_loss"))
    tokens, mfu = _number(summary.get("tokens_per_s")), _number(summary.get("mfu"))
    parts = []
    if first is not None and last is not None:
        parts.append(f"loss {first:.4g} → {last:.4g}")
    if tokens is not None:
        parts.append(f"{tokens:,.0f} tokens/s")
    if mfu is not None:
        parts.append(f"MFU {human(mfu, 'ratio')}")
    return parts


def _profile_line(summary: dict[str, Any]) -> list[str]:
    ops = summary.get("top_ops")
    if not isinstance(ops, list) or not ops or not isinstance(ops[0], dict):
        return []
    top = ops[0]
    name = top.get("short") or top.get("label") or top.get("name") or "?"
    seconds = _number(top.get("self_time_s"))
    timed = f", {human(seconds, 'seconds')} self" if seconds is not None else ""
    return [f"top op {name} ({top.get('class', 'unclassified')}{timed})"]


def _edge_line(summary: dict[str, Any]) -> list[str]:
    kernels = [k for k in summary.get("kernels") or [] if isinstance(k, dict) and _number(k.get("p50_s"))]
    parts = []
    if kernels:
        slowest = max(kernels, key=lambda k: float(k["p50_s"]))
        parts.append(
            f"p50 latency {human(float(slowest['p50_s']), 'seconds')} (slowest of {len(kernels)}: "
            f"{slowest.get('kernel')} {slowest.get('dtype')} {slowest.get('size')})"
        )
    ratios = {k: v for k, v in (summary.get("gemm_peak_ratio") or {}).items() if _number(v) is not None}
    if ratios:
        best = max(ratios, key=lambda k: float(ratios[k]))
        parts.append(f"GEMM/peak {human(float(ratios[best]), 'ratio')} (best: {best})")
    return parts


def _edge_llm_line(summary: dict[str, Any]) -> list[str]:
    """Per runtime, dtype and load mode: pp and tg tokens/s (p50), load time and whether it agrees."""
    parts = []
    for row in summary.get("rows") or []:
        if not isinstance(row, dict) or not row.get("ok"):
            continue
        mode = "mmap" if row.get("mmap") else "read-in"
        backend = row.get("backend", "cpu")  # llama.cpp's build; records before it ran on the CPU only
        runtime = row["runtime"] if backend == "cpu" else f"{row['runtime']}-{backend} on {row.get('device') or '?'}"
        parts.append(
            f"{runtime} {row['dtype']} {mode}: pp {float(row['pp']['p50']):.0f} "
            f"tg {float(row['tg']['p50']) if row.get('tg') else float('nan'):.1f} "
            f"tok/s, load {human(float(row['load_s']), 'seconds')}, {'agrees' if row.get('agrees') else 'WRONG'}"
        )
    return parts


def _probe_line(summary: dict[str, Any]) -> list[str]:
    matmul, copy = (
        _number(summary.get("best_matmul_flop_per_second")),
        _number(summary.get("best_copy_bytes_per_second")),
    )
    parts = []
    if matmul:
        parts.append(f"best matmul {human(matmul, 'flop_per_second')}")
    if copy:
        parts.append(f"best copy {human(copy, 'bytes_per_second')}")
    return parts


# Per benchmark: the summary's key facts as short phrases, above the figures.
KEY_LINES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "train": _train_line,
    "profile": _profile_line,
    "edge": _edge_line,
    "edge-llm": _edge_llm_line,
    "probe": _probe_line,
}


def key_line(record: ResultRecord) -> str:
    """The benchmark's key facts from the summary, ` · `-separated ("" when it has none)."""
    describe = KEY_LINES.get(record.benchmark)
    try:
        parts = describe(record.summary) if describe else []
    except (TypeError, ValueError, KeyError, AttributeError):
        # A summary of another shape (an older or newer writer): the figures and the JSON still show.
        parts = []
    return " · ".join(parts)


def fallback_items(summary: dict[str, Any], keys: int = FALLBACK_KEYS) -> list[str]:
    """A few scalar summary values, for records without headline figures."""
    items = []
    for key, value in summary.items():
        if isinstance(value, dict | list) or value is None:
            continue
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        items.append(f'<li><span class="metric">{escape(str(key))}</span> <b>{escape(shown)}</b></li>')
        if len(items) == keys:
            break
    return items


def headline_cell(record: ResultRecord) -> str:
    """The cell's HTML: error, key line, figures (+N more), and the full summary collapsed."""
    parts = []
    if record.error:
        parts.append(f'<div class="failed">{escape(record.error)}</div>')
    line = key_line(record)
    if line:
        parts.append(f'<div class="key">{escape(line)}</div>')
    # Only catalogued metrics: the catalogue gives the unit a value is printed in.
    known = [f for f in record.headline if f.metric in CATALOGUE]
    if known:
        figures, more = pick_figures(record.benchmark, known)
        items = [figure_item(f) for f in figures]
        if more:
            items.append(f'<li class="meta">+{more} more</li>')
    else:
        items = fallback_items(record.summary)
    if items:
        parts.append(f'<ul class="figures">{"".join(items)}</ul>')
    full = jsonio.dumps(record.summary, indent=2, default=str)
    parts.append(f"<details><summary>full summary</summary><pre>{escape(full)}</pre></details>")
    return "".join(parts)
