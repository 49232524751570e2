"""The bad-input suite covers at least 950 distinct inputs, each checked by tests/badinput.py:check."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from badinput import BadInput

HERE = Path(__file__).parent


def all_cases() -> list[BadInput]:
    """Every CASES entry of every module in this folder."""
    cases: list[BadInput] = []
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"bad_input_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend(getattr(module, "CASES", []))
    return cases


def test_at_least_950_distinct_bad_inputs() -> None:
    cases = all_cases()
    ids = [case.id for case in cases]
    assert len(ids) == len(set(ids)), "case ids must be distinct"
    inputs = {
        (
            case.args,
            repr(sorted(case.files.items())),
            repr(sorted(case.env.items())),
            getattr(case.prepare, "__name__", ""),
        )
        for case in cases
    }
    assert len(inputs) == len(cases), "two cases try the same input"
    assert len(cases) >= 950, f"{len(cases)} bad inputs"
