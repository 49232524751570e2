"""The CPU peak MFU divides by is agreed by all ranks, whatever each rank's machine has stored.

Two gloo ranks in two processes stand for two machines: one has a peak stored under the results root,
the other none (its first run there, as on a Slurm node a job had not used before). Both must take
part in the same collectives and leave with one peak; before, the rank without one measured and waited
in an all-reduce that the other never joined, and the job hung.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from fleetbench.train.flops import Peak, store_cpu_peak, stored_cpu_peak

STORED = 1.0e15  # a petaflop per second: above any float32 peak one CPU thread measures (AVX-512 or AMX)


def _rank(rank: int, store: str, calibration: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    from fleetbench.train.loop import agreed_cpu_peak

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    try:
        peak = agreed_cpu_peak("float32", 1, Path(calibration) / f"machine-{rank}.json", local_rank=0)
        Path(out, f"rank-{rank}").write_text(f"{peak.flop_per_second!r}\n{peak.source}\n")
    finally:
        dist.destroy_process_group()


def _agree(tmp_path: Path) -> list[tuple[float, str]]:
    context = multiprocessing.get_context("spawn")
    ranks = [
        context.Process(target=_rank, args=(rank, str(tmp_path / "store"), str(tmp_path / "cal"), str(tmp_path)))
        for rank in (0, 1)
    ]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=120)
        if process.is_alive():
            process.kill()
            pytest.fail("a rank did not finish: the ranks wait on different collectives")
        assert process.exitcode == 0
    out = []
    for rank in (0, 1):
        value, source = (tmp_path / f"rank-{rank}").read_text().splitlines()
        out.append((float(value), source))
    return out


def test_one_machine_with_a_stored_peak_and_one_without_measure_together(tmp_path: Path) -> None:
    (tmp_path / "cal").mkdir()
    store_cpu_peak(tmp_path / "cal" / "machine-0.json", "float32", 1, Peak(STORED, "measured: fp32 matmul"))
    (first, first_source), (second, second_source) = _agree(tmp_path)
    assert first == second < STORED, "both ranks measured and took the best of their measurements"
    assert "best of 2 rank(s)" in first_source and first_source == second_source
    # Each machine now has the agreed peak; the next run reads it on both and measures nothing.
    for rank in (0, 1):
        stored = stored_cpu_peak(tmp_path / "cal" / f"machine-{rank}.json", "float32", 1)
        assert stored is not None and stored.flop_per_second == first
    (again, again_source), (other, _) = _agree(tmp_path)
    assert again == other == first and again_source.startswith("calibrated")
