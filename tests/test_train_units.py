"""Unit tests of the trainer's parts: FLOPs and MFU, the peak table, presets, data, memory messages."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import resource
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from fleetbench.catalogue import CATALOGUE, naming_problems
from fleetbench.config.loader import load_config
from fleetbench.config.train import PRESETS, TrainConfig
from fleetbench.devices import DeviceInfo
from fleetbench.errors import UserError
from fleetbench.train.checkpoint import complete_checkpoints, find_resumable_run
from fleetbench.train.data import TokenBatches, text_corpus
from fleetbench.train.decoder import Decoder, init_weights, param_counts
from fleetbench.train.flops import Peak, flops_per_token, mfu, resolve_peak, table_peak
from fleetbench.train.history import HistoryWriter, StepRow, read_history
from fleetbench.train.launch import failure_from_ranks
from fleetbench.train.loop import Interval, Totals
from fleetbench.train.memory import MemoryKnobs, is_out_of_memory, out_of_memory_as, out_of_memory_message
from fleetbench.train.plan import ModelShape, check_launch, check_profile_device, resolve_plan
from fleetbench.train.profiling import PROFILE_DIR, ProfileWindow, StepProfiler, trace_name

SMALL = ModelShape(dim=64, layers=2, heads=4, ffn_dim=256, vocab_size=128)


# --- FLOPs per token and MFU ---------------------------------------------------------------------
def counted_train_flops(shape: ModelShape, batch: int, seq_len: int) -> int:
    """FLOPs of one forward + backward as torch.utils.flop_counter counts them (attention via the math
    kernel, whose matmuls the counter sees; the fused CPU kernel is not in its table)."""
    model = Decoder(shape)
    init_weights(model, seed=0)
    tokens = torch.randint(0, shape.vocab_size, (batch, seq_len + 1), generator=torch.Generator().manual_seed(0))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, shape.vocab_size), tokens[:, 1:].reshape(-1))
        loss.backward()
    return int(counter.get_total_flops())


@pytest.mark.parametrize("seq_len", [16, 48])
def test_flops_formula_matches_flop_counter(seq_len: int) -> None:
    batch = 2
    counted = counted_train_flops(SMALL, batch, seq_len)
    model = Decoder(SMALL)
    weights = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and n != "tok_embeddings.weight")
    attention = 12 * SMALL.layers * SMALL.heads * SMALL.head_dim * seq_len
    # Exactly: 6 FLOPs per weight and token (fwd 2 + bwd 4) plus the attention term.
    assert counted == batch * seq_len * (6 * weights + attention)
    # torchtitan's formula counts all non-embedding parameters (biases and norm weights too): close.
    formula = flops_per_token(SMALL, seq_len) * batch * seq_len
    assert formula == pytest.approx(counted, rel=0.01)
    assert formula > counted  # the extra parameters only ever add


def test_param_counts_match_the_model() -> None:
    for shape in (SMALL, ModelShape(96, 3, 6, 384, 256)):
        model = Decoder(shape)
        total = sum(p.numel() for p in model.parameters())
        assert param_counts(shape) == (total, total - model.tok_embeddings.weight.numel())


def test_seed_preset_size_and_flops() -> None:
    seed = PRESETS["seed"]
    shape = ModelShape(seed.dim, seed.layers, seed.heads, seed.ffn_dim, seed.vocab_size)
    total, non_embedding = param_counts(shape)
    assert non_embedding == 12 * (4 * 2048 * 2048 + 2 * 2048 * 8192 + 4 * 2048 + 2 * 2048) + 2048 * 32000
    assert total == non_embedding + 32000 * 2048  # only the token embedding is excluded
    assert flops_per_token(shape, 1024) == 6 * non_embedding + 12 * 12 * 16 * 128 * 1024
    one_b = PRESETS["1b"]
    total_1b, _ = param_counts(ModelShape(one_b.dim, one_b.layers, one_b.heads, one_b.ffn_dim, one_b.vocab_size))
    assert 0.95e9 < total_1b < 1.15e9


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("NVIDIA A100 80GB PCIe", 312e12),
        ("NVIDIA H100 80GB HBM3", 989e12),
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H100 NVL", 835e12),
        ("NVIDIA H200", 989e12),
        ("NVIDIA H200 NVL", 835e12),
        ("NVIDIA B200", 2.25e15),
        ("AMD Instinct MI300X", 1307.4e12),  # AMD's datasheet (torchtitan rounds it to 1.3e15)
        ("NVIDIA L40S", 362.05e12),
        ("NVIDIA GeForce RTX 4090", 165.2e12),  # the GPU table's rows the old MFU table lacked
        ("NVIDIA GB200", 2.5e15),
        ("NVIDIA A10G", 70e12),
        ("NVIDIA L4", 121e12),
    ],
)
def test_peak_table(name: str, peak: float) -> None:
    found = table_peak(name)
    assert found is not None and found.flop_per_second == peak


# Not in the GPU table, or in it without a bf16 tensor figure (T4: no bf16; RTX 5090: none published).
@pytest.mark.parametrize("name", ["Intel(R) Data Center GPU Max 1550", "Tesla T4", "NVIDIA GeForce RTX 5090"])
def test_unknown_gpu_gets_no_mfu_and_a_warning(name: str) -> None:
    assert table_peak(name) is None
    peak, warning = resolve_peak("cuda", name, "bfloat16", threads=1, configured=None)
    assert peak is None and warning is not None and name in warning and "train.peak_flops" in warning
    assert mfu(1e9, 1e4, peak) is None


def test_gpu_fp32_gets_no_bf16_mfu_unless_a_peak_is_given() -> None:
    peak, warning = resolve_peak("cuda", "NVIDIA H100 80GB HBM3", "float32", threads=1, configured=None)
    assert peak is None and warning is not None and "float32" in warning
    peak, warning = resolve_peak("cuda", "NVIDIA GeForce RTX 4090", "float32", threads=1, configured=82.6e12)
    assert warning is None and peak is not None and peak.flop_per_second == 82.6e12


def test_table_variants_come_before_their_family() -> None:
    assert table_peak("NVIDIA H100 NVL") == Peak(835e12, "table: H100 NVL (bf16 dense)")
    assert table_peak("NVIDIA H200 NVL") == Peak(835e12, "table: H200 NVL (bf16 dense)")


def test_mfu_arithmetic() -> None:
    # Llama-3-8B-like: 6 * 7e9 FLOPs/token at 3000 tokens/s per H100 -> 12.7% of 989 TFLOP/s.
    assert mfu(6 * 7e9, 3000, Peak(989e12, "t")) == pytest.approx(6 * 7e9 * 3000 / 989e12)
    assert mfu(1.0, 1.0, Peak(0.0, "t")) is None


def test_cpu_peak_is_measured() -> None:
    peak, warning = resolve_peak("cpu", "cpu", "float32", threads=1, configured=None)
    assert warning is None and peak is not None
    assert peak.source.startswith("measured") and 1e8 < peak.flop_per_second < 1e13


# --- presets and plan -----------------------------------------------------------------------------
def test_presets_resolve_and_fields_override() -> None:
    plan = resolve_plan(TrainConfig(preset="seed"), world_size=4)
    assert (plan.shape.dim, plan.shape.layers, plan.shape.heads, plan.shape.ffn_dim) == (2048, 12, 16, 8192)
    assert (plan.shape.vocab_size, plan.seq_len, plan.batch_size, plan.lr, plan.data) == (
        32000,
        1024,
        8,
        3e-4,
        "random",
    )
    assert plan.global_batch == 32 and plan.tokens_per_step == 32 * 1024
    custom = resolve_plan(TrainConfig(preset="seed", layers=2, seq_len=64, batch_size=3, lr=1e-3), world_size=2)
    assert (custom.shape.layers, custom.seq_len, custom.batch_size, custom.lr) == (2, 64, 3, 1e-3)
    assert custom.shape.dim == 2048


def test_overrides_reach_the_plan_through_the_loader() -> None:
    config = load_config(None, ["train.preset=tiny", "train.heads=8", "train.data=random"])
    plan = resolve_plan(config.train, world_size=2)
    assert plan.shape.heads == 8 and plan.data == "random"


@pytest.mark.parametrize(
    ("fields", "world", "expected"),
    [
        ({"dim": 100, "heads": 3}, 1, "does not divide"),
        ({"vocab_size": 100, "data": "text"}, 1, "vocab_size >= 256"),
        ({"fsdp": False}, 2, "fsdp=false"),
        ({"hsdp": True, "hsdp_shard_size": 3}, 4, "hsdp_shard_size=3"),
        ({"checkpoint_every": 500, "steps": 10}, 1, "checkpoint_every=500"),
        ({"backend": "nccl", "device": "cpu"}, 1, "backend=nccl"),
    ],
)
def test_plan_rejects_what_cannot_work(fields: dict[str, object], world: int, expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        resolve_plan(TrainConfig(**fields), world_size=world)


# --- data ------------------------------------------------------------------------------------------
def test_global_batch_does_not_depend_on_the_rank_split() -> None:
    one = TokenBatches("text", 256, 32, 4, seed=7, rank=0, device=torch.device("cpu"))
    halves = [TokenBatches("text", 256, 32, 2, seed=7, rank=r, device=torch.device("cpu")) for r in (0, 1)]
    for step in (0, 5):
        inputs, targets = one.batch(step)
        split = [h.batch(step) for h in halves]
        assert torch.equal(inputs, torch.cat([s[0] for s in split]))
        assert torch.equal(targets, torch.cat([s[1] for s in split]))
        assert torch.equal(inputs[:, 1:], targets[:, :-1])  # next-token targets
    other_seed = TokenBatches("text", 256, 32, 4, seed=8, rank=0, device=torch.device("cpu"))
    assert not torch.equal(one.batch(0)[0], other_seed.batch(0)[0])
    assert not torch.equal(one.batch(0)[0], one.batch(1)[0])


def test_random_tokens_are_in_vocab_and_deterministic() -> None:
    a = TokenBatches("random", 1000, 16, 3, seed=1, rank=1, device=torch.device("cpu"))
    b = TokenBatches("random", 1000, 16, 3, seed=1, rank=1, device=torch.device("cpu"))
    x, _ = a.batch(3)
    assert x.shape == (3, 16) and int(x.min()) >= 0 and int(x.max()) < 1000
    assert torch.equal(x, b.batch(3)[0])


def test_text_corpus_is_real_text() -> None:
    corpus = text_corpus()
    assert len(corpus.tokens) > 1_000_000
    text = bytes(corpus.tokens[:20000].tolist()).decode("utf-8", errors="replace")
    assert "def " in text and "import " in text
    assert len(corpus.fingerprint) == 16


def test_seq_len_longer_than_the_corpus_is_rejected() -> None:
    too_long = len(text_corpus().tokens)
    with pytest.raises(UserError, match="seq_len"):
        TokenBatches("text", 256, too_long, 1, seed=0, rank=0, device=torch.device("cpu"))


# --- model init ---------------------------------------------------------------------------------------
def test_init_is_deterministic_and_scaled() -> None:
    a, b = Decoder(SMALL), Decoder(SMALL)
    init_weights(a, seed=3)
    init_weights(b, seed=3)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(pa, pb), name
    c = Decoder(SMALL)
    init_weights(c, seed=4)
    assert not torch.equal(a.output.weight, c.output.weight)
    assert float(a.output.weight.detach().std()) == pytest.approx(SMALL.dim**-0.5, rel=0.15)
    assert float(a.layers[0].ffn[0].weight.detach().std()) == pytest.approx(0.02, rel=0.15)
    assert torch.all(a.layers[0].attn.in_proj_bias == 0) and torch.all(a.layers[0].attn_norm.weight == 1)
    assert math.isfinite(float(a(torch.zeros(1, 8, dtype=torch.long)).detach().sum()))


# --- memory --------------------------------------------------------------------------------------------
def test_out_of_memory_frees_the_failed_steps_tensors_before_reporting() -> None:
    """The error that replaces an OOM must not keep the failed step's tensors alive while it is reported."""
    held: list[weakref.ref[torch.Tensor]] = []

    def step() -> None:
        activations = torch.ones(1024)
        held.append(weakref.ref(activations))
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: Error code 12 (Cannot allocate memory)")

    to_user_error = out_of_memory_as(lambda exc: UserError(f"out of memory: {exc}"))
    with pytest.raises(UserError, match="out of memory: DefaultCPUAllocator") as caught, to_user_error:
        step()
    assert caught.value.__context__ is not None, "the original error stays for --debug"
    assert held[0]() is None, "the failed step's tensor is still referenced"
    with pytest.raises(ValueError, match="shape"), out_of_memory_as(lambda exc: UserError(str(exc))):
        raise ValueError("shape mismatch")


def test_out_of_memory_message_names_the_knobs() -> None:
    exc = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 268435456 bytes. Error code 12 (Cannot allocate memory)"
    )
    assert is_out_of_memory(exc) and is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    knobs = MemoryKnobs(
        64,
        512,
        activation_checkpointing=False,
        reshard_after_forward=False,
        mixed_precision=False,
        world_size=2,
        max_memory_gb=1.5,
    )
    message = out_of_memory_message(exc, "in step 1", 0, "cpu", knobs)
    assert "\n" not in message and "268435456 bytes" in message
    for knob in (
        "train.batch_size",
        "train.seq_len",
        "train.activation_checkpointing=true",
        "train.reshard_after_forward=true",
        "NPROC",
        "train.max_memory_gb",
    ):
        assert knob in message
    already = MemoryKnobs(64, 512, True, True, True, 2, None)
    message = out_of_memory_message(exc, "in step 1", 0, "cpu", already)
    assert "activation_checkpointing" not in message and "reshard_after_forward" not in message


def test_memory_cap_below_current_use_is_refused() -> None:
    # In a child process: RLIMIT_DATA must not leak into the test runner.
    code = (
        "import torch\nfrom fleetbench.train.memory import apply_memory_cap\nfrom fleetbench.errors import "
        "UserError\ntry:\n    apply_memory_cap(0.01, torch.device('cpu'))\nexcept UserError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "train.max_memory_gb=0.01 is below what this rank already holds" in out.stdout
    assert resource.getrlimit(resource.RLIMIT_DATA)[0] == resource.RLIM_INFINITY


# --- history and catalogue ---------------------------------------------------------------------------------
def test_history_keeps_the_latest_attempt_of_each_step(tmp_path: Path) -> None:
    def row(step: int, loss: float, attempt: int) -> StepRow:
        return StepRow(step, loss, 1.0, 0.1, 0.01, 100.0, 50.0, 0.001, None, 1, 1e-3, attempt)

    writer = HistoryWriter(tmp_path)
    for step, loss, attempt in ((1, 5.0, 0), (2, 4.0, 0), (3, 3.9, 0), (3, 3.5, 1), (4, 3.0, 1)):
        writer.append(row(step, loss, attempt))
    writer.close()
    rows = read_history(tmp_path)
    assert [(r.step, r.loss, r.attempt) for r in rows] == [(1, 5.0, 0), (2, 4.0, 0), (3, 3.5, 1), (4, 3.0, 1)]


def test_training_metrics_follow_the_naming_rules() -> None:
    train = [spec for name, spec in CATALOGUE.items() if name.startswith("fleetbench_train_")]
    assert len(train) >= 10
    for spec in train:
        assert naming_problems(spec) == [], spec.name
        assert spec.labels == ()  # common labels only: bounded, no steps


# --- launcher bookkeeping ---------------------------------------------------------------------------------
def test_rank_errors_prefer_the_user_error_of_the_last_attempt(tmp_path: Path) -> None:
    def report(attempt: int, rank: int, message: str, user: bool) -> None:
        name = f"attempt{attempt:04d}-rank{rank:06d}.json"
        (tmp_path / name).write_text(
            json.dumps(
                {
                    "rank": rank,
                    "attempt": attempt,
                    "exit_code": 2 if user else 1,
                    "user_error": user,
                    "message": message,
                }
            )
        )

    report(0, 1, "out of memory on rank 1 ... (attempt 0)", True)
    report(1, 0, "RuntimeError: Connection reset by peer", False)
    report(1, 1, "out of memory on rank 1 (attempt 1)", True)
    error = failure_from_ranks(tmp_path, "training failed: rank 1 exited with status 2")
    assert (str(error), error.exit_code) == ("out of memory on rank 1 (attempt 1)", 2)
    (tmp_path / "attempt0001-rank000001.json").unlink()
    error = failure_from_ranks(tmp_path, "training failed: rank 1 killed by SIGKILL")
    assert error.exit_code == 1
    assert str(error).startswith("training failed: rank 1 killed by SIGKILL; rank 0 reported: RuntimeError")


def test_resume_finds_the_run_with_the_newest_checkpoint(tmp_path: Path) -> None:
    for run, step, mtime in (("old", 9, 1000), ("new", 3, 2000), ("partial", 6, 3000)):
        folder = tmp_path / run / "checkpoints" / f"step_{step:08d}"
        if run == "partial":
            folder = folder.with_name(folder.name + ".partial")
        folder.mkdir(parents=True)
        (folder / ".metadata").write_bytes(b"")
        os.utime(folder, (mtime, mtime))
    assert find_resumable_run(tmp_path) == "new"
    assert [s for s, _ in complete_checkpoints(tmp_path / "old" / "checkpoints")] == [9]
    with pytest.raises(UserError, match="no run under"):
        find_resumable_run(tmp_path / "partial")


# --- profiling inside the trainer -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [("'3:5'", (3, 5)), ("' 1 : 1 '", (1, 1)), ("[2, 4]", (2, 4)), ("null", None)],
)
def test_profile_steps_are_read_as_a_pair(value: str, expected: tuple[int, int] | None) -> None:
    assert load_config(None, [f"train.profile_steps={value}"]).train.profile_steps == expected
    assert TrainConfig(profile_steps="3:5").profile_steps == (3, 5)  # the string --profile-steps passes


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3:5", "unquoted A:B reads as a base-60 number: quote it ('3:5') or write a list ([3, 5]) (got 185)"),
        ("'3-5'", "expected A:B, the first and last step to profile, with 1 <= A <= B <= train.steps (e.g. 3:5) (got '3-5')"),
        ("'0:2'", "expected A:B"),
        ("'5:3'", "expected A:B"),
        ("[1, 2, 3]", "train.profile_steps: Tuple should have at most 2 items"),
        ("true", "expected A:B"),
    ],
)  # fmt: skip
def test_profile_steps_in_other_forms_are_refused(value: str, expected: str) -> None:
    with pytest.raises(UserError) as caught:
        load_config(None, [f"train.profile_steps={value}"])
    assert expected in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"steps": 6, "profile_steps": (5, 7)}, "train.profile_steps=5:7 goes past the run's last step, train.steps=6"),
        ({"profile_memory_snapshot": True}, "needs train.profile_steps=A:B"),
    ],
)
def test_launch_checks_the_profile_window(fields: dict[str, object], expected: str) -> None:
    cfg = TrainConfig(**fields)
    with pytest.raises(UserError, match=re.escape(expected)):
        check_launch(cfg, resolve_plan(cfg, world_size=2))
    check_launch(TrainConfig(steps=6, profile_steps=(6, 6)), resolve_plan(TrainConfig(steps=6), world_size=2))


def test_memory_snapshot_needs_cuda() -> None:
    cfg = TrainConfig(profile_steps=(3, 5), profile_memory_snapshot=True)
    with pytest.raises(UserError, match=r"profile_memory_snapshot=true needs CUDA .*accepted on the CPU: false"):
        check_profile_device(cfg, cuda=False)
    check_profile_device(cfg, cuda=True)


def test_profile_window_of_a_resumed_run() -> None:
    assert ProfileWindow.for_run(None, 0) is None
    assert ProfileWindow.for_run((3, 5), 0) == ProfileWindow(3, 5)
    assert ProfileWindow.for_run((3, 5), 3) == ProfileWindow(4, 5)  # steps 1..3 were done before
    assert ProfileWindow.for_run((3, 5), 5) is None
    window = ProfileWindow(3, 5)
    assert window.excluded == (2, 5)  # step 2 runs with the profiler warming up
    assert [step for step in range(1, 8) if window.slows(step)] == [2, 3, 4, 5]
    assert ProfileWindow(1, 1).excluded == (1, 1)  # warmed up before step 1


def test_profiled_steps_are_left_out_of_the_steady_figures() -> None:
    """Log every 2 steps; steps 3..4 profiled: the first interval is warm-up, step 3 and 4 are left out."""
    times = [9.0, 8.0, 5.0, 5.0, 1.0, 2.0, 1.5, 1.0]
    totals = Totals()
    window = ProfileWindow(4, 4)  # warm-up step 3, recorded step 4
    row = StepRow(0, 1.0, 1.0, 0.1, 0.01, 100.0, 50.0, 0.001, None, 1, 1e-3, 0)
    for start in range(0, len(times), 2):
        interval = Interval()
        for step in (start + 1, start + 2):
            interval.add(times[step - 1], 0.0, window.slows(step))
        totals.close_interval(interval, row, 0.0)
    assert totals.steady_step_times_s == [1.0, 2.0, 1.5, 1.0]
    assert (totals.steady_steps, totals.steady_wall_s, totals.excluded_steps) == (4, 5.5, 2)
    assert (totals.steps, totals.wall_s) == (8, sum(times))


def test_step_profiler_numbers_steps_like_the_trainer(tmp_path: Path) -> None:
    """A run resumed after step 2 profiles 3..4: ProfilerStep#3 and #4, one rank's files under profile/."""
    device = DeviceInfo(torch.device("cpu"), "cpu", "cpu")
    window = ProfileWindow.for_run((3, 4), start_step=2)
    weights = torch.randn(64, 64)
    with StepProfiler(window, tmp_path, 5, device, memory_snapshot=False, start_step=2) as profiler:
        for steps_done in range(3, 7):
            (weights @ weights).sum()
            profiler.step_done(steps_done)
    folder = tmp_path / PROFILE_DIR
    trace = folder / trace_name(5, 3, 4)
    assert trace.name == "rank-5.steps-3-4.pt.trace.json.gz"
    assert profiler.files == [trace, folder / "rank-5.key_averages.txt"]
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})
    assert steps == ["ProfilerStep#3", "ProfilerStep#4"]
    assert sum(e.get("name") == "aten::mm" for e in events) == 2
    assert "aten::mm" in (folder / "rank-5.key_averages.txt").read_text()
    summary = profiler.summary(True, tmp_path)
    assert summary["profiled_steps"] == [3, 4] and summary["excluded_steps"] == [2, 4]
    assert summary["profile_files"] == ["profile/rank-5.steps-3-4.pt.trace.json.gz", "profile/rank-5.key_averages.txt"]


def test_without_a_window_the_profiler_does_nothing(tmp_path: Path) -> None:
    device = DeviceInfo(torch.device("cpu"), "cpu", "cpu")
    with StepProfiler(None, tmp_path, 0, device, memory_snapshot=False, start_step=0) as profiler:
        profiler.step_done(1)
    assert not profiler.slows(1) and not (tmp_path / PROFILE_DIR).exists()
    assert profiler.summary(False, tmp_path) == {
        "profiled_steps": None,
        "excluded_steps": None,
        "excluded_from_throughput": False,
    }


@pytest.mark.parametrize("model", ["seed", "llama"])
def test_activation_checkpointing_recomputes_the_same_block(model: str) -> None:
    """Both decoders' blocks share one checkpointed forward and one RMSNorm: with checkpointing on, the
    loss and every gradient are those of the plain forward."""
    from fleetbench.train.blocks import CheckpointedBlock, RMSNorm
    from fleetbench.train.decoder import build_decoder

    shape = ModelShape(dim=32, layers=2, heads=4, ffn_dim=64, vocab_size=64, model=model)
    tokens = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    results = []
    for checkpointing in (False, True):
        decoder = build_decoder(shape)
        init_weights(decoder, seed=3)
        for block in decoder.blocks():
            assert isinstance(block, CheckpointedBlock)
            block.activation_checkpointing = checkpointing
        loss = torch.nn.functional.cross_entropy(decoder(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        results.append(
            (loss.detach(), {n: p.grad.clone() for n, p in decoder.named_parameters() if p.grad is not None})
        )
        norms = {type(m) for m in decoder.modules() if "Norm" in type(m).__name__}
        assert norms == {RMSNorm}
    (plain, plain_grads), (recomputed, recomputed_grads) = results
    assert torch.equal(plain, recomputed)
    assert plain_grads.keys() == recomputed_grads.keys() and len(plain_grads) > 0
    for name, grad in plain_grads.items():
        torch.testing.assert_close(recomputed_grads[name], grad, rtol=0, atol=0, msg=name)
