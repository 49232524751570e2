"""What a person sees while a job works: the job's `Progress` drawn on a rich console.

Jobs report to `fleetbench.job.Progress`; this is the one implementation that draws, used by the
CLI. A task of known length is `JOB description [bar] n/m elapsed`, one of unknown length a spinner
with its description; both are gone when done (the job's table follows them). A table task (the
trainer's steps) is a live table of its latest rows above a bar on a terminal, and one line per row
in a log or a pipe.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from fleetbench.job import RowTask, Task

SHOWN_ROWS = 12  # the live table keeps the latest rows; the history file has them all


def item_progress(console: Console, job: str) -> Progress:
    """`JOB description [bar] n/m elapsed`, gone when done (the job's table follows it)."""
    return Progress(
        TextColumn(f"[bold]{job}[/] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # live feedback only: a log or a pipe gets no stray lines
    )


class _BarTask:
    def __init__(self, bar: Progress, task_id: TaskID) -> None:
        self._bar, self._id = bar, task_id

    def update(self, description: str, *, completed: int | None = None, total: int | None = None) -> None:
        if total is not None:
            self._bar.update(self._id, total=total)
        self._bar.update(self._id, description=description, completed=completed)

    def advance(self, steps: int = 1) -> None:
        self._bar.advance(self._id, steps)


class ConsoleProgress:
    """Progress drawn on `console`: a bar for work of known length, a spinner for the rest."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def task(self, job: str, description: str = "", total: int | None = None) -> AbstractContextManager[Task]:
        """A transient bar of `total` items, or a spinner with the elapsed time when `total` is None."""
        return self._task(job, description, total)

    def table(
        self, job: str, title: str, columns: Sequence[str], total: int, completed: int = 0
    ) -> AbstractContextManager[RowTask]:
        """A live table of the rows over a bar on a terminal; elsewhere one line per row."""
        return LiveTable(self.console, (job, title, columns), total, completed)

    @contextmanager
    def _task(self, job: str, description: str, total: int | None) -> Iterator[Task]:
        if total is None:
            bar = Progress(
                SpinnerColumn(),
                TextColumn(f"[bold]{job}[/] {{task.description}}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
                disable=not self.console.is_terminal,
            )
        else:
            bar = item_progress(self.console, job)
        with bar:
            yield _BarTask(bar, bar.add_task(description, total=total))


class LiveTable:
    """A table task: the latest rows above a progress bar while it runs (terminal), else a line per row."""

    def __init__(self, console: Console, spec: tuple[str, str, Sequence[str]], total: int, completed: int) -> None:
        job, self.title, self.columns = spec
        self.console = console
        self.rows: list[Sequence[str]] = []
        self.bar = Progress(
            TextColumn(f"[bold]{job}[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.task_id = self.bar.add_task(job, total=total, completed=completed)
        self._live: Live | None = None

    def _view(self) -> Group:
        table = Table(title=self.title, title_justify="left")
        for column in self.columns:
            table.add_column(column, justify="right")
        for cells in self.rows[-SHOWN_ROWS:]:
            table.add_row(*cells)
        return Group(table, self.bar)

    def __enter__(self) -> LiveTable:
        if self.console.is_terminal:
            self._live = Live(self._view(), console=self.console, refresh_per_second=4)
            self._live.start()
        return self

    def update(self, description: str, *, completed: int | None = None, total: int | None = None) -> None:
        """The bar's label stays the job's name: nothing to do."""

    def advance(self, steps: int = 1) -> None:
        """Move the bar (drawn on a terminal only)."""
        if self._live is not None:
            self.bar.advance(self.task_id, steps)

    def row(self, cells: Sequence[str], line: str) -> None:
        """A new row of the live table, or `line` printed as it is."""
        self.rows.append(cells)
        if self._live is not None:
            self._live.update(self._view())
        else:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
