"""The reference precision policy (FSDP2's MixedPrecisionPolicy: bf16 params, fp32 reduce) for real on
2 gloo ranks, against fp32; and the one rule for the device defaults (preset and precision) that
`train`, `profile` and the Make targets share (fleetbench/train/defaults.py).

The two 50-step runs of the tiny preset take about 2 minutes on 2 cores (slow); the rest is instant.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from fleetbench.cli import main as cli_main
from fleetbench.config.loader import load_config
from fleetbench.config.train import PRESETS, TrainConfig
from fleetbench.devices import DeviceInfo
from fleetbench.results.store import read_records
from fleetbench.train.defaults import choose_precision, choose_preset
from fleetbench.train.history import read_history
from fleetbench.train.parallel import compute_dtype
from fleetbench.train.plan import resolve_plan

REPO = Path(__file__).resolve().parents[1]
STEPS = 50
TINY = PRESETS["tiny"]
# Measured (2 gloo ranks, 1 thread each, 2-core AMD EPYC with avx512_bf16, torch 2.13.0): the bf16
# curve differs from fp32 by at most 0.0060 in loss (step 11), 0.16 % relative; final losses 2.52256
# and 2.52282. The bounds leave 8x and 12x margin for other CPUs' bf16 kernels.
MAX_ABS_GAP = 0.05
MAX_REL_GAP = 0.02
MIN_GAP = 1e-5  # bf16 rounding must show: equal curves would mean the policy was not applied

CUDA = DeviceInfo(torch.device("cuda", 0), "cuda", "NVIDIA H100 80GB HBM3")  # a value: no GPU needed
CPU = DeviceInfo(torch.device("cpu"), "cpu", "cpu")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny preset for 50 steps on 2 gloo ranks, --dtype fp32 and --dtype bf16; step 2 traced."""
    results = tmp_path_factory.mktemp("precision")
    for dtype in ("fp32", "bf16"):
        done = subprocess.run(
            [
                *(sys.executable, "-m", "fleetbench", "train", "--results-dir", str(results), "--run-id", dtype),
                *("--device", "cpu", "--nproc", "2", "--steps", str(STEPS), "--dtype", dtype),
                *("--profile-steps", "2:2", "--set", "train.peak_flops=1e11", "--set", "train.plot=false"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return results


def losses(run_dir: Path) -> list[float]:
    return [row.loss for row in read_history(run_dir)]


def collective_dtypes(run_dir: Path, rank: int) -> dict[str, set[str]]:
    """The input dtypes of FSDP2's collectives as the profiler recorded them on `rank`."""
    (path,) = (run_dir / "profile").glob(f"rank-{rank}.*.pt.trace.json.gz")
    seen: dict[str, set[str]] = defaultdict(set)
    for event in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
        if event.get("name") in ("c10d::_allgather_base_", "c10d::_reduce_scatter_base_"):
            seen[event["name"]].add(event["args"]["Input type"][0])
    return seen


@pytest.mark.slow
def test_bf16_loss_curve_stays_within_the_tolerance_of_fp32(runs: Path) -> None:
    fp32, bf16 = losses(runs / "fp32"), losses(runs / "bf16")
    assert len(fp32) == len(bf16) == STEPS
    gaps = [abs(a - b) for a, b in zip(fp32, bf16, strict=True)]
    relative = [gap / abs(a) for gap, a in zip(gaps, fp32, strict=True)]
    assert max(gaps) <= MAX_ABS_GAP, (max(gaps), gaps.index(max(gaps)) + 1)
    assert max(relative) <= MAX_REL_GAP
    assert max(gaps) >= MIN_GAP
    for curve in (fp32, bf16):  # both learn: the byte-level loss falls from ln(256) = 5.5+ to about 2.5
        assert curve[0] > 5.5 and curve[-1] < 3.0


@pytest.mark.slow
def test_the_forward_sees_all_gathered_bf16_weights(runs: Path) -> None:
    """Every rank's first forward, seen by pre-hooks: FSDP2 handed the layers whole bf16 weights."""
    expected = {
        "bf16": "bfloat16",
        "fp32": "float32",
    }
    shapes = {"output": [TINY.vocab_size, TINY.dim], "layers.0.ffn.0": [TINY.ffn_dim, TINY.dim]}
    for run, dtype in expected.items():
        records = [r for r in read_records(runs / run) if r.status == "ok"]
        assert sorted(r.rank for r in records) == [0, 1]
        for record in records:
            policy = record.summary["precision"]
            assert (policy["param_dtype"], policy["reduce_dtype"]) == (dtype, "float32")
            assert policy["why"] == f"train.mixed_precision={'true' if run == 'bf16' else 'false'}"
            for layer, shape in shapes.items():
                seen = policy["observed"][layer]
                # Whole (all-gathered) weights: each rank's shard holds half the rows.
                assert seen == {
                    "weight_dtype": dtype,
                    "weight_unsharded": True,
                    "weight_shape": shape,
                    "input_dtype": dtype,
                }, (run, record.rank, layer)


@pytest.mark.slow
def test_gloo_carries_the_bf16_all_gather_and_the_fp32_reduce_scatter(runs: Path) -> None:
    """The profiler's record of the collectives' inputs: gloo took both forms, nothing was cast around it."""
    for rank in (0, 1):
        bf16 = collective_dtypes(runs / "bf16", rank)
        assert bf16["c10d::_allgather_base_"] == {"c10::BFloat16"}
        assert bf16["c10d::_reduce_scatter_base_"] == {"float"}
        fp32 = collective_dtypes(runs / "fp32", rank)
        assert fp32["c10d::_allgather_base_"] == {"float"}
        assert fp32["c10d::_reduce_scatter_base_"] == {"float"}


# --- the one rule for defaults ----------------------------------------------------------------------
def test_cuda_defaults_through_the_trainer() -> None:
    """What a GPU rank resolves, from a CUDA DeviceInfo: seed, bf16 params and fp32 reduce under FSDP2."""
    plan = resolve_plan(TrainConfig(), world_size=8, device=CUDA)
    assert (plan.preset, plan.preset_why) == ("seed", "automatic: seed on CUDA")
    assert compute_dtype(plan) == torch.bfloat16  # the plan resolves the policy once, for the device
    policy = plan.precision
    assert (policy.param_dtype, policy.reduce_dtype, policy.why) == (
        "bfloat16",
        "float32",
        "automatic: bf16 on CUDA under FSDP2",
    )
    unsharded = resolve_plan(TrainConfig(fsdp=False), world_size=1, device=CUDA)
    assert compute_dtype(unsharded) == torch.float32  # no MixedPrecisionPolicy without FSDP2
    assert compute_dtype(resolve_plan(TrainConfig(mixed_precision=False), world_size=8, device=CUDA)) == torch.float32
    explicit = resolve_plan(TrainConfig(preset="small"), world_size=1, device=CUDA)
    assert (explicit.preset, explicit.preset_why) == ("small", "train.preset=small")


def test_cpu_defaults_through_the_trainer() -> None:
    plan = resolve_plan(TrainConfig(), world_size=2, device=CPU)
    assert (plan.preset, plan.preset_why) == ("tiny", "automatic: tiny on CPU")
    assert resolve_plan(TrainConfig(), world_size=2).preset == "tiny"  # a plan made without a device
    assert compute_dtype(plan) == torch.float32
    assert compute_dtype(resolve_plan(TrainConfig(mixed_precision=True), world_size=2, device=CPU)) == torch.bfloat16
    assert resolve_plan(TrainConfig(preset="seed"), world_size=2, device=CPU).preset == "seed"


@pytest.mark.parametrize(("name", "value"), [("bf16", True), ("fp32", False), ("auto", None)])
def test_dtype_flag_names_the_policy(name: str, value: bool | None) -> None:
    assert load_config(None, [], {"train.mixed_precision": (name, "--dtype")}).train.mixed_precision is value
    # --dtype auto overrides a config file's choice back to the device default.
    assert (
        load_config(
            None, ["train.mixed_precision=true"], {"train.mixed_precision": (name, "--dtype")}
        ).train.mixed_precision
        is value
    )


def test_bad_dtype_flag_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli_main.main(["train", "--results-dir", str(tmp_path), "--dtype", "fp16"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "argument --dtype: invalid choice: 'fp16' (choose from 'bf16', 'fp32', 'auto')" in line


def test_profile_takes_the_trainers_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleetbench profile`'s train workload asks the same two functions (a changed rule reaches it)."""
    from fleetbench.config.schema import FleetbenchConfig
    from fleetbench.profile.workloads import train_workload
    from fleetbench.train import defaults

    config = FleetbenchConfig.model_validate({"profile": {"train_layers": 1}})
    workload = train_workload(config, CPU)
    assert (workload.details["preset"], workload.dtype) == ("tiny", "float32")
    asked: list[tuple[object, ...]] = []

    def preset_rule(preset: str | None, backend: str) -> defaults.PresetChoice:
        asked.append(("preset", preset, backend))
        return defaults.PresetChoice("tiny", "patched")

    def precision_rule(mixed: bool | None, fsdp: bool, backend: str) -> defaults.Precision:
        asked.append(("precision", mixed, fsdp, backend))
        return choose_precision(mixed, fsdp, "cuda")  # the CUDA answer, on the CPU

    monkeypatch.setattr(defaults, "choose_preset", preset_rule)
    monkeypatch.setattr(defaults, "choose_precision", precision_rule)
    assert train_workload(config, CPU).dtype == "bfloat16"
    assert asked == [("preset", None, "cpu"), ("precision", None, True, "cpu")]
    assert choose_preset(None, "cuda").name == "seed"


def make_dry_run(*args: str) -> str:
    """The `fleetbench train` line `make -n` prints for a target (nothing runs)."""
    done = subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    (line,) = [line for line in done.stdout.splitlines() if "fleetbench train" in line]
    return line


def test_make_targets_leave_preset_and_dtype_to_the_rule() -> None:
    for target in ("train", "train-4gpu"):
        line = make_dry_run(target)
        assert "--preset" not in line and "--dtype" not in line, line
    assert "--device cuda --nproc 4" in make_dry_run("train-4gpu")
    line = make_dry_run("train", "NPROC=4", "TRAIN_ARGS=--hsdp 2")
    assert "--device cpu --nproc 4" in line and line.endswith("--hsdp 2"), line
    line = make_dry_run("train", "PRESET=small", "DTYPE=bf16")
    assert "--preset small --dtype bf16" in line, line
