"""What `fleetbench images` shows: the images built, their sizes against their budgets."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from fleetbench.images.build import BuildResult


def results_table(results: list[BuildResult]) -> Table:
    """The closing table: each image's tag, size against its budget, build time and steps from cache."""
    table = Table(title="images built", caption="each also tagged :latest (:latest-cpu for the cpu variant)")
    for column in ("image", "size", "budget", "build", "from cache"):
        table.add_column(column, justify="left" if column == "image" else "right")
    for result in results:
        budget = f"{result.budget_mb} MB" if result.budget_mb else "-"
        over = result.budget_mb is not None and result.size_bytes / 1e6 > result.budget_mb
        table.add_row(
            result.tags[0],
            Text(f"{result.size_bytes / 1e6:.0f} MB", style="red" if over else ""),
            budget,
            f"{result.seconds:.1f} s",
            f"{result.cached_steps}/{result.steps} steps",
        )
    return table
