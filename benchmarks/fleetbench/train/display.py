"""Rank 0's console: a progress bar with a live per-step table on a terminal, one line per step elsewhere."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from fleetbench.train.history import StepRow

SHOWN_ROWS = 12
COLUMNS = ("step", "loss", "grad norm", "step ms", "data ms", "tok/s", "tok/s/dev", "TFLOP/s/dev", "MFU", "peak mem")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def cells(row: StepRow) -> tuple[str, ...]:
    """One row of the live table, in COLUMNS order."""
    return (
        str(row.step),
        f"{row.loss:.4f}",
        f"{row.grad_norm:.3f}",
        f"{row.step_s * 1e3:.1f}",
        f"{row.data_s * 1e3:.2f}",
        f"{row.tokens_per_s:,.0f}",
        f"{row.device_tokens_per_s:,.0f}",
        f"{row.tflops_per_device:.3f}",
        "-" if row.mfu is None else f"{row.mfu:.1%}",
        _gib(row.peak_memory_bytes),
    )


def line(row: StepRow, total: int) -> str:
    """One logged step as a line, for a console that is not a terminal (logs, CI)."""
    mfu = "-" if row.mfu is None else f"{row.mfu:.1%}"
    return (
        f"Step {row.step}/{total} | Loss {row.loss:.4f} | grad {row.grad_norm:.3f} | "
        f"{row.step_s * 1e3:.1f} ms | {row.tokens_per_s:,.0f} tok/s ({row.device_tokens_per_s:,.0f}/dev) | "
        f"MFU {mfu} | Peak mem/rank {_gib(row.peak_memory_bytes)}"
    )


class StepDisplay:
    """Rank 0's view of training; on other ranks (`enabled` false) it shows nothing."""

    def __init__(self, console: Console, total_steps: int, start_step: int, enabled: bool, title: str) -> None:
        self.console = console
        self.total = total_steps
        self.enabled = enabled
        self.title = title
        self.rows: list[StepRow] = []
        self.live_mode = enabled and console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]train[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.progress.add_task("steps", total=total_steps, completed=start_step)
        self._live: Live | None = None

    def _table(self) -> Table:
        table = Table(title=self.title, title_justify="left")
        for column in COLUMNS:
            table.add_column(column, justify="right")
        for row in self.rows[-SHOWN_ROWS:]:
            table.add_row(*cells(row))
        return table

    def __enter__(self) -> StepDisplay:
        if self.live_mode:
            self._live = Live(Group(self._table(), self.progress), console=self.console, refresh_per_second=4)
            self._live.start()
        return self

    def step(self, steps_done: int) -> None:
        """Advance the progress bar (live mode only)."""
        if self.live_mode:
            self.progress.update(self.task, completed=steps_done)

    def log(self, row: StepRow) -> None:
        """Show a logged step: a new table row on a terminal, else a line."""
        if not self.enabled:
            return
        self.rows.append(row)
        if self._live is not None:
            self._live.update(Group(self._table(), self.progress))
        else:
            self.console.print(line(row, self.total), markup=False, highlight=False, soft_wrap=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
