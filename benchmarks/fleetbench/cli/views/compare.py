"""What `fleetbench compare` prints in a terminal: one rich table per benchmark, verdicts in colour."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from fleetbench.compare.formats import (
    COLUMNS,
    benchmark_notes,
    comparison_notes,
    heading,
    mismatch_text,
    row_cells,
)
from fleetbench.compare.gate import Regression
from fleetbench.compare.matching import BenchmarkComparison, Comparison

STYLES = {"better": "green", "worse": "red", "no significant change": "dim", "not judged": "yellow",
          "not enough independent samples to judge": "yellow", "unstable": "magenta"}  # fmt: skip


def benchmark_table(comparison: Comparison, bench: BenchmarkComparison) -> Table:
    """The rows of one benchmark, verdicts coloured by direction."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("metric", "labels", "verdict") else "right")
    for row in bench.rows:
        cells = row_cells(row)
        style = STYLES.get(cells["verdict"])
        verdict = f"[{style}]{cells['verdict']}[/]" if style else cells["verdict"]
        table.add_row(*[cells[c] for c in COLUMNS[:-1]], verdict)
    return table


def show_benchmark(console: Console, comparison: Comparison, bench: BenchmarkComparison) -> None:
    """Config differences and a mismatch above the benchmark's table."""
    console.rule(heading(comparison, bench))
    for diff in bench.config_diff:
        console.print(f"config {diff}", markup=False, highlight=False)
    if bench.mismatch:
        marked = "compared anyway (--allow-mismatch)" if bench.compared else "not compared"
        console.print(f"[yellow]mismatch ({marked}):[/] {mismatch_text(bench)}", highlight=False)
    for note in benchmark_notes(bench):
        console.print(note, style="yellow" if not note.startswith("geometric mean") else None, highlight=False,
                      markup=False)  # fmt: skip
    if bench.rows:
        console.print(benchmark_table(comparison, bench))


def show(console: Console, comparisons: list[Comparison], failures: list[Regression]) -> None:
    """Every benchmark of every comparison, then the regressions that fail the gate."""
    for comparison in comparisons:
        for line in comparison_notes(comparison):
            console.print(line, style="yellow" if line.startswith("warning") else "dim", markup=False, highlight=False)
        for bench in comparison.benchmarks:
            show_benchmark(console, comparison, bench)
        for side, names in (("base", comparison.only_base), ("new", comparison.only_new)):
            if names:
                console.print(f"only in {side}: {', '.join(names)}")
    for failure in failures:
        console.print(f"[red]regression:[/] {failure.describe()}", highlight=False)
