"""`make perf`'s verdicts (scripts/perfkit.py): PASS, FAIL and NOISY against a row's target, planted on
figures whose answer is known, and the summary lines scripts/perf.py collects from each script."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import perfkit


@pytest.mark.parametrize(
    ("value", "target", "samples", "expected"),
    [
        (2.5, ">= 2", None, "PASS"),
        (1.5, ">= 2", None, "FAIL"),
        (0.8, "<= 1.01", None, "PASS"),
        (1.0, "0.9-1.1", None, "PASS"),
        (1.2, "0.9-1.1", None, "FAIL"),
        # every round well above the target: the interval is too
        (2.6, ">= 2", [2.5, 2.6, 2.7, 2.55, 2.65, 2.6, 2.58], "PASS"),
        # every round well below
        (1.2, ">= 2", [1.1, 1.2, 1.3, 1.25, 1.15, 1.2, 1.22], "FAIL"),
        # rounds on both sides of the target: the run cannot tell, whatever the median says
        (2.05, ">= 2", [1.2, 2.9, 1.5, 2.8, 2.05, 1.4, 2.7], "NOISY"),
        (0.95, "0.9-1.1", [0.7, 1.3, 0.95, 0.8, 1.2, 0.85, 1.15], "NOISY"),
    ],
)
def test_verdict_against_the_target(value: float, target: str, samples: list[float] | None, expected: str) -> None:
    assert perfkit.verdict(value, target, samples)[0] == expected


def test_a_noisy_row_is_never_passed_on_its_median_alone() -> None:
    # The median meets the target; half the rounds do not. A gate on the median would say PASS.
    samples = [1.0, 3.0, 1.1, 2.9, 2.1, 1.05, 3.1, 2.2, 1.2]
    row = perfkit.judged("planted", 2.1, ">= 2", samples=samples)
    assert row.verdict == "NOISY"
    assert row.interval is not None and row.interval[0] < 2 < row.interval[1]


def test_rows_go_to_the_summary_file_perf_collects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "rows.jsonl"
    monkeypatch.setenv(perfkit.SUMMARY_ENV, str(summary))
    perfkit.emit(perfkit.judged("a row", 2.5, ">= 2", "detail", samples=[2.4, 2.5, 2.6, 2.5]))
    perfkit.emit(perfkit.skipped("another", "<= 1", "no adapter here"))
    rows = perfkit.read_summary(summary)
    assert [(r.row, r.verdict) for r in rows] == [("a row", "PASS"), ("another", "SKIP")]
    assert rows[0].interval is not None and rows[1].detail == "no adapter here"
    assert all(
        set(json.loads(line)) >= {"row", "value", "target", "verdict"} for line in summary.read_text().splitlines()
    )


def test_every_perf_script_but_the_gate_reports_rows_to_perf() -> None:
    scripts = sorted((REPO / "scripts").glob("perf_*.py"))
    assert scripts
    silent = [s.name for s in scripts if s.name != "perf_compare.py" and "perfkit.emit(" not in s.read_text()]
    assert silent == [], f"these perf scripts print rows make perf cannot judge: {silent}"
