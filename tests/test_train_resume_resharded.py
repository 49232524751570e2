"""A checkpoint written by 2 ranks resumes on 1 and on 4 (the cluster lost a node, or gained two).

torch.distributed.checkpoint reshards the DTensor state (model and AdamW moments) onto the new mesh,
and the data is a function of (seed, step, sample index) split by rank, so with the same
`train.global_batch_size` step s trains on the same global batch whatever the number of ranks. The
resumed runs continue the uninterrupted 2-rank run's losses and end at its weights, up to the
floating-point order of the gradient reductions (measured: relative loss difference <= 1e-7,
weights within 3e-6). About 45 s on 2 cores (the 4 ranks share them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from fleetbench.config.train import TrainConfig
from fleetbench.errors import UserError
from fleetbench.results.store import read_records
from fleetbench.train.history import read_history
from fleetbench.train.plan import resolve_plan

STEPS, SAVED_AT, GLOBAL_BATCH = 6, 3, 8
MODEL = ("dim=64", "layers=2", "heads=4", "ffn_dim=256", "seq_len=64", "lr=1e-3", "warmup_steps=2")
COMMON = (*MODEL, f"global_batch_size={GLOBAL_BATCH}", "threads=1", "peak_flops=1e11", "plot=false")
COMMON += (f"checkpoint_every={SAVED_AT}", "keep_checkpoints=0")


def train(results: Path, run_id: str, nproc: int, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "fleetbench", "train", "--results-dir", str(results), "--run-id", run_id,
           "--device", "cpu", "--nproc", str(nproc), "--steps", str(STEPS),
           *(f"--set=train.{item}" for item in COMMON), *extra]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def weights(folder: Path, scratch: Path) -> dict[str, torch.Tensor]:
    target = scratch / f"{folder.parent.parent.name}-{folder.name}.pt"
    dcp_to_torch_save(folder, target)
    model: dict[str, torch.Tensor] = torch.load(target, weights_only=False)["model"]
    return model


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted 2-rank run, checkpoints after steps 3 and 6."""
    results = tmp_path_factory.mktemp("straight")
    train(results, "straight", 2)
    return results / "straight"


@pytest.mark.slow
@pytest.mark.parametrize("nproc", [1, 4])
def test_a_two_rank_checkpoint_resumes_on_another_world_size(straight: Path, tmp_path: Path, nproc: int) -> None:
    # What a node left behind: the checkpoint after step 3, in the folder the new job resumes from.
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    shutil.copytree(straight / "checkpoints" / f"step_{SAVED_AT:08d}", checkpoints / f"step_{SAVED_AT:08d}")
    done = train(tmp_path, "resumed", nproc, "--resume", f"--set=train.checkpoint_dir={checkpoints}")
    assert f"at step {SAVED_AT}" in done.stderr
    assert "the checkpoint used" not in done.stderr  # the global batch did not change

    reference = {row.step: row.loss for row in read_history(straight)}
    resumed = {row.step: row.loss for row in read_history(tmp_path / "resumed")}
    assert sorted(resumed) == list(range(SAVED_AT + 1, STEPS + 1))
    for step, loss in resumed.items():
        assert loss == pytest.approx(reference[step], rel=1e-5), step
    records = read_records(tmp_path / "resumed")
    assert sorted(r.rank for r in records) == list(range(nproc))
    assert all(r.summary["world_size"] == nproc and r.summary["resumed_from_step"] == SAVED_AT for r in records)
    assert all(r.summary["plan"]["batch_size"] == GLOBAL_BATCH // nproc for r in records)

    final = f"step_{STEPS:08d}"
    ours = weights(checkpoints / final, tmp_path)
    theirs = weights(straight / "checkpoints" / final, tmp_path)
    assert max_difference(ours, theirs) < 1e-5
    # Not trivially equal: the three resumed steps moved the weights far more than that.
    assert max_difference(weights(checkpoints / f"step_{SAVED_AT:08d}", tmp_path), theirs) > 1e-3


@pytest.mark.parametrize(("world", "per_rank"), [(1, 8), (2, 4), (4, 2), (8, 1)])
def test_the_global_batch_splits_over_any_world_size(world: int, per_rank: int) -> None:
    plan = resolve_plan(TrainConfig(preset="tiny", global_batch_size=8), world)
    assert (plan.batch_size, plan.global_batch) == (per_rank, 8)


def test_a_global_batch_that_does_not_split_or_a_second_batch_size_is_one_line() -> None:
    with pytest.raises(
        UserError, match=r"global_batch_size=8 does not split evenly over 3 ranks; accepted: a multiple of 3"
    ):
        resolve_plan(TrainConfig(preset="tiny", global_batch_size=8), 3)
    with pytest.raises(UserError, match=r"batch_size=4 \(per rank\) and train.global_batch_size=8 .* both set"):
        resolve_plan(TrainConfig(preset="tiny", batch_size=4, global_batch_size=8), 2)
