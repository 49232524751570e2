"""The rule of thumb: memory-bound, compute-bound, and the cases in between, with configurable thresholds."""

from __future__ import annotations

import pytest

from fleetbench.config import load_config
from fleetbench.errors import UserError
from fleetbench.profile.classify import CLASSES, FIXES, FIXES_SHORT, Thresholds, classify, classify_traffic


@pytest.mark.parametrize(
    ("compute", "memory", "expected"),
    [
        (0.10, 0.90, "memory_bound"),  # LayerNorm / Softmax / decode: tensor cores idle, HBM saturated
        (0.90, 0.30, "compute_bound"),  # large-batch GEMM / prefill
        (0.20, 0.30, "latency_bound"),  # both low: under-utilised
        (0.85, 0.85, "balanced"),  # both busy
        (0.40, 0.86, "balanced"),  # memory leads, but compute is not idle
        (0.25, 0.90, "balanced"),  # compute exactly at the boundary is not "below" it
        (0.05, 1.69, "cache_resident"),  # above the DRAM roof: the data came from caches
        (0.05, 1.00, "memory_bound"),  # at the roof is still DRAM
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


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (0.90, "memory_bound"),
        (0.40, "latency_bound"),
        (0.70, "latency_bound"),
        (1.12, "cache_resident"),
        (None, "unknown"),
    ],
)
def test_bytes_only_ops_are_classed_by_their_bytes(memory: float | None, expected: str) -> None:
    verdict = classify_traffic(memory)
    assert verdict.cls == expected and verdict.fix == FIXES[expected]
    if memory is not None:
        assert "no FLOPs counted" in verdict.reason


def test_cache_resident_has_a_real_fix() -> None:
    assert all(word in FIXES["cache_resident"] for word in ("cache", "fuse", "torch.compile", "peak_copy_mib"))
    assert "torch.compile" in FIXES_SHORT["cache_resident"]


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
