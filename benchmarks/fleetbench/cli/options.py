"""Options shared by every benchmark command: config file, overrides, run id, results dir, Pushgateway."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetbench.envvars import PUSHGATEWAY_ENV
from fleetbench.errors import UserError
from fleetbench.fsutil import check_writable_dir
from fleetbench.results.store import DEFAULT_RESULTS_DIR, RECORDS_FILE

if TYPE_CHECKING:  # the config schema loads when a command reads its config, not when it registers
    from rich.console import Console

    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.job import RunContext
    from fleetbench.results.record import ResultRecord


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """--config, --set, --run-id, --results-dir and --pushgateway, read back by `config_from_args`."""
    group = parser.add_argument_group("run and telemetry")
    group.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML or TOML config (sections: run, telemetry, ...)"
    )
    group.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key, e.g. --set probe.matmul_sizes=[256,512] (repeatable)",
    )
    group.add_argument("--run-id", help="name of the run folder and the run_id label (default: UTC time + random)")
    add_results_dir(group, default=None)  # unset: the config's run.results_dir, else results
    group.add_argument(
        "--pushgateway", metavar="URL", help=f"Pushgateway to push to (default: ${PUSHGATEWAY_ENV}; unset: no push)"
    )


def add_results_dir(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    what: str = "results root",
    default: Path | None = DEFAULT_RESULTS_DIR,
    kind: Callable[[str], Path] = Path,
) -> None:
    """--results-dir, declared here for every command that reads or writes runs: `what` it is to the
    command, its default (None: the config's run.results_dir decides), and how its text is checked."""
    shown = default if default is not None else DEFAULT_RESULTS_DIR
    parser.add_argument("--results-dir", type=kind, default=default, help=f"{what} (default: {shown})")


def also_after(parent: argparse.ArgumentParser, *subcommands: argparse.ArgumentParser) -> None:
    """Let `--results-dir` follow the subcommand too (`results list --results-dir X`), as users type it;
    given there, it wins over the parent's (whose default stands otherwise)."""
    action = next(a for a in parent._actions if "--results-dir" in a.option_strings)
    for command in subcommands:
        command.add_argument("--results-dir", type=action.type or str, default=argparse.SUPPRESS, help=action.help)


def run_context(config: FleetbenchConfig, console: Console, *, continues: bool = False) -> RunContext:
    """The run a command starts, chosen here once: --run-id (else a new id) under the results root, with
    the job's progress drawn on `console`. A named run that already holds records is refused (its
    records.jsonl would change under its earlier results) unless the command `continues` it (train
    --resume appends to the run it resumes)."""
    from fleetbench.job import RunContext
    from fleetbench.progress import ConsoleProgress

    # A results folder that is a file, a loop or not writable is refused before the job's work, not after it.
    check_writable_dir(config.run.results_dir, "results dir", "--results-dir")
    if not (continues or config.run.continues):
        refuse_existing_run(config.run.results_dir, config.run.run_id)
    return RunContext.start(config, ConsoleProgress(console))


def refuse_existing_run(results_dir: Path, run_id: str | None) -> None:
    """A UserError when run `run_id` already has a records.jsonl under `results_dir`."""
    if run_id is None:
        return
    records = results_dir / run_id / RECORDS_FILE
    try:
        exists = records.is_file()
    except OSError:
        return  # the run folder's own checks say what is wrong with the path
    if exists:
        raise UserError(
            f"--run-id {run_id}: run {run_id} already exists under {results_dir} ({records} is kept as it is); "
            "pass a new --run-id, or none for a fresh one"
        )


def print_record_path(console: Console, record: ResultRecord, results_dir: Path) -> None:
    """The line every job ends with: where its result record is."""
    console.print(f"result record: {results_dir / record.run_id / RECORDS_FILE}", markup=False, soft_wrap=True)


def config_from_args(args: argparse.Namespace) -> FleetbenchConfig:
    """The validated config of a command: file, --set overrides, the run options, then the command's
    shortcut flags (its `cli.flags` tables); an error blames the flag that gave the wrong value."""
    from fleetbench.cli.flags import flag_overrides
    from fleetbench.config.loader import load_config

    flags: dict[str, tuple[Any, str]] = {
        "run.run_id": (args.run_id, "--run-id"),
        "run.results_dir": (str(args.results_dir) if args.results_dir else None, "--results-dir"),
        "telemetry.pushgateway": (
            args.pushgateway or os.environ.get(PUSHGATEWAY_ENV) or None,
            "--pushgateway" if args.pushgateway else PUSHGATEWAY_ENV,
        ),
        **flag_overrides(args),
    }
    config: FleetbenchConfig = load_config(args.config, args.overrides, flags)
    return config


@contextmanager
def shown_even_if_failed(console: Console, show: Callable[[Console, Any], None]) -> Iterator[None]:
    """Around a job: if it ran to its end and found wrong results (JobFailed), show what it measured
    with `show` before its one error line goes out."""
    from fleetbench.job import JobFailed

    try:
        yield
    except JobFailed as failed:
        show(console, failed.result.view)
        raise
