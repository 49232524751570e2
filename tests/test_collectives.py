"""`fleetbench collectives`: nccl-tests' formulas, the sweep's sizes, and real torchrun runs on 2 and 4 gloo ranks."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from badinput import BadInput, check
from conftest import run_cli
from fleetbench.collectives.formulas import algorithm_bandwidth, bus_bandwidth, bus_factor, element_count, sweep
from fleetbench.collectives.measure import plan
from fleetbench.config.collectives import COLLECTIVE_OPS
from fleetbench.results.store import read_records


@pytest.mark.parametrize("ranks", [2, 3, 4, 8, 16, 64])
def test_bus_factors_are_nccl_tests_published_ones(ranks: int) -> None:
    # nccl-tests doc/PERFORMANCE.md, "Summary": AllReduce 2*(n-1)/n; ReduceScatter, AllGather, AlltoAll (n-1)/n.
    assert bus_factor("all_reduce", ranks) == Fraction(2 * (ranks - 1), ranks)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert bus_factor(op, ranks) == Fraction(ranks - 1, ranks)


def test_bandwidths_worked_by_hand() -> None:
    # 1 GiB all-reduced on 8 ranks in 10 ms: algbw = 2^30 / 0.01 B/s; busbw = algbw * 14/8.
    assert algorithm_bandwidth(1 << 30, 0.01) == pytest.approx(1.073741824e11)
    assert bus_bandwidth("all_reduce", 8, 1 << 30, 0.01) == pytest.approx(1.879048192e11)
    # 64 MiB all-gathered (the whole array) on 4 ranks in 2 ms: busbw = algbw * 3/4.
    assert bus_bandwidth("all_gather", 4, 64 << 20, 0.002) == pytest.approx((64 << 20) / 0.002 * 0.75)
    # One rank: nothing crosses a link.
    assert bus_bandwidth("all_to_all", 1, 1024, 1.0) == 0
    with pytest.raises(ValueError, match="positive"):
        algorithm_bandwidth(8, 0.0)


def test_sweep_is_nccl_tests_b8_e1g_f2() -> None:
    sizes = sweep(8, 1 << 30, 2)
    assert sizes[0] == 8 and sizes[-1] == 1 << 30 and len(sizes) == 28
    assert sweep(8, 100, 4) == [8, 32]
    assert sweep(1024, 1024, 2) == [1024]


def test_sizes_round_to_what_every_rank_can_share() -> None:
    # float32 on 4 ranks: all-gather of 8 B (2 elements) needs at least one element per rank.
    assert element_count("all_gather", 8, 4, 4) == 4
    assert element_count("all_reduce", 8, 4, 4) == 2
    assert element_count("reduce_scatter", 100, 4, 4) == 24  # 25 elements, down to a multiple of 4
    # Sizes that round to the same count are measured once.
    pairs = plan(["all_gather"], [8, 16, 32], 4, 4)
    assert pairs == [("all_gather", 4), ("all_gather", 8)]


def sweep_run(tmp_path: Path, ranks: int, *extra: str) -> tuple[str, Path]:
    results = tmp_path / "results"
    done = run_cli(
        "collectives",
        "--results-dir",
        str(results),
        "--run-id",
        f"c{ranks}",
        "--device",
        "cpu",
        "--nproc",
        str(ranks),
        "--iters",
        "2",
        "--set",
        "collectives.warmup_iters=1",
        *extra,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr, results / f"c{ranks}"  # the CLI's console writes to stderr


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_gloo_sweep_prints_and_records_bus_bandwidth_by_size(tmp_path: Path, ranks: int) -> None:
    out, run_dir = sweep_run(tmp_path, ranks, "--min-bytes", "64", "--max-bytes", "1024")
    assert f"collectives on {ranks} ranks (cpu" in out
    assert "busbw" in out and "reduce-scatter" in out and "avg bus bandwidth all-reduce" in out
    assert "Warning" not in out
    (record,) = read_records(run_dir)
    assert record.benchmark == "collectives" and record.status == "ok" and record.rank == 0
    rows = record.summary["rows"]
    sizes = [64, 128, 256, 512, 1024]
    assert [(row["op"], row["size_bytes"]) for row in rows] == [(op, s) for op in COLLECTIVE_OPS for s in sizes]
    for row in rows:
        assert row["ranks"] == ranks and 0 < row["seconds"] <= row["slowest_rank_seconds"]
        assert row["algbw_bytes_per_second"] == pytest.approx(row["size_bytes"] / row["seconds"])
        factor = float(bus_factor(row["op"], ranks))
        assert row["busbw_bytes_per_second"] == pytest.approx(row["algbw_bytes_per_second"] * factor)
    chart = run_dir / record.summary["chart"]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    headline = {(h.metric, h.labels["op"], h.labels["size"]) for h in record.headline}
    for op in COLLECTIVE_OPS:
        assert ("fleetbench_collective_bus_bytes_per_second", op, "1024") in headline
        assert ("fleetbench_collective_op_seconds", op, "64") in headline
    exposition = (run_dir / "fleetbench_collectives_rank0.prom").read_text()
    assert "fleetbench_collective_bus_bytes_per_second{" in exposition and f'ranks="{ranks}"' in exposition
    assert json.loads(json.dumps(record.config))["ops"] == list(COLLECTIVE_OPS)


CASES = [
    BadInput(
        "collectives-range-upside-down",
        ("collectives", "--device", "cpu", "--min-bytes", "4096", "--max-bytes", "8"),
        "min_bytes 4096 is above max_bytes 8",
    ),
    BadInput("collectives-op-unknown", ("collectives", "--device", "cpu", "--ops", "broadcast"), "collectives.ops"),
    BadInput("collectives-op-twice", ("collectives", "--ops", "all-reduce,all_reduce"), "operations must be unique"),
    BadInput("collectives-one-rank", ("collectives", "--device", "cpu", "--nproc", "1"), "at least 2 ranks"),
    BadInput("collectives-size-too-small", ("collectives", "--min-bytes", "4"), "collectives.min_bytes"),
    BadInput("collectives-size-above-1gib", ("collectives", "--max-bytes", str(2 << 30)), "collectives.max_bytes"),
    BadInput(
        "collectives-nodes-without-endpoint",
        ("collectives", "--device", "cpu", "--nnodes", "2"),
        "needs --rdzv-endpoint HOST:PORT",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line(case: BadInput, tmp_path: Path) -> None:
    check(case, tmp_path / "work", tmp_path / "home")


def test_no_gpu_is_one_line(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    check(
        BadInput("collectives-cuda-without-gpu", ("collectives", "--device", "cuda"), "torch sees no GPU"),
        tmp_path / "work",
        tmp_path / "home",
    )
