"""What a person sees while a job works: the job's `Progress` drawn on a rich console.

Jobs report to `fleetbench.job.Progress`; this is the one implementation that draws, used by the
CLI. A task of known length is `JOB description [bar] n/m elapsed`, one of unknown length a spinner
with its description; both are gone when done (the job's table follows them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.status import Status

from fleetbench.job import Task


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


class _BarTask:
    def __init__(self, bar: Progress, task_id: TaskID) -> None:
        self._bar, self._id = bar, task_id

    def update(self, description: str) -> None:
        self._bar.update(self._id, description=description)

    def advance(self, steps: int = 1) -> None:
        self._bar.advance(self._id, steps)


class _StatusTask:
    def __init__(self, status: Status, job: str) -> None:
        self._status, self._job = status, job

    def update(self, description: str) -> None:
        self._status.update(f"[bold]{self._job}[/] {description}")

    def advance(self, steps: int = 1) -> None:
        pass


class ConsoleProgress:
    """Progress drawn on `console` (a bar, or a spinner for work of unknown length)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def task(self, job: str, description: str = "", total: int | None = None) -> AbstractContextManager[Task]:
        """A transient bar of `total` items, or a spinner when `total` is None."""
        return self._bar(job, description, total) if total is not None else self._spinner(job, description)

    @contextmanager
    def _bar(self, job: str, description: str, total: int) -> Iterator[Task]:
        with item_progress(self.console, job) as bar:
            yield _BarTask(bar, bar.add_task(description, total=total))

    @contextmanager
    def _spinner(self, job: str, description: str) -> Iterator[Task]:
        with self.console.status(f"[bold]{job}[/] {description}".rstrip()) as status:
            yield _StatusTask(status, job)
