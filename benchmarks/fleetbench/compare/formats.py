"""The comparison as data: rows for tables, and markdown (for a pull request), CSV and JSON.

Every output is built from `table_rows`, so the terminal, the PR comment, the CSV and the JSON say
the same thing. JSON is strict (no NaN), values are in the catalogue's base units.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from fleetbench import jsonio
from fleetbench.catalogue import spec
from fleetbench.compare.gate import Regression
from fleetbench.compare.matching import BenchmarkComparison, Comparison, Row
from fleetbench.results.fingerprint import describe

COLUMNS = ("metric", "labels", "base", "new", "change", "CI of change", "min change", "p adj.", "verdict")


def human(value: float | None, unit: str) -> str:
    """A value in the unit people read: ms, GiB, GFLOP/s, GB/s, %."""
    if value is None or not math.isfinite(value):
        return "-"
    if unit == "seconds":
        return f"{value * 1e3:.3f} ms" if abs(value) < 10 else f"{value:.2f} s"
    if unit == "bytes":
        return f"{value / 2**20:.1f} MiB" if abs(value) < 2**30 else f"{value / 2**30:.2f} GiB"
    if unit == "flop_per_second":
        return f"{value / 1e9:.2f} GFLOP/s"
    if unit == "bytes_per_second":
        return f"{value / 1e9:.2f} GB/s"
    if unit == "ratio":
        return f"{value:.1%}"
    return f"{value:.4g}"


def short_metric(name: str) -> str:
    """The metric without the suite's prefix, as tables show it."""
    return name.removeprefix("fleetbench_")


def labels_text(labels: dict[str, str]) -> str:
    """Labels as `k=v` pairs, sorted."""
    return " ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def row_cells(row: Row) -> dict[str, str]:
    """The printed cells of one row; `p adj.` is the p-value after the correction across the comparison."""
    unit = spec(row.metric).unit
    change = row.change
    cells = {
        "metric": short_metric(row.metric),
        "labels": labels_text(row.labels),
        "base": human(row.base.value if row.base else None, unit),
        "new": human(row.new.value if row.new else None, unit),
        "change": "-",
        "CI of change": "-",
        "min change": "-",
        "p adj.": "-",
        "verdict": row.verdict,
    }
    if change is not None:
        cells["change"] = f"{change.change_pct:+.1f}%" if math.isfinite(change.ratio) else "-"
        interval = change.ci_pct
        cells["CI of change"] = f"[{interval[0]:+.1f}%, {interval[1]:+.1f}%]" if interval else "single value"
        cells["min change"] = f"{change.min_change_pct:.1f}%"
        p_value = change.p_adjusted if change.p_adjusted is not None else change.p_value
        cells["p adj."] = f"{p_value:.3g}" if p_value is not None else "-"
    return cells


def geomean_text(bench: BenchmarkComparison) -> str | None:
    """pyperf's summary line: `geometric mean: 1.04x better (3 figures)`."""
    if bench.geomean is None:
        return None
    speed, count = bench.geomean
    if abs(speed - 1.0) < 5e-4:
        word = "no change"
    else:
        word = f"{speed:.3f}x better" if speed > 1 else f"{1 / speed:.3f}x worse"
    return f"geometric mean: {word} ({count} figure{'s' if count != 1 else ''}, above 1 is better)"


def comparison_notes(comparison: Comparison) -> list[str]:
    """The lines above a comparison's tables: the test used, the noise, both machines and how they differ."""
    lines = [f"test: {comparison.scope}; {comparison.noise_note}"]
    base, new = comparison.base.machine, comparison.new.machine
    if base or new:
        lines.append(f"machine base: {describe(base) if base else 'not recorded'}")
        lines.append(f"machine new:  {describe(new) if new else 'not recorded'}")
    if comparison.machine_diff:
        diff = "; ".join(f"{key}: {a} -> {b}" for key, (a, b) in comparison.machine_diff.items())
        lines.append(f"warning: the machines differ ({diff}); the change may be the machine's, not the code's")
    return lines


def benchmark_notes(bench: BenchmarkComparison) -> list[str]:
    """The benchmark's notes and its geometric-mean summary."""
    summary = geomean_text(bench)
    whys = list(dict.fromkeys(row.change.why for row in bench.rows if row.change is not None and row.change.why))
    return [*bench.notes, *[f"no verdict: {why}" for why in whys], *([summary] if summary else [])]


def heading(comparison: Comparison, bench: BenchmarkComparison) -> str:
    """`benchmark: base -> new` with the context and what does not match."""
    text = f"{bench.benchmark}: {comparison.base.label} -> {comparison.new.label}"
    ctx = bench.new_context
    text += f" ({ctx['device']}, {ctx['backend']}, world size {ctx['world_size']})"
    return text


def mismatch_text(bench: BenchmarkComparison) -> str:
    """The differing context keys, `key: base -> new`."""
    return "; ".join(f"{key}: {a} -> {b}" for key, (a, b) in bench.mismatch.items())


def to_markdown(comparisons: list[Comparison], failures: list[Regression]) -> str:
    """One markdown table per benchmark, ready for a pull-request comment."""
    out: list[str] = []
    for comparison in comparisons:
        out += [f"{line}  " for line in comparison_notes(comparison)]
        out.append("")
        for bench in comparison.benchmarks:
            out.append(f"### {heading(comparison, bench)}")
            if bench.mismatch:
                marked = "compared anyway (--allow-mismatch)" if bench.compared else "not compared"
                out.append(f"**mismatch** ({marked}): {mismatch_text(bench)}")
            if bench.config_diff:
                out.append("config: " + "; ".join(f"`{d}`" for d in bench.config_diff))
            out += [f"note: {note}" for note in benchmark_notes(bench)]
            if bench.rows:
                out.append("| " + " | ".join(COLUMNS) + " |")
                out.append("|" + "|".join("---" for _ in COLUMNS) + "|")
                for row in bench.rows:
                    cells = row_cells(row)
                    out.append("| " + " | ".join(cells[c].replace("|", "\\|") for c in COLUMNS) + " |")
            out.append("")
        for side, names in (("base", comparison.only_base), ("new", comparison.only_new)):
            if names:
                out.append(f"only in {side}: {', '.join(names)}")
    if failures:
        out.append("**regressions:** " + "; ".join(f.describe() for f in failures))
    return "\n".join(out).rstrip() + "\n"


def to_records(comparisons: list[Comparison]) -> list[dict[str, Any]]:
    """One flat dict per row, in base units, for CSV and JSON."""
    rows = []
    for comparison in comparisons:
        for bench in comparison.benchmarks:
            for row in bench.rows:
                change = row.change
                rows.append(
                    {
                        "base_run": comparison.base.run_id,
                        "new_run": comparison.new.run_id,
                        "benchmark": bench.benchmark,
                        "metric": row.metric,
                        "labels": labels_text(row.labels),
                        "unit": spec(row.metric).unit,
                        "better": spec(row.metric).better,
                        "base": row.base.value if row.base else None,
                        "new": row.new.value if row.new else None,
                        "base_samples": len(row.base.samples) if row.base else 0,
                        "new_samples": len(row.new.samples) if row.new else 0,
                        "change_pct": change.change_pct if change and math.isfinite(change.ratio) else None,
                        "ci_low_pct": change.ci_pct[0] if change and change.ci_pct else None,
                        "ci_high_pct": change.ci_pct[1] if change and change.ci_pct else None,
                        "p_value": change.p_value if change else None,
                        "p_adjusted": change.p_adjusted if change else None,
                        "min_change_pct": change.min_change_pct if change else None,
                        "factor_pct": change.factor_pct if change and math.isfinite(change.factor_pct) else None,
                        "method": row.note,
                        "verdict": row.verdict,
                        "why": change.why if change and change.why else None,
                        "excluded": row.excluded,
                        "mismatch": mismatch_text(bench) or None,
                    }
                )
    return rows


def to_csv(comparisons: list[Comparison]) -> str:
    """The rows as CSV with a header line."""
    rows = to_records(comparisons)
    buffer = io.StringIO()
    fields = list(rows[0]) if rows else ["benchmark", "metric"]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def to_json(comparisons: list[Comparison], failures: list[Regression]) -> str:
    """Strict JSON: the runs, each benchmark's context, mismatches and config differences, the rows."""
    payload = {
        "comparisons": [
            {
                "base": c.base.run_id,
                "new": c.new.run_id,
                "benchmarks": [
                    {
                        "benchmark": b.benchmark,
                        "base_context": b.base_context,
                        "new_context": b.new_context,
                        "mismatch": {k: list(v) for k, v in b.mismatch.items()},
                        "compared": b.compared,
                        "config_diff": b.config_diff,
                        "notes": b.notes,
                        "geometric_mean_speed": b.geomean[0] if b.geomean else None,
                    }
                    for b in c.benchmarks
                ],
                "only_in_base": c.only_base,
                "only_in_new": c.only_new,
                "failures": [{"benchmark": f.benchmark, "reason": f.reason} for f in c.failures],
                "scope": c.scope,
                "noise": c.noise_note,
                "base_machine": c.base.machine,
                "new_machine": c.new.machine,
                "machine_differences": {k: list(v) for k, v in c.machine_diff.items()},
                "processes": [c.base.processes, c.new.processes],
            }
            for c in comparisons
        ],
        "rows": to_records(comparisons),
        "regressions": [f.describe() for f in failures],
    }
    return jsonio.dumps(payload, indent=1) + "\n"
