"""The edge llm perf row's judgement (scripts/perf_edge_llm.py): the bootstrap interval of the median of the
rounds' ratios and the verdict against 0.9-1.1, and its refusal of a llama-bench that would not run on the
wheel's libllama. The figures themselves come from `make perf`, not from tests."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO


def load_script() -> ModuleType:
    if str(REPO / "scripts") not in sys.path:  # the scripts import their shared perfkit, as when run
        sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("perf_edge_llm_script", REPO / "scripts" / "perf_edge_llm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("ratios", "expected"),
    [
        ([0.95, 0.96, 0.94, 0.97, 0.95, 0.93, 0.96, 0.95, 0.94, 0.96, 0.95], "within"),
        ([0.95, 0.80, 0.97, 0.78, 0.93, 0.82, 0.96, 0.79, 0.94, 0.81, 0.92], "undecided"),
        ([1.20, 1.25, 1.18, 1.22, 1.21, 1.19, 1.24, 1.20, 1.23, 1.22, 1.21], "outside"),
        ([0.80, 0.82, 0.79, 0.81, 0.80, 0.83, 0.78, 0.80, 0.81, 0.79, 0.82], "outside"),
    ],
)
def test_the_verdict_needs_the_whole_interval_on_one_side_of_a_bound(ratios: list[float], expected: str) -> None:
    script = load_script()
    low, high = script.interval(ratios)
    assert low <= sorted(ratios)[len(ratios) // 2] <= high
    assert expected in script.verdict(low, high)


def test_identical_rounds_give_a_point_interval() -> None:
    assert load_script().interval([0.97] * 5) == (0.97, 0.97)


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed: 'fleetbench[llm]'"
)
def test_a_llama_bench_without_the_wheels_libllama_is_refused(tmp_path: Path) -> None:
    """A binary that links no libllama (here: a copy of `true`, as a static llama-bench would) is named and
    refused; the row would compare two builds of llama.cpp, not two callers of one."""
    binary = tmp_path / "llama-bench"
    shutil.copy(shutil.which("true") or "/bin/true", binary)
    reason = load_script().on_wheel_libraries(binary)
    assert isinstance(reason, str) and str(binary) in reason and "static build" in reason and "--build" in reason
