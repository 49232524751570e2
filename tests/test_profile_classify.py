"""The class rule: NVIDIA's SOLBottleneck rule on compute and memory utilisation, the memory level, the fixes."""

from __future__ import annotations

import pytest

from fleetbench.config import load_config
from fleetbench.errors import UserError
from fleetbench.profile.classify import (
    CLASSES,
    FIXES,
    FIXES_SHORT,
    LEVEL_FIXES,
    LEVEL_FIXES_SHORT,
    LEVELS,
    Thresholds,
    bound_class,
    classify,
    classify_traffic,
    with_level,
)


@pytest.mark.parametrize(
    ("compute", "memory", "expected", "case"),
    [
        # the extremes of the product brief's table, which the rule classes the same
        (0.10, 0.90, "memory_bound", "High Throughput"),  # LayerNorm / Softmax / decode: HBM saturated
        (0.90, 0.30, "compute_bound", "High Throughput"),  # large-batch GEMM / prefill
        (0.20, 0.30, "latency_bound", "Latency Issue"),  # both low: under-utilised
        # at or above 80 % of either unit: that unit is the bound, whatever the other does
        (0.40, 0.86, "memory_bound", "High Throughput"),
        (0.50, 0.91, "memory_bound", "High Throughput"),  # the 80-91 % memory with 29-50 % compute
        (0.25, 0.90, "memory_bound", "High Throughput"),  # compute above 25 % changes nothing
        (0.80, 0.10, "compute_bound", "High Throughput"),  # 80 % itself is high
        (0.85, 0.85, "compute_bound", "High Throughput"),  # both high: NVIDIA's tie goes to compute
        (0.83, 0.90, "memory_bound", "High Throughput"),
        # between 60 and 80 %: a unit 10 points ahead is the bound, else balanced
        (0.14, 0.77, "memory_bound", "High Memory Throughput"),
        (0.786, 0.415, "compute_bound", "High Compute Throughput"),
        (0.70, 0.60, "compute_bound", "High Compute Throughput"),  # 10 points exactly (0.7 - 0.6 < 0.1 in floats)
        (0.622, 0.589, "balanced", "Balanced Throughput"),
        (0.6835, 0.6835, "balanced", "Balanced Throughput"),
        (0.60, 0.55, "balanced", "Balanced Throughput"),  # 60 % itself is not below 60 %
        (0.599, 0.599, "latency_bound", "Latency Issue"),
    ],
)
def test_the_rule_is_nvidias_solbottleneck(compute: float, memory: float, expected: str, case: str) -> None:
    assert bound_class(compute, memory) == (expected, case)
    verdict = classify(compute, memory)
    assert verdict.cls == expected and case in verdict.reason
    assert verdict.fix == FIXES[expected]


@pytest.mark.parametrize(
    ("compute", "memory", "expected"),
    [
        (0.05, 1.69, "cache_resident"),  # above the DRAM roof: the data came from caches
        (0.05, 1.00, "memory_bound"),  # at the roof is still DRAM
        (None, 0.90, "unknown"),
        (0.90, None, "unknown"),
    ],
)
def test_the_roof_and_absent_figures(compute: float | None, memory: float | None, expected: str) -> None:
    verdict = classify(compute, memory)
    assert verdict.cls == expected
    assert verdict.fix == FIXES[expected]


def test_the_extremes_are_named_in_the_reason() -> None:
    assert "memory-bound extreme" in classify(0.10, 0.90).reason
    assert "compute-bound extreme" in classify(0.90, 0.30).reason
    assert "extreme" not in classify(0.50, 0.91).reason


def test_fixes_name_what_the_brief_asks_for() -> None:
    assert all(word in FIXES["memory_bound"] for word in ("fus", "Triton", "torch.compile", "FP8/INT4", "batch"))
    assert all(word in FIXES["compute_bound"] for word in ("busiest", "redundant", "64/128", "only on GPUs with FP8"))
    assert set(FIXES) == set(FIXES_SHORT) == set(CLASSES)


def test_each_memory_level_has_a_fix_that_fits_it() -> None:
    assert set(LEVEL_FIXES) == set(LEVEL_FIXES_SHORT) == set(LEVELS)
    assert "HBM" in LEVEL_FIXES["DRAM"] and "FP8" in LEVEL_FIXES["DRAM"]
    assert all(word in LEVEL_FIXES["L1"] for word in ("bank conflicts", "coalesce", "vector"))
    assert all(word in LEVEL_FIXES["L2"] for word in ("tile", "locality", "resident"))
    assert "HBM" not in LEVEL_FIXES["L1"] + LEVEL_FIXES["L2"] and "FP8" not in LEVEL_FIXES["L1"]
    l1 = with_level(classify(0.0003, 0.996), "L1", "L1 99.9%")
    assert l1.level == "L1" and l1.fix == LEVEL_FIXES["L1"] and l1.short == LEVEL_FIXES_SHORT["L1"]
    assert "L1/TEX and shared memory (L1 99.9%)" in l1.reason
    balanced = with_level(classify(0.6835, 0.6835), "L1")
    assert balanced.level == "L1" and LEVEL_FIXES["L1"] in balanced.fix
    compute = with_level(classify(0.9, 0.1), "L2")  # no memory level limits a compute-bound kernel
    assert compute.level is None and compute.fix == FIXES["compute_bound"]


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (0.90, "memory_bound"),
        (0.40, "latency_bound"),
        (0.70, "memory_bound"),  # the rule with compute 0: 70 points ahead of it
        (0.59, "latency_bound"),
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


def test_thresholds_are_nvidias_configurable_and_validated() -> None:
    assert Thresholds().nvidias() and (Thresholds().high_throughput_at, Thresholds().latency_bound_below) == (0.8, 0.6)
    config = load_config(
        None, ["profile.thresholds.high_throughput_at=0.7", "profile.thresholds.latency_bound_below=0.3"]
    )
    thresholds = Thresholds(**config.profile.thresholds.model_dump())
    assert not thresholds.nvidias()
    assert classify(0.10, 0.72).cls == "memory_bound"  # leads by 62 points
    assert classify(0.65, 0.72).cls == "balanced"
    assert classify(0.65, 0.72, thresholds).cls == "memory_bound"  # 0.72 is high at 0.7
    assert classify(0.4, 0.5, thresholds).cls == "memory_bound"  # no longer latency below 0.3
    with pytest.raises(UserError, match="must not exceed high_throughput_at"):
        load_config(None, ["profile.thresholds.latency_bound_below=0.9"])
    with pytest.raises(UserError, match="less than or equal to 1"):
        load_config(None, ["profile.thresholds.latency_bound_below=60"])
    with pytest.raises(UserError, match=r"compute_bound_compute_above: replaced .* high_throughput_at"):
        load_config(None, ["profile.thresholds.compute_bound_compute_above=0.7"])
