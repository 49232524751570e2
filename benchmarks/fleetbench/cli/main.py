"""The `fleetbench` command: one CLI, one module per command group; every Make target calls it."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from fleetbench.cli.parser import OneLineParser
from fleetbench.errors import UserError
from fleetbench.logs import DEFAULT_LEVEL, LEVELS, LOG_LEVEL_ENV, level_from_env, setup_logging

if TYPE_CHECKING:
    from types import ModuleType

# Each command and the module of fleetbench.cli that registers it, in `fleetbench --help` order. A run
# imports only its command's module (`fleetbench ncu summarize` loads no trainer, no image builder);
# help and unknown commands load them all.
COMMANDS: dict[str, str] = {
    "demo": "demo_cmd",
    "train": "train_cmd",
    "probe": "probe_cmd",
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
    "stack": "stack_cmd",
    "dashboards": "dashboards_cmd",
    "images": "images_cmd",
    "deploy": "deploy_cmd",
    "cluster": "cluster_cmd",
}
GLOBAL_VALUE_OPTIONS = ("--log-level",)  # the global options that take a value


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
        default=level_from_env(),
        help=f"diagnostics shown on stderr (default: ${LOG_LEVEL_ENV}, else {DEFAULT_LEVEL})",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    command = command_of(argv) if argv is not None else None
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        command_module(name).register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command (`argv`, default sys.argv[1:]) and return its exit status.

    A UserError becomes one `fleetbench: error: ...` line on stderr and its exit code; Ctrl-C 130.
    """
    console = Console(stderr=True)
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser(argv).parse_args(argv)
        setup_logging(args.log_level)
        return int(args.handler(args, console))
    except UserError as exc:
        print(f"fleetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fleetbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
