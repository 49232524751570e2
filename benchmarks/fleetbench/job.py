"""The job contract, written once: every job takes its config and a run context and returns a result.

A job (probe, train, profile, trace, ncu, roofline, edge) is a callable `(config, context) ->
JobResult`. It never prints: what it measured comes back as records plus a typed view, which the
CLI renders; how far it is goes to `context.progress`; diagnostics go to `logging`. The run id and
run folder are chosen once, by whoever starts the run (the CLI, the demo, the train launcher for
its torchrun ranks), and handed down in the context, the way torchtitan hands down its dump folder.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from fleetbench.errors import UserError

if TYPE_CHECKING:
    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.results.record import ResultRecord

V_co = TypeVar("V_co", covariant=True)


class Task(Protocol):
    """One piece of work in progress: its current item and how many items are done."""

    def update(self, description: str, *, completed: int | None = None, total: int | None = None) -> None:
        """Say what the work is on now (and, where it becomes known, how many items are done of how many)."""

    def advance(self, steps: int = 1) -> None:
        """Count `steps` more items as done."""


class RowTask(Task, Protocol):
    """A task whose results are worth showing as they arrive (a training run's logged steps)."""

    def row(self, cells: Sequence[str], line: str) -> None:
        """One result: `cells` as a row of the task's table where one is drawn live, else `line` as it is."""


class Progress(Protocol):
    """Where a job reports how far it is; the CLI shows it, a library caller may ignore it."""

    def task(self, job: str, description: str = "", total: int | None = None) -> AbstractContextManager[Task]:
        """A task of `total` items (None: of unknown length), ended when its `with` block ends."""

    def table(
        self, job: str, title: str, columns: Sequence[str], total: int, completed: int = 0
    ) -> AbstractContextManager[RowTask]:
        """A task of `total` items, `completed` already done, whose rows fill a table titled `title`."""


class _SilentTask:
    def update(self, description: str, *, completed: int | None = None, total: int | None = None) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass

    def row(self, cells: Sequence[str], line: str) -> None:
        pass


class SilentProgress:
    """Progress nobody watches: a library call, a test, a rank that is not rank 0."""

    @contextmanager
    def _task(self) -> Iterator[_SilentTask]:
        yield _SilentTask()

    def task(self, job: str, description: str = "", total: int | None = None) -> AbstractContextManager[Task]:
        """A task that shows nothing."""
        return self._task()

    def table(
        self, job: str, title: str, columns: Sequence[str], total: int, completed: int = 0
    ) -> AbstractContextManager[RowTask]:
        """A table that shows nothing."""
        return self._task()


@dataclass(frozen=True)
class RunContext:
    """The run a job writes into, chosen once by whoever starts it: its id, its folder, its progress sink."""

    run_id: str
    results_dir: Path
    progress: Progress = field(default_factory=SilentProgress, compare=False)

    @classmethod
    def start(cls, config: FleetbenchConfig, progress: Progress | None = None) -> RunContext:
        """The context of a new run: the config's run id (--run-id), else a fresh one; its results root."""
        return cls.new(config.run.run_id, config.run.results_dir, progress)

    @classmethod
    def new(cls, run_id: str | None, results_dir: Path, progress: Progress | None = None) -> RunContext:
        """The context of the run named `run_id` (the one place a run id is made up where none is named)."""
        from fleetbench.runinfo import new_run_id

        return cls(run_id or new_run_id(), results_dir, progress or SilentProgress())

    @property
    def run_dir(self) -> Path:
        """results/<run_id>: where the run's records, metrics files and artifacts go."""
        return self.results_dir / self.run_id

    def folder(self, name: str) -> Path:
        """One folder of the run (profile/, ncu/, edge/ ...): a path, made by whoever writes there."""
        return self.run_dir / name

    def pinned(self, config: FleetbenchConfig) -> FleetbenchConfig:
        """`config` with this run's id and results root, for a process this run starts (torchrun, ncu's target,
        the demo's stages): that process continues this run, adding to its records."""
        run = config.run.model_copy(update={"run_id": self.run_id, "results_dir": self.results_dir, "continues": True})
        return config.model_copy(update={"run": run})


@dataclass(frozen=True)
class JobResult(Generic[V_co]):
    """What a job returns: the records it wrote (rank 0's, or the lowest rank's, first) and what to show."""

    records: list[ResultRecord]
    view: V_co

    @property
    def record(self) -> ResultRecord:
        """The run's main record: the first one."""
        return self.records[0]


class Job(Protocol[V_co]):
    """The one shape of every job: its config and a run context in, a result value out; it never prints."""

    def __call__(self, config: FleetbenchConfig, context: RunContext) -> JobResult[V_co]:
        """Run the job into `context`'s run folder."""


class JobFailed(UserError):
    """A job that ran to its end and found a wrong result: its record says failed, and what it measured
    is still shown (the CLI shows `result.view`, then the one error line, exit 1)."""

    def __init__(self, message: str, result: JobResult[Any], exit_code: int = 1) -> None:
        super().__init__(message, exit_code=exit_code)
        self.result = result
