"""Every edge figure carries its stability: sample count, CV, a verdict, and only the percentiles its
samples support; a row at CV 115 % is never shown as "ok"."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from rich.console import Console

from fleetbench.cli.views.edge import kernel_table
from fleetbench.cli.views.edge_llm import _cells
from fleetbench.edge.llm.job import LlmRow
from fleetbench.edge.rows import KernelRow
from fleetbench.edge.stability import Stability, min_samples, supported_percentile


def test_percentiles_need_the_samples_that_reach_past_them() -> None:
    assert [min_samples(q) for q in (50, 90, 95, 99)] == [1, 10, 20, 100]
    ten = [float(i) for i in range(10)]
    assert supported_percentile(ten, 50) == 4.5
    assert supported_percentile(ten, 90) == pytest.approx(np.percentile(ten, 90))
    assert math.isnan(supported_percentile(ten, 99))  # p99 of 10 samples is their maximum, not a p99
    assert math.isnan(supported_percentile(ten[:9], 90))
    hundred = list(range(100))
    assert supported_percentile([float(x) for x in hundred], 99) == pytest.approx(98.01)


def test_verdicts_against_the_cv_target() -> None:
    assert Stability(10, 1.15, 0.05).verdict == "unstable"
    assert Stability(3, 0.01, 0.05).verdict == "stable"
    assert Stability(1, math.nan, 0.05).verdict == "single sample"
    assert Stability(10, 1.15, 0.05).line() == "n=10 CV 115.0% unstable"
    assert Stability(1, math.nan, 0.05).as_dict() == {
        "samples": 1,
        "cv": None,
        "cv_target": 0.05,
        "verdict": "single sample",
    }


def _render(table: object) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(table)
    return out.getvalue()


def test_a_kernel_row_at_cv_115_percent_is_unstable_not_ok() -> None:
    def row(kernel: str, variation: float, verdict: str) -> KernelRow:
        return KernelRow(
            kernel, "wgsl", "float32", "256", "timestamp", True, 0.0, 0.0, 1e-4,
            p50_s=1e-3, variation=variation, verdict=verdict, tries=10, latencies_s=[1e-3],
        )  # fmt: skip

    shown = _render(kernel_table([row("gemm_vec4", 1.15, "unstable"), row("silu", 0.01, "stable")], "t"))
    noisy = next(line for line in shown.splitlines() if "gemm_vec4" in line)
    steady = next(line for line in shown.splitlines() if "silu" in line)
    assert "unstable" in noisy and " ok " not in noisy + " "
    assert " ok " in steady + " "


def test_an_llm_row_at_cv_115_percent_is_unstable_not_ok() -> None:
    row = LlmRow("llama.cpp", "q8_0", True, ok=True, agrees=True, tries=10, cv=1.15, logit_error=1e-3)
    row.pp, row.tg, row.ttft = {"p50": 100.0, "p99": math.nan}, {"p50": 10.0, "p99": math.nan}, {"p50": 0.1}
    row.stability = Stability(10, 1.15, 0.05).as_dict()
    cells = _cells(row)
    assert "ok" not in cells and any("unstable" in c for c in cells)
    row.stability = Stability(10, 0.01, 0.05).as_dict()
    assert "ok" in _cells(row)
