"""`fleetbench tune`: candidates from a run's verdicts, each measured against the base; the best config written.

The rules are checked on verdicts built here (each rule's input and what it proposes); the whole command
on a real train run of this machine (2 gloo ranks of a small model), its candidates measured in
rounds of separate processes and judged with compare's statistics, the written config loaded back
as `fleetbench train --config` loads it. Bad input: one line, exit 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleetbench.config.loader import load_config
from fleetbench.train.tune.candidates import Verdicts, candidates

SMALL = ("dim=64", "layers=2", "heads=4", "ffn_dim=128", "seq_len=64", "batch_size=8", "threads=1",
         "peak_flops=1e11", "plot=false")  # fmt: skip


def cli(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fleetbench", *args], capture_output=True, text=True, timeout=timeout)


def verdicts(**train: object) -> Verdicts:
    return Verdicts(train={"batch_size": 8, **train}, backend="cpu", device="AMD EPYC", world=2)


def test_an_eager_fsdp_run_gets_compile_no_reshard_and_a_bigger_batch() -> None:
    found = {c.name: c for c in candidates(verdicts(threads=2), usable_cores=2)}
    assert {"compile", "no-reshard", "batch-x2"} <= set(found)
    assert found["batch-x2"].overrides == ("train.batch_size=16",)
    assert found["threads"].overrides == ("train.threads=1",)  # 2 cores over 2 ranks: one thread each
    assert all(c.why for c in found.values())


def test_the_rules_follow_the_verdicts() -> None:
    done = {c.name for c in candidates(verdicts(compile=True, reshard_after_forward=False), usable_cores=2)}
    assert "compile" not in done and "no-reshard" not in done
    ac = {c.name: c for c in candidates(verdicts(activation_checkpointing=True), usable_cores=2)}
    assert ac["selective-ac"].overrides == ("train.ac_policy=selective_op",)
    tight = verdicts()
    tight.memory_peak_bytes, tight.memory_cap_bytes = 9e9, 10e9
    named = {c.name: c for c in candidates(tight, usable_cores=2)}
    assert "batch-x2" not in named and "accumulate-x2" in named  # no room for a bigger batch
    assert named["selective-ac"].overrides == ("train.activation_checkpointing=true", "train.ac_policy=selective_op")
    waiting = verdicts(threads=2)
    waiting.waiting_share = 0.5
    assert {c.name: c.overrides for c in candidates(waiting, usable_cores=2)}["fewer-threads"] == ("train.threads=1",)
    profiled = verdicts()
    profiled.classes = {"latency_bound": 0.7, "compute_bound": 0.3}
    assert "70% of the profiled time is latency-bound" in {c.name: c.why for c in candidates(profiled)}["batch-x2"]


def test_float8_only_for_compute_bound_gemms_on_an_fp8_gpu() -> None:
    h100 = Verdicts(train={"batch_size": 8}, backend="cuda", device="NVIDIA H100 80GB HBM3", world=1, compute_gemm=True)
    assert [c.overrides for c in candidates(h100) if c.name == "float8"] == [("train.float8=tensorwise",)]
    a100 = Verdicts(train={"batch_size": 8}, backend="cuda", device="NVIDIA A100-SXM4-80GB", world=1, compute_gemm=True)
    assert "float8" not in {c.name for c in candidates(a100)}
    h100.compute_gemm = False
    assert "float8" not in {c.name for c in candidates(h100)}


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    done = cli("tune", "nosuchrun", "--results-dir", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "run 'nosuchrun' not found" in done.stderr
    done = cli("tune", "x", "--rounds", "2", "--results-dir", str(tmp_path))
    assert done.returncode == 2 and "--rounds 2" in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tune_measures_the_candidates_of_a_real_run_and_writes_a_config_train_accepts(tmp_path: Path) -> None:
    """A 2-rank train run and a profile of the train workload; tune proposes >= 3 candidates from their
    verdicts and measures one (3 rounds: 6 train processes of
    10-100 s each, by the machine's load; compile is left out here, its inductor build alone takes minutes
    on 2 cores; `fleetbench tune` measures it like any other, see docs/tune.md)."""
    done = cli("train", "--results-dir", str(tmp_path), "--run-id", "base", "--nproc", "2", "--device", "cpu",
               "--preset", "tiny", "--steps", "4", *(f"--set=train.{s}" for s in SMALL))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    done = cli("profile", "--results-dir", str(tmp_path), "--run-id", "prof", "--workload", "train", "--device", "cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "tuned.yaml"
    done = cli("tune", "base", "prof", "--results-dir", str(tmp_path), "--rounds", "3", "--only", "batch-x2",
               "--out", str(out), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["verdicts_from"] == ["train base", "profile prof"]
    whys = {c["name"]: c["why"] for c in outcome["proposed"]}
    assert "of the profiled time is" in whys["compile"]  # the profile's roofline classes, not the default
    proposed = [c["name"] for c in outcome["proposed"]]  # what the verdicts proposed, before --only
    assert len(proposed) >= 3 and {"compile", "no-reshard", "batch-x2"} <= set(proposed)
    assert "[not measured: --only]" in done.stderr
    assert [c["name"] for c in outcome["candidates"]] == ["batch-x2"]
    assert len(outcome["base"]["samples"]) == 3
    for c in outcome["candidates"]:
        assert len(c["samples"]) == 3 and c["verdict"] in ("better", "worse", "no significant change")
        assert c["interval_pct"] is not None and c["interval_pct"][0] <= c["change_pct"] <= c["interval_pct"][1]
    written = yaml.safe_load(out.read_text())
    config = load_config(out, [])  # what `fleetbench train --config` loads
    assert config.train.dim == 64 and written["train"]["layers"] == 2
    if outcome["best"] == "batch-x2":
        assert config.train.batch_size == 16 and outcome["candidates"][0]["verdict"] == "better"
    else:
        assert outcome["best"] == "base" and config.train.batch_size == 8
