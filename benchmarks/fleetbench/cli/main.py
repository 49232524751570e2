"""The `fleetbench` command: one CLI, one module per command group; every Make target calls it.

Every command ends here (the exit statuses: docs/exit-status.md). Bad input (a UserError) is one
`fleetbench: error: ...` line and exit 2; Ctrl-C or SIGTERM is one line and exit 130 (SIGTERM is raised
as an interrupt, so cleanup runs as for Ctrl-C); any other exception is a bug: one line that names it and where its
traceback was saved, and exit 70 (EX_SOFTWARE), which no command uses for a finding, so a script
can tell a crash from a failed gate (1) or bad input (2). `--debug` prints the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from fleetbench.cli.parser import OneLineParser
from fleetbench.envvars import warn_unknown_variables
from fleetbench.errors import Terminated, UserError
from fleetbench.logs import (
    DEBUG_ENV,
    DEFAULT_LEVEL,
    LEVELS,
    LOG_LEVEL_ENV,
    checked_level_from_env,
    debug_from_env,
    level_from_env,
    setup_logging,
)

if TYPE_CHECKING:
    from types import ModuleType

# Each command and the module of fleetbench.cli that registers it, in `fleetbench --help` order. A run
# imports only its command's module (`fleetbench ncu summarize` loads no trainer, no image builder);
# help and unknown commands load them all.
COMMANDS: dict[str, str] = {
    "demo": "demo_cmd",
    "train": "train_cmd",
    "probe": "probe_cmd",
    "collectives": "collectives_cmd",
    "profile": "profile_cmd",
    "ncu": "profile_cmd",
    "roofline": "profile_cmd",
    "trace": "trace_cmd",
    "edge": "edge_cmd",
    "report": "report_cmd",
    "metrics": "metrics_cmd",
    "results": "results_cmd",
    "compare": "compare_cmd",
    "baseline": "compare_cmd",
    "noise": "noise_cmd",
    "history": "history_cmd",
    "bisect": "bisect_cmd",
    "tune": "tune_cmd",
    "stack": "stack_cmd",
    "dashboards": "dashboards_cmd",
    "images": "images_cmd",
    "deploy": "deploy_cmd",
    "cluster": "cluster_cmd",
    "slurm": "slurm_cmd",
}
GLOBAL_VALUE_OPTIONS = ("--log-level",)  # the global options that take a value
GLOBAL_FLAGS = ("--debug",)  # the global options that take none (besides --help and --version)
CRASH_EXIT = 70  # sysexits.h EX_SOFTWARE: an internal error, not bad input (2) or a finding (1)
INTERRUPTED_EXIT = 130


class _VersionAction(argparse.Action):
    """--version: the installed version, looked up only when asked for (reading metadata is not free)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        """Print `fleetbench VERSION` and exit 0."""
        import fleetbench

        print(f"fleetbench {fleetbench.__version__}")
        parser.exit()


def command_module(name: str) -> ModuleType:
    """The module fleetbench.cli.NAME, whose `register(commands)` adds its commands."""
    return importlib.import_module(f"fleetbench.cli.{name}")


def command_of(argv: list[str]) -> str | None:
    """The command word of `argv` (the first word after the global options), or None.

    None as well when a global flag other than a value option comes first (--help, --version), so
    that the whole command line is built for it.
    """
    words = iter(argv)
    for word in words:
        if not word.startswith("-"):
            return word
        name = word.partition("=")[0]
        if len(name) >= 3 and "=" not in word and any(flag.startswith(name) for flag in GLOBAL_FLAGS):
            continue
        if not any(option.startswith(name) for option in GLOBAL_VALUE_OPTIONS) or len(name) < 3:
            return None
        if "=" not in word:
            next(words, None)  # the option's value
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line: global flags, then the commands; only the command of `argv`, when it names one.

    Without `argv` (or for --help, --version, an unknown command) every module of COMMANDS registers.
    """
    parser = OneLineParser(prog="fleetbench", description=__doc__)
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        help=f"diagnostics shown on stderr (default: ${LOG_LEVEL_ENV}, else debug with --debug, else {DEFAULT_LEVEL})",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"print the traceback of an unexpected error instead of saving it to a file, and debug diagnostics "
        f"(also ${DEBUG_ENV}=1)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    command = command_of(argv) if argv is not None else None
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        command_module(name).register(commands)
    return parser


def configure(args: argparse.Namespace) -> bool:
    """Logging at the chosen level, exported with --debug to child processes; whether tracebacks are wanted.

    The level: --log-level, else $FLEETBENCH_LOG_LEVEL, else debug with --debug or $FLEETBENCH_DEBUG, else
    info. A bad value of either variable is a UserError. Unknown FLEETBENCH_* variables are warned about.
    """
    debug = bool(args.debug) or debug_from_env()
    level = args.log_level or checked_level_from_env() or ("debug" if debug else DEFAULT_LEVEL)
    setup_logging(level)
    if debug:
        os.environ[DEBUG_ENV] = "1"  # torchrun's ranks and the demo's stages print theirs too
    warn_unknown_variables(os.environ)
    return debug


def main(argv: list[str] | None = None) -> int:
    """Run one command (`argv`, default sys.argv[1:]) and return its exit status.

    A UserError becomes one `fleetbench: error: ...` line on stderr and its exit code; Ctrl-C 130; any
    other exception one line naming it and its saved traceback, and CRASH_EXIT (see the module docstring).
    """
    with _sigterm_interrupts():
        return _main(argv)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises Terminated while main() runs (in the main thread only: signals go there), then the
    handler before is put back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, _frame: object) -> None:
        raise Terminated(f"interrupted by signal {signum} (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    console = Console(stderr=True)
    argv = sys.argv[1:] if argv is None else argv
    debug: bool | None = None  # None until the command line and the environment are read
    try:
        args = build_parser(argv).parse_args(argv)
        debug = configure(args)
        return int(args.handler(args, console))
    except UserError as exc:
        if debug is None:  # refused before logging was set up: the environment's warnings still go out
            setup_logging(level_from_env(), export=False)
            warn_unknown_variables(os.environ)
        print(f"fleetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(f"fleetbench: interrupted{' (SIGTERM)' if isinstance(exc, Terminated) else ''}", file=sys.stderr)
        return INTERRUPTED_EXIT
    except BrokenPipeError:  # the reader of stdout went away (`fleetbench results list | head -1`): no bug
        with contextlib.suppress(OSError, ValueError):  # the exit flush must not fail on the closed pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # the one place where unexpected exceptions end
        wanted = debug if debug is not None else _debug_asked(argv)
        return report_crash(exc, argv, wanted)


def _debug_asked(argv: list[str]) -> bool:
    """--debug among the global options, or $FLEETBENCH_DEBUG: for a crash before they were read."""
    command = command_of(argv)
    options = argv[: argv.index(command)] if command in argv else argv
    try:
        from_env = debug_from_env()
    except UserError:
        from_env = False
    return from_env or any(len(word) >= 3 and "--debug".startswith(word) for word in options)


def _one_line(exc: BaseException) -> str:
    """`Type: message` of an exception in one line of at most about 300 characters."""
    try:
        message = " ".join(str(exc).split())
    except Exception:  # a broken __str__ must not hide the original error
        message = ""
    if len(message) > 300:
        message = message[:297] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def crash_dir() -> Path:
    """Where crash logs go: $XDG_STATE_HOME/fleetbench, else ~/.local/state/fleetbench."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "fleetbench"


def save_crash_log(text: str, folder: Path) -> Path:
    """Write `text` to a new crash-<UTC time>-<pid>[-N].log in `folder` (created, private); OSError on failure.

    The same process can crash twice within a second (a notebook, a test calling main() in process):
    the second log takes the next free suffix instead of failing on the first one's name.
    """
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for attempt in range(100):
        suffix = f"-{attempt}" if attempt else ""
        path = folder / f"crash-{stamp}-{os.getpid()}{suffix}.log"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
        return path
    raise FileExistsError(f"{folder}: 100 crash logs of this process within one second")


def _crash_text(exc: BaseException, argv: list[str]) -> str:
    """What a crash log holds: the command, the versions and the traceback."""
    import platform
    import shlex
    import traceback

    import fleetbench

    return (
        f"command: fleetbench {shlex.join(argv)}\n"
        f"fleetbench {fleetbench.__version__}, Python {platform.python_version()} on {platform.platform()}\n"
        f"working folder: {os.getcwd()}\n\n" + "".join(traceback.format_exception(exc))
    )


def _saved_where(text: str) -> str:
    """Save a crash log where it belongs, else in the temp folder; say in words where it went."""
    import tempfile

    try:
        preferred: Path | None = crash_dir()
    except (RuntimeError, KeyError):  # no home folder to find
        preferred = None
    note = ""
    if preferred is not None:
        try:
            return f"the traceback is in {save_crash_log(text, preferred)}"
        except OSError as exc:
            note = f"{preferred} cannot be written ({exc.strerror or exc}), so "
    try:
        return f"{note}the traceback is in {save_crash_log(text, Path(tempfile.gettempdir()))}"
    except OSError as exc:
        return f"{note}the traceback could not be saved either ({exc.strerror or exc})"


def report_crash(exc: BaseException, argv: list[str], debug: bool) -> int:
    """One line for an unexpected exception: what it was and where its traceback is (with `debug`, the
    traceback on stderr first). Returns CRASH_EXIT."""
    if debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
        where = "the traceback is above"
    else:
        try:
            text = _crash_text(exc, argv)
        except Exception:  # the log is a courtesy; the line below must still go out
            import traceback

            text = "".join(traceback.format_exception(exc))
        where = _saved_where(text) + "; --debug prints it"
    print(f"fleetbench: error: unexpected {_one_line(exc)} (a bug; {where})", file=sys.stderr)
    return CRASH_EXIT


if __name__ == "__main__":
    raise SystemExit(main())
