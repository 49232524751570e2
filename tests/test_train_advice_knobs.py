"""The trainer knobs the advice names: float8 (refused where the GPU table gives no FP8), selective op-level
activation checkpointing, gradient accumulation, warmup + cosine learning rate; each recorded in the
record's `summary.knobs`.

Real runs of the CLI on the CPU (one process, a small model) and the block itself under autograd; the
float8 path itself needs an FP8 GPU: scripts/gpu-check.sh's float8 stage runs it.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from fleetbench.devices import DeviceInfo
from fleetbench.results.store import read_records
from fleetbench.train.decoder import Block
from fleetbench.train.defaults import choose_precision
from fleetbench.train.float8 import float8_refusal
from fleetbench.train.llama import LlamaBlock
from fleetbench.train.loop import lr_at
from fleetbench.train.plan import ModelShape, TrainPlan

SMALL = ("dim=64", "layers=2", "heads=4", "ffn_dim=128", "seq_len=32", "threads=1", "peak_flops=1e11", "plot=false")


def train(results: Path, run_id: str, *sets: str, steps: int = 2) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "fleetbench", "train", "--results-dir", str(results), "--run-id", run_id,
           "--nproc", "1", "--device", "cpu", "--preset", "tiny", "--steps", str(steps),
           *(f"--set=train.{item}" for item in (*SMALL, *sets))]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def summary(results: Path, run_id: str) -> dict[str, Any]:
    (record,) = read_records(results / run_id)
    assert record.status == "ok"
    return record.summary


def gpu(name: str) -> DeviceInfo:
    return DeviceInfo(torch.device("cpu"), "cuda", name)  # only its backend and name are read


def test_float8_is_refused_on_the_cpu_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    done = train(tmp_path, "f8", "float8=rowwise")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "train.float8=rowwise" in line and "FP8 tensor cores" in line and "train.float8=off" in line
    assert not (tmp_path / "f8").exists()


@pytest.mark.parametrize(
    ("name", "bf16", "refused"),
    [
        ("NVIDIA H100 80GB HBM3", True, None),
        ("NVIDIA L4", True, None),
        ("NVIDIA A100-SXM4-80GB", True, "A100 80GB SXM has no FP8 tensor cores"),
        ("NVIDIA A10G", True, "A10G has no FP8 tensor cores"),
        ("Tesla T4", True, "T4 has no FP8"),
        ("Some Future GPU", True, "not in the GPU table"),
        ("NVIDIA H100 80GB HBM3", False, "needs train.mixed_precision=bf16"),
    ],
)
def test_float8_runs_only_where_the_gpu_table_gives_fp8(name: str, bf16: bool, refused: str | None) -> None:
    said = float8_refusal("tensorwise", gpu(name), bf16)
    assert (said is None) == (refused is None) and (refused is None or refused in (said or ""))
    assert float8_refusal("off", gpu("Tesla T4"), False) is None


def test_warmup_then_cosine_down_to_the_floor() -> None:
    fp32 = choose_precision(None, True, "cpu")
    plan = TrainPlan("tiny", ModelShape(64, 2, 4, 128, 256), 32, 4, 10, "random", 1e-3, 2, 1, fp32,
                     lr_schedule="cosine", lr_min_ratio=0.1)  # fmt: skip
    lrs = [lr_at(plan, step) for step in range(10)]
    assert lrs[:3] == pytest.approx([5e-4, 1e-3, 1e-3])  # linear warmup, then the peak
    assert all(a > b for a, b in itertools.pairwise(lrs[2:]))  # decays every step
    assert lrs[-1] == pytest.approx(1e-4)  # lr_min_ratio x lr at the last step
    constant = TrainPlan("tiny", plan.shape, 32, 4, 10, "random", 1e-3, 2, 1, fp32)
    assert [lr_at(constant, s) for s in range(2, 10)] == [1e-3] * 8


def _backward_flops_and_grads(block: torch.nn.Module, x: torch.Tensor) -> tuple[int, list[torch.Tensor]]:
    """The matmuls the backward runs (recomputation included) and the parameters' gradients."""
    from torch.utils._python_dispatch import TorchDispatchMode

    matmuls = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)

    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            Count.calls += func in matmuls
            return func(*args, **(kwargs or {}))

    loss = block(x).square().mean()
    with Count():
        loss.backward()
    grads = [p.grad.clone() for p in block.parameters() if p.grad is not None]
    block.zero_grad(set_to_none=True)
    return Count.calls, grads


@pytest.mark.parametrize("kind", [Block, LlamaBlock])
def test_selective_op_checkpointing_recomputes_fewer_matmuls_than_full_with_the_same_gradients(kind: type) -> None:
    torch.manual_seed(0)
    block = kind(ModelShape(64, 1, 4, 128, 256, model="llama" if kind is LlamaBlock else "seed"))
    x = torch.randn(2, 16, 64, requires_grad=True)
    block.activation_checkpointing = False
    plain, reference = _backward_flops_and_grads(block, x)
    block.activation_checkpointing, block.ac_policy = True, "full"
    full, full_grads = _backward_flops_and_grads(block, x)
    block.ac_policy = "selective_op"
    selective, selective_grads = _backward_flops_and_grads(block, x)
    assert plain < selective < full  # selective keeps every second matmul's output: it recomputes the others
    for a, b, c in zip(reference, full_grads, selective_grads, strict=True):
        torch.testing.assert_close(b, a)
        torch.testing.assert_close(c, a)


@pytest.mark.slow
def test_accumulating_two_micro_batches_trains_as_the_double_batch_and_knobs_are_recorded(tmp_path: Path) -> None:
    """2 x batch 2 accumulated sees the same samples as batch 4 (the global batch's indices) and takes the
    same update: the second step's loss matches to float32 rounding. 10-25 s each on 2 loaded cores."""
    assert train(tmp_path, "accum", "batch_size=2", "grad_accum_steps=2", "lr_schedule=cosine").returncode == 0
    assert train(tmp_path, "double", "batch_size=4").returncode == 0
    accum, double = summary(tmp_path, "accum"), summary(tmp_path, "double")
    assert accum["first_loss"] == pytest.approx(double["first_loss"], rel=1e-5)
    assert accum["final_loss"] == pytest.approx(double["final_loss"], rel=1e-4)
    knobs = accum["knobs"]
    assert (knobs["grad_accum_steps"], knobs["lr_schedule"], knobs["float8"]) == (2, "cosine", "off")
    assert accum["plan"]["grad_accum_steps"] == 2 and double["knobs"]["grad_accum_steps"] == 1
