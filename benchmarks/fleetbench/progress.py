"""The progress bar every job shows while it works through a known number of items."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def item_progress(console: Console, job: str) -> Progress:
    """`JOB description [bar] n/m elapsed`, gone when done (the job's table follows it)."""
    return Progress(
        TextColumn(f"[bold]{job}[/] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
