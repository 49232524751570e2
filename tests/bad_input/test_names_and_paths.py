"""Bad input, round 4: every name, run id and path argument of every command, tried with what the file system
or the one-line promise cannot take: empty, a control character, a component over 255 bytes (as 5,000
characters, and as 300 bytes of multi-byte text that fits in 100 characters), a path over 4,095 bytes,
and a name that is a path. Each is refused by the parser (fleetbench.names) with one line naming the
argument, the limit and the value cut, exit 2, before the command reads or writes anything.

Each case runs the entry point in-process through tests/badinput.py:check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from badinput import BadInput, check

LONG = "r" * 5000  # one component of 5,000 bytes
WIDE = "é" * 150  # 150 characters, 300 bytes in UTF-8
DEEP = "/".join(["d" * 200] * 21)  # 21 components of 200 bytes: 4,220 bytes in all, each component allowed

# value, the fragment a path argument's line holds, the fragment a name argument's line holds
VALUES: dict[str, tuple[str, str, str]] = {
    "empty": ("", "an empty path is not accepted", "an empty name is not accepted"),
    "newline": ("a\nb", "holds the control character \\n", "holds the control character \\n"),
    "tab": ("a\tb", "holds the control character \\t", "holds the control character \\t"),
    "escape": ("a\x1b[31mb", "holds the control character \\x1b", "holds the control character \\x1b"),
    "long": (LONG, "is 5000 bytes long; accepted: a path of at most 4095 bytes", "is 5000 bytes long; accepted: a name of at most 255"),
    "wide": (WIDE, "has a component of 300 bytes; accepted: at most 255", "is 300 bytes long; accepted: a name of at most 255"),
    "deep": (DEEP, "is 4220 bytes long; accepted: a path of at most 4095 bytes", "holds '/'; accepted: a name, not a path"),
}  # fmt: skip

# Every path argument: (id, args before the value, the option, args after); the value follows the option.
PATH_ARGS: list[tuple[str, tuple[str, ...], str, tuple[str, ...]]] = [
    ("compare-out", ("compare", "a", "b", "--out"), "--out", ()),
    ("compare-config", ("compare", "a", "b", "--config"), "--config", ()),
    ("compare-results-dir", ("compare", "a", "b", "--results-dir"), "--results-dir", ()),
    ("compare-repo", ("compare", "--rounds", "3", "--repo"), "--repo", ("--", "probe")),
    ("baseline-results-dir", ("baseline", "--results-dir"), "--results-dir", ("list",)),
    ("baseline-list-results-dir", ("baseline", "list", "--results-dir"), "--results-dir", ()),
    ("history-png", ("history", "probe_achieved_flop_per_second", "--png"), "--png", ()),
    ("history-results-dir", ("history", "probe_achieved_flop_per_second", "--results-dir"), "--results-dir", ()),
    ("noise-results-dir", ("noise", "--results-dir"), "--results-dir", ("--", "probe")),
    ("probe-config", ("probe", "--config"), "--config", ()),
    ("probe-results-dir", ("probe", "--results-dir"), "--results-dir", ()),
    ("train-config", ("train", "--config"), "--config", ()),
    ("train-results-dir", ("train", "--results-dir"), "--results-dir", ()),
    ("edge-run-pte", ("edge", "run", "--pte"), "--pte", ()),
    ("edge-export-out-dir", ("edge", "export", "--out-dir"), "--out-dir", ()),
    ("edge-llm-checkpoint", ("edge", "llm", "--checkpoint"), "--checkpoint", ()),
    ("edge-llm-hf", ("edge", "llm", "--hf"), "--hf", ()),
    ("edge-llm-gguf", ("edge", "llm", "--gguf"), "--gguf", ()),
    ("edge-llm-results-dir", ("edge", "llm", "--results-dir"), "--results-dir", ()),
    ("trace-summarize", ("trace", "summarize"), "PATH", ()),
    ("report-results-dir", ("report", "--results-dir"), "--results-dir", ()),
    ("report-config", ("report", "r", "--compare", "a", "--config"), "--config", ()),
    ("results-list", ("results", "list", "--results-dir"), "--results-dir", ()),
    ("ncu-summarize", ("ncu", "summarize"), "report", ()),
    ("profile-script", ("profile", "--script"), "--script", ()),
    ("profile-config", ("profile", "--config"), "--config", ()),
    ("metrics-flush-results-dir", ("metrics", "flush", "--results-dir"), "--results-dir", ()),
    ("dashboards-out", ("dashboards", "--out"), "--out", ()),
    ("images-build-context", ("images", "build", "--context"), "--context", ()),
    ("images-save-output", ("images", "save", "trainer", "-o"), "-o/--output", ()),
    ("deploy-inventory", ("deploy", "site", "--inventory"), "--inventory/-i", ()),
    ("deploy-vault", ("deploy", "site", "--inventory", "inv", "--vault-password-file"), "--vault-password-file", ()),
    ("cluster-up-state-dir", ("cluster", "up", "--state-dir"), "--state-dir", ()),
    ("slurm-status-inventory", ("slurm", "status", "1", "--inventory"), "--inventory/-i", ()),
    ("demo-results-dir", ("demo", "--results-dir"), "--results-dir", ()),
]

# Every name argument: (id, args before the value, the argument, args after, the fragment of a stricter rule
# that checks it instead of the parser's: run ids and baseline names have an alphabet of their own).
RUN_ID_RULE = "--run-id: run.run_id: Value error, use 1-64 characters of letters, digits"
NAME_ARGS: list[tuple[str, tuple[str, ...], str, tuple[str, ...], str | None]] = [
    ("probe-run-id", ("probe", "--run-id"), "--run-id", (), RUN_ID_RULE),
    ("train-run-id", ("train", "--run-id"), "--run-id", (), RUN_ID_RULE),
    ("edge-llm-run-id", ("edge", "llm", "--run-id"), "--run-id", (), RUN_ID_RULE),
    ("compare-baseline", ("compare", "--baseline"), "--baseline", ("a",), "is not accepted: use 1-64 letters, digits"),
    ("baseline-set-name", ("baseline", "set"), "name", ("a",), "is not accepted: use 1-64 letters, digits"),
    ("baseline-rm-name", ("baseline", "rm"), "name", (), "is not accepted: use 1-64 letters, digits"),
    ("results-show", ("results", "show"), "run_id", (), "is not accepted: use 1-64 characters of letters, digits"),
    ("compare-run-prefix", ("compare", "--rounds", "3", "--run-prefix"), "--run-prefix", ("--", "probe"), None),
    ("history-metric", ("history",), "METRIC", (), None),
    ("history-benchmark", ("history", "probe_achieved_flop_per_second", "--benchmark"), "--benchmark", (), None),
    ("images-build-name", ("images", "build", "--variant", "cpu"), "NAME", (), None),
]

# The run arguments of compare and baseline set: run ids or run folders (path rules; an empty one is no run).
RUN_ARGS: list[tuple[str, tuple[str, ...], str, tuple[str, ...]]] = [
    ("compare-base", ("compare",), "RUN", ("b",)),
    ("compare-new", ("compare", "a"), "RUN", ()),
    ("compare-baseline-new", ("compare", "--baseline", "main"), "RUN", ()),
    ("baseline-set-run", ("baseline", "set", "main"), "RUN", ()),
]


# Inputs an earlier round tries already (tests/bad_input/test_cli_and_config.py, test_telemetry.py).
EARLIER_ROUNDS = {("probe-run-id", "empty"), ("metrics-flush-results-dir", "empty")}


def _cases() -> list[BadInput]:
    """Every bad value for every argument: the line names the argument (or the stricter rule's words),
    repeats the value cut (see test_the_value_is_shown_cut_with_its_size) and says what is wrong (the test
    checks VALUES' words where the parser's rule applies)."""
    from fleetbench.names import shown

    cases = []
    for name, before, argument, after, rule in [*((*a, None) for a in PATH_ARGS + RUN_ARGS), *NAME_ARGS]:
        for value_id, values in VALUES.items():
            if (name, value_id) in EARLIER_ROUNDS:
                continue
            fragment = rule or f"argument {argument}: " + (shown(values[0]) if values[0] else "an empty")
            cases.append(BadInput(f"arg-{name}-{value_id}", (*before, values[0], *after), fragment))
    return cases


CASES = _cases()
RULE_OF = {name: rule for name, *_, rule in NAME_ARGS}
GENERIC_NAMES = {name for name, *_, rule in NAME_ARGS if rule is None}


def _said(case: BadInput) -> str | None:
    """The words the case's line must hold: the path rule's or the name rule's (None: a stricter rule's)."""
    name, value_id = case.id.removeprefix("arg-").rsplit("-", 1)
    if name in RULE_OF:
        return VALUES[value_id][2] if name in GENERIC_NAMES else None
    return VALUES[value_id][1]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_bad_name_or_path_is_one_line_naming_the_argument(case: BadInput, tmp_path: Path) -> None:
    result = check(case, tmp_path / "work", tmp_path / "home")
    said = _said(case)
    assert said is None or said in result.stderr, result.stderr


def test_the_value_is_shown_cut_with_its_size(tmp_path: Path) -> None:
    case = BadInput(
        "shown-cut", ("compare", LONG, "b"), "argument RUN: 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr'... (5000 bytes)"
    )
    result = check(case, tmp_path / "work", tmp_path / "home")
    assert len(result.stderr) < 400, "the line repeats the value cut, not whole"
