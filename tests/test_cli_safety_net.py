"""Where unexpected exceptions end, and the FLEETBENCH_* variables the CLI knows.

A handler that raises something other than a UserError is a bug: the CLI says so in one line that
names the exception and the file its traceback was saved to, and exits 70; `--debug` (or
FLEETBENCH_DEBUG=1) prints the traceback instead. The failing handler here is a real command's
handler replaced in the test; everything around it (parsing, logging, the crash log) is the real CLI.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, fleetbench_logger_kept, run_cli
from fleetbench import envvars
from fleetbench.cli import main as cli_main
from fleetbench.cli import results_cmd
from fleetbench.envvars import KNOWN, unknown_variables
from fleetbench.errors import UserError
from fleetbench.logs import DEBUG_ENV, LOG_LEVEL_ENV

CRASH_LINE = re.compile(
    r"^fleetbench: error: unexpected RuntimeError: boom in the handler "
    r"\(a bug; the traceback is in (?P<path>\S+/crash-\d{8}T\d{6}Z-\d+(-\d+)?\.log); --debug prints it\)$"
)


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """main() sets up logging and exports variables: undo both; crash logs go to this test's folder."""
    for name in [name for name in os.environ if name.startswith("FLEETBENCH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "results").mkdir()
    with fleetbench_logger_kept():
        yield
    for name in (LOG_LEVEL_ENV, DEBUG_ENV):  # exported by main(); monkeypatch restores what was there before
        os.environ.pop(name, None)


def failing_handler(exc: BaseException) -> object:
    """A handler of `results list` that raises `exc`."""

    def handle(*_: object) -> int:
        raise exc

    return handle


def crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, *flags: str
) -> tuple[int, list[str]]:
    """`fleetbench FLAGS results list` with a handler that fails unexpectedly: exit code and stderr lines."""
    monkeypatch.setattr(results_cmd, "handle_list", failing_handler(RuntimeError("boom\nin the handler")))
    code = cli_main.main([*flags, "results", "--results-dir", str(tmp_path / "results"), "list"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_an_unexpected_error_is_one_line_naming_its_saved_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, lines = crash(monkeypatch, capsys, tmp_path)
    assert code == cli_main.CRASH_EXIT == 70
    assert len(lines) == 1, lines
    match = CRASH_LINE.match(lines[0])
    assert match, lines[0]
    log = Path(match["path"])
    assert log.parent == tmp_path / "state" / "fleetbench"
    assert log.stat().st_mode & 0o777 == 0o600
    text = log.read_text()
    assert text.startswith(f"command: fleetbench results --results-dir {tmp_path / 'results'} list\n")
    assert "Traceback (most recent call last):" in text and text.rstrip().endswith("RuntimeError: boom\nin the handler")


@pytest.mark.parametrize("how", ["--debug", "--deb", "FLEETBENCH_DEBUG=1", "FLEETBENCH_DEBUG=yes"])
def test_debug_prints_the_traceback_instead(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str
) -> None:
    if how.startswith("--"):
        flags: tuple[str, ...] = (how,)
    else:
        flags = ()
        monkeypatch.setenv(DEBUG_ENV, how.partition("=")[2])
    code, lines = crash(monkeypatch, capsys, tmp_path, *flags)
    assert code == 70
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-2:] == [
        "in the handler",
        "fleetbench: error: unexpected RuntimeError: boom in the handler (a bug; the traceback is above)",
    ]
    assert not (tmp_path / "state").exists()
    assert os.environ[DEBUG_ENV] == "1"  # child processes (torchrun's ranks) print theirs too
    assert os.environ[LOG_LEVEL_ENV] == "debug"  # and debug diagnostics show


def test_two_crashes_of_one_process_within_a_second_keep_both_tracebacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from fleetbench.cli.main import save_crash_log

    folder = tmp_path / "state" / "fleetbench"
    first, second = save_crash_log("first", folder), save_crash_log("second", folder)
    assert first != second and (first.read_text(), second.read_text()) == ("first", "second")
    assert second.name == first.name.removesuffix(".log") + "-1.log"


def test_the_crash_log_falls_back_to_the_temp_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file" / "state"))
    code, lines = crash(monkeypatch, capsys, tmp_path)
    assert code == 70 and len(lines) == 1, lines
    prefix = f"(a bug; {tmp_path / 'a-file' / 'state' / 'fleetbench'} cannot be written (Not a directory), so the "
    assert prefix in lines[0], lines[0]
    (log,) = (tmp_path / "tmp").glob("crash-*.log")
    assert f"the traceback is in {log}; --debug prints it)" in lines[0]
    assert "RuntimeError: boom" in log.read_text()


def test_a_crash_with_nowhere_to_save_its_traceback_still_says_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "a-file" / "tmp"))
    code, lines = crash(monkeypatch, capsys, tmp_path)
    assert code == 70 and len(lines) == 1, lines
    assert "the traceback could not be saved either (Not a directory); --debug prints it)" in lines[0]


def test_interrupt_and_exit_keep_their_meaning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["results", "--results-dir", str(tmp_path / "results"), "list"]
    monkeypatch.setattr(results_cmd, "handle_list", failing_handler(KeyboardInterrupt()))
    assert cli_main.main(args) == 130
    assert capsys.readouterr().err == "fleetbench: interrupted\n"
    monkeypatch.setattr(results_cmd, "handle_list", failing_handler(SystemExit(3)))
    with pytest.raises(SystemExit):
        cli_main.main(args)
    monkeypatch.setattr(results_cmd, "handle_list", failing_handler(BrokenPipeError()))
    assert cli_main.main(args) == 1  # the reader of stdout went away: no bug to report
    assert capsys.readouterr().err == ""
    assert not (tmp_path / "state").exists()


def test_bad_input_stays_one_line_with_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(results_cmd, "handle_list", failing_handler(UserError("the input is bad")))
    code = cli_main.main(["--debug", "results", "--results-dir", str(tmp_path / "results"), "list"])
    assert code == 2
    assert capsys.readouterr().err == "fleetbench: error: the input is bad\n"


def test_the_console_entry_point_ends_a_crash_the_same_way(tmp_path: Path) -> None:
    """In a real process: the handler replaced, then the entry point `python -m fleetbench` runs."""
    program = (
        "import runpy, sys\n"
        "import fleetbench.cli.results_cmd as results_cmd\n"
        "def handle(args, console):\n"
        "    raise RuntimeError('boom in the handler')\n"
        "results_cmd.handle_list = handle\n"
        "sys.argv = ['fleetbench', 'results', '--results-dir', sys.argv[1], 'list']\n"
        "runpy.run_module('fleetbench', run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETBENCH_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 70, done.stderr
    assert len(lines) == 1 and CRASH_LINE.match(lines[0]), done.stderr
    assert "Traceback" not in done.stderr
    (log,) = (tmp_path / "state" / "fleetbench").glob("crash-*.log")
    assert "RuntimeError: boom in the handler" in log.read_text()


def test_an_unknown_variable_is_warned_about_with_the_closest_known_name(tmp_path: Path) -> None:
    result = run_cli(
        "results",
        "--results-dir",
        str(tmp_path / "results"),
        "list",
        env={"FLEETBENCH_PUSHGATEWAY_URL": "http://127.0.0.1:9091", "FLEETBENCH_ZZZ": "1"},
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    known = ", ".join(sorted(KNOWN))
    assert warnings == [
        "warning: FLEETBENCH_PUSHGATEWAY_URL is not a fleetbench variable and is ignored; "
        f"did you mean FLEETBENCH_PUSHGATEWAY? known: {known}",
        f"warning: FLEETBENCH_ZZZ is not a fleetbench variable and is ignored; known: {known}",
    ]


def test_the_warning_precedes_a_bad_input_line_and_log_level_error_silences_it(tmp_path: Path) -> None:
    """The one case where bad input gives two lines: the environment's warning, then the error."""
    env = {"FLEETBENCH_PUSHGATWAY": "http://127.0.0.1:9091"}
    bad = run_cli("results", "--results-dir", str(tmp_path / "nope"), "list", env=env)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("warning: FLEETBENCH_PUSHGATWAY is not a fleetbench variable")
    assert lines[1].startswith("fleetbench: error: results folder ")
    quiet = run_cli("--log-level", "error", "results", "--results-dir", str(tmp_path / "results"), "list", env=env)
    assert quiet.returncode == 0 and "warning:" not in quiet.stderr, quiet.stderr


def test_unknown_variables_are_matched_by_prefix_in_any_case() -> None:
    environ = {"FLEETBENCH_HOST": "h", "fleetbench_host": "h", "FLEETBENCHX": "1", "PATH": "/bin"}
    assert unknown_variables(environ) == ["fleetbench_host"]


# Names that look like variables but are not: a GLSL define the edge shaders are compiled with.
NOT_VARIABLES = {"FLEETBENCH_F16"}


def tree_text() -> dict[str, str]:
    """The text of every tracked file of the package, scripts, Makefile, containers, deploy, grafana, mobile."""
    roots = ("benchmarks/fleetbench/", "scripts/", "containers/", "deploy/", "grafana/", "mobile/", "Makefile")
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    texts: dict[str, str] = {}
    for name in listed.stdout.splitlines():
        path = REPO / name
        if name.startswith(roots) and path.name != "envvars.py" and path.is_file():
            try:
                texts[name] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return texts


def test_every_fleetbench_variable_in_the_tree_is_registered_and_every_registered_one_is_used() -> None:
    texts = tree_text()
    pattern = re.compile(r"\bFLEETBENCH_[A-Z0-9_]*[A-Z0-9]")  # not _FLEETBENCH_DIR, a Python name
    named = {name: where for where, text in texts.items() for name in pattern.findall(text)}
    assert {name: where for name, where in named.items() if name not in KNOWN and name not in NOT_VARIABLES} == {}
    constants = {getattr(envvars, attr): attr for attr in envvars.__all__ if attr.endswith("_ENV")}
    assert set(constants) == set(KNOWN)
    code = "\n".join(text for where, text in texts.items() if where.endswith(".py"))
    unused = [name for name in KNOWN if name not in named and not re.search(rf"\b{constants[name]}\b", code)]
    assert unused == []
    assert all(description and "\n" not in description for description in KNOWN.values())


def test_the_configuration_page_lists_every_variable() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert [name for name in KNOWN if f"`{name}`" not in page] == []


@pytest.mark.parametrize("where", ["before", "after"])
def test_results_dir_is_taken_before_or_after_the_subcommand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    missing = str(tmp_path / "nowhere")
    argv = (
        ["results", "--results-dir", missing, "list"]
        if where == "before"
        else ["results", "list", "--results-dir", missing]
    )
    assert cli_main.main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"fleetbench: error: results folder {missing} does not exist; run a benchmark first or pass --results-dir"
    )
