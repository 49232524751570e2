"""The rule of thumb: memory-bound, compute-bound, and the cases in between, with configurable thresholds."""

from __future__ import annotations

import pytest

from fleetbench.config import load_config
from fleetbench.errors import UserError
from fleetbench.profile.classify import CLASSES, FIXES, FIXES_SHORT, Thresholds, classify


@pytest.mark.parametrize(
    ("compute", "memory", "expected"),
    [
        (0.10, 0.90, "memory_bound"),  # LayerNorm / Softmax / decode: tensor cores idle, HBM saturated
        (0.90, 0.30, "compute_bound"),  # large-batch GEMM / prefill
        (0.20, 0.30, "latency_bound"),  # both low: under-utilised
        (0.85, 0.85, "balanced"),  # both busy
        (0.40, 0.86, "balanced"),  # memory leads, but compute is not idle
        (0.25, 0.90, "balanced"),  # compute exactly at the boundary is not "below" it
        (None, 0.90, "unknown"),
        (0.90, None, "unknown"),
    ],
)
def test_default_thresholds(compute: float | None, memory: float | None, expected: str) -> None:
    verdict = classify(compute, memory)
    assert verdict.cls == expected
    assert verdict.fix == FIXES[expected]


def test_fixes_name_what_the_brief_asks_for() -> None:
    assert all(word in FIXES["memory_bound"] for word in ("fus", "Triton", "torch.compile", "FP8/INT4", "batch"))
    assert all(word in FIXES["compute_bound"] for word in ("FP8/NVFP4", "64/128", "bigger GPU"))
    assert set(FIXES) == set(FIXES_SHORT) == set(CLASSES)


def test_absent_figures_are_named_not_zeroed() -> None:
    verdict = classify(None, 0.5, compute_name="compute SOL", memory_name="memory SOL")
    assert verdict.reason == "compute SOL absent"


def test_thresholds_are_configurable_and_validated() -> None:
    config = load_config(
        None, ["profile.thresholds.memory_bound_memory_above=0.6", "profile.thresholds.latency_bound_below=0.3"]
    )
    thresholds = Thresholds(**config.profile.thresholds.model_dump())
    assert classify(0.10, 0.65).cls == "balanced"
    assert classify(0.10, 0.65, thresholds).cls == "memory_bound"
    with pytest.raises(UserError, match="must not exceed compute_bound_compute_above"):
        load_config(None, ["profile.thresholds.memory_bound_compute_below=0.9"])
    with pytest.raises(UserError, match="less than or equal to 1"):
        load_config(None, ["profile.thresholds.latency_bound_below=60"])
