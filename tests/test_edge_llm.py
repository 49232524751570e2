"""`fleetbench edge llm`: the llama model exported to GGUF (llama.cpp) and MLX, run for real, agreeing with eager.

Needs llama-cpp-python, gguf and mlx (the [llm] extra) and executorch ([mobile]); each runtime's tests skip with that reason
where its package is missing. A 2-layer llama3-debug shape keeps the workers at about a second each.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import run_cli
from fleetbench.edge.llm.job import (
    DECODE_CHECK_TOKENS,
    LlmRow,
    Reference,
    _fill,
    _run_worker,
    decode_logits_path,
    eager_reference,
)
from fleetbench.edge.llm.source import build_llama
from fleetbench.edge.llm.tolerance import quantisation_error, tolerance
from fleetbench.results.store import read_records

needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None,
    reason="llama-cpp-python and gguf not installed: pip install 'fleetbench[llm]'",
)
needs_mlx = pytest.mark.skipif(importlib.util.find_spec("mlx") is None, reason="mlx not installed: 'fleetbench[llm]'")
needs_executorch = pytest.mark.skipif(
    importlib.util.find_spec("executorch") is None, reason="executorch not installed: 'fleetbench[mobile]'"
)
SMALL = {"layers": 2, "kv_heads": 4}  # GQA, as Llama-3-8B has


def _export(runtime: str, model: torch.nn.Module, dtype: str, folder: Path) -> Path:
    if runtime == "executorch":
        from fleetbench.config.edge import EdgeLlmConfig
        from fleetbench.edge.llm.job import _export_pte

        folder.mkdir(parents=True, exist_ok=True)
        return _export_pte(model, EdgeLlmConfig(prompt_tokens=24), folder)
    if runtime == "llama.cpp":
        from fleetbench.edge.llm.job import _export_gguf

        return _export_gguf(model, folder, dtype)
    from fleetbench.edge.llm.mlx_model import export_mlx

    return export_mlx(model, folder / f"mlx-{dtype}", dtype)  # type: ignore[arg-type]


def _measure(runtime: str, path: Path, mmap: bool, prompt: list[int], tmp_path: Path) -> dict[str, object]:
    spec = {
        "runtime": runtime,
        "path": str(path),
        "mmap": mmap,
        "kv_f32": path.name.endswith("f32.gguf"),
        "threads": 1,
        "context": max(64, len(prompt) + 16),
        "prompt": prompt,
        "gen_tokens": 4,
        "agree_tokens": 6,
        "min_tries": 1,
        "max_tries": 1,
        "cv_target": 1.0,
        "logits_out": str(tmp_path / "logits.npy"),
        "decode_check_tokens": DECODE_CHECK_TOKENS,
        "decode_logits_out": str(decode_logits_path(tmp_path / "logits.npy")),
        "energy_sources": ["rapl", "tegrastats"],
    }
    return _run_worker(spec, tmp_path)


@pytest.mark.parametrize(
    ("runtime", "dtype"),
    [
        pytest.param("llama.cpp", "f32", marks=needs_llama_cpp),
        pytest.param("llama.cpp", "q8_0", marks=needs_llama_cpp),
        pytest.param("llama.cpp", "q4_0", marks=needs_llama_cpp),
        pytest.param("llama.cpp", "q4_k_m", marks=needs_llama_cpp),
        pytest.param("mlx", "f32", marks=needs_mlx),
        pytest.param("mlx", "f16", marks=needs_mlx),
        pytest.param("mlx", "int4", marks=needs_mlx),
        # torch.export + XNNPACK lowering: a minute or two on 2 cores
        pytest.param("executorch", "f32", marks=[needs_executorch, pytest.mark.slow]),
    ],
)
def test_export_run_agree_and_a_wrong_weight_fails(runtime: str, dtype: str, tmp_path: Path) -> None:
    model = build_llama("llama3-debug", seed=2, overrides=SMALL)
    prompt = torch.randint(0, 2048, (24,), generator=torch.Generator().manual_seed(0)).tolist()
    reference = eager_reference(model, prompt, 6)
    path = _export(runtime, model, dtype, tmp_path)
    own = quantisation_error(model, prompt, reference[0], runtime, dtype, path)
    for mmap in (True, False):  # both load modes measured
        out = _measure(runtime, path, mmap, prompt, tmp_path)
        row = LlmRow(runtime, dtype, mmap)
        _fill(row, out, Reference(*reference, {(runtime, dtype): own}), tmp_path / "logits.npy", 1.0)
        assert row.ok, row.error
        assert row.agrees, (row.logit_error, row.greedy_equal)
        assert max(row.logit_error, row.decode_logit_error) <= row.tolerance == tolerance(own)
        assert row.load_s > 0 and row.peak_rss_bytes > 0
        # cold (page cache dropped) and warm loads; the model's RSS without the interpreter's and imports' share
        assert row.cold_load_s > 0 and row.cold_load_page_cache_dropped
        # the tries' energy where a source reads (a VM has none: each source says why)
        assert (row.energy["joules"] is None) == (row.energy["source"] is None) and row.energy["seconds"] > 0
        assert row.energy["joules"] is not None or set(row.energy["unavailable"]) == {"rapl", "tegrastats"}
        assert 0 < row.rss_model_bytes < row.rss_after_load_bytes and row.rss_imports_bytes > 0
        assert row.load_kind.startswith("lazy") == (runtime == "mlx")
        if runtime == "llama.cpp":  # its own word on where the weights went: the CPU build's CPU, no layer offloaded
            assert row.device == row.placement["device"] and row.device and row.offloaded_layers == 0
        else:
            assert row.device == {"mlx": "cpu", "executorch": "cpu (xnnpack)"}[runtime]
        assert row.pp["p50"] > 0 and row.ttft["p50"] > 0
        assert row.tg["p50"] > 0
    if dtype == "f32":
        assert row.greedy_equal == row.greedy_total == 6
    # a wrong export: two tokens' embedding rows swapped (a vocabulary-order bug); the same check must refuse it.
    # (A wrong block weight of a fresh init moves the logits less: its blocks add little to the embeddings.)
    first, second = prompt[0], prompt[1]
    with torch.no_grad():
        embedding = model.tok_embeddings.weight
        embedding[[first, second]] = embedding[[second, first]]
    wrong = _export(runtime, model, dtype, tmp_path / "wrong")
    row = LlmRow(runtime, dtype, True)
    ref = Reference(*reference, {(runtime, dtype): own})
    _fill(row, _measure(runtime, wrong, True, prompt, tmp_path), ref, tmp_path / "logits.npy", 1.0)
    assert row.ok and not row.agrees and row.logit_error > row.tolerance


@needs_llama_cpp
@needs_mlx
def test_edge_llm_command_side_by_side(tmp_path: Path) -> None:
    done = run_cli(
        "edge", "llm", "--quick", "--results-dir", str(tmp_path), "--dtypes", "f32", "--threads", "1",
        "--runtimes", "llama.cpp,mlx", "--backend", "cpu",  # llama.cpp's Vulkan rows: test_edge_llm_vulkan.py
        "--set", "edge.llm.min_tries=1", "--set", "edge.llm.max_tries=1", "--set", "edge.thermal_sources=[]",
        "--set", "edge.cooldown_s=0", env={"COLUMNS": "160"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    shown = done.stdout + done.stderr
    assert "llama.cpp" in shown and "mlx" in shown and "skipped mlx Metal: needs macOS" in shown
    [record] = read_records(next(tmp_path.glob("*/records.jsonl")).parent)
    labels = {(h.labels["runtime"], h.labels["phase"], h.labels["mmap"]) for h in record.headline}
    assert labels == {(r, p, m) for r in ("llama.cpp", "mlx") for p in ("pp", "tg") for m in ("true", "false")}
    results = json.loads(next(tmp_path.glob("*/edge/llm_results.json")).read_text())
    assert all(row["agrees"] for row in results["rows"]) and len(results["rows"]) == 4
    # one try each: no spread to judge and no percentile past the median; every row carries its thermal record
    for row in results["rows"]:
        assert row["stability"] == {"samples": 1, "cv": None, "cv_target": 0.05, "verdict": "single sample"}
        assert row["pp"]["p50"] > 0 and row["pp"]["p90"] is None and row["pp"]["p99"] is None
        assert row["thermal"]["cooldown"]["driven_by"] == "fixed" and "throttled" in row["thermal"]
    table_rows = [line for line in shown.splitlines() if line.lstrip().startswith(("llama.cpp ", "mlx "))]
    assert len(table_rows) == 4 and all("single sample" in line and " ok " not in line for line in table_rows)
    assert next(tmp_path.glob("*/edge/llm_runtimes.png")).stat().st_size > 0


def test_cached_llama_prefill_then_decode_equals_the_full_forward() -> None:
    """The ExecuTorch program's module in eager: a prompt, then tokens one at a time through the cache, give
    the logits of the model run on the whole sequence; a new prompt after them needs no reset."""
    from fleetbench.edge.llm.pte_cache import CachedLlama

    model = build_llama("llama3-debug", seed=3, overrides=SMALL)
    cached = CachedLlama(model, context=20).eval()
    tokens = torch.randint(0, 2048, (1, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)[0]
        prompt = cached(tokens[:, :12], torch.tensor([0]))[0]
        steps = [cached(tokens[:, i : i + 1], torch.tensor([i]))[0, -1] for i in range(12, 16)]
        again = cached(tokens[:, :5], torch.tensor([0]))[0]  # stale positions 5..15 stay masked
    torch.testing.assert_close(prompt, full[:12], rtol=0, atol=1e-5)
    torch.testing.assert_close(torch.stack(steps), full[12:], rtol=0, atol=1e-5)
    torch.testing.assert_close(again, full[:5], rtol=0, atol=1e-5)


def test_edge_llm_bad_dtype_is_one_line(tmp_path: Path) -> None:
    done = run_cli("edge", "llm", "--dtypes", "f64", "--results-dir", str(tmp_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetbench: error:") and "f64" in lines[0], done.stderr
    assert "q8_0" in lines[0]


def test_eager_reference_greedy_matches_logits() -> None:
    model = build_llama("llama3-debug", seed=0, overrides=SMALL)
    logits, greedy = eager_reference(model, [1, 2, 3, 4], 3)
    assert logits.shape == (4, 2048) and greedy[0] == int(np.argmax(logits[-1]))


def test_checkpoint_weights_load_from_dcp_and_state_dict(tmp_path: Path) -> None:
    from torch.distributed.checkpoint import state_dict_saver

    from fleetbench.errors import UserError

    trained = build_llama("llama3-debug", seed=5)
    # the trainer's layout: a DCP step folder whose "model" entry is the model's state dict
    state_dict_saver.save({"model": trained.state_dict()}, checkpoint_id=str(tmp_path / "step_00000002"), no_dist=True)
    torch.save(trained.state_dict(), tmp_path / "model.pt")
    for source in (tmp_path / "step_00000002", tmp_path / "model.pt"):
        loaded = build_llama("llama3-debug", seed=0, checkpoint=source)
        for name, tensor in trained.state_dict().items():
            assert torch.equal(loaded.state_dict()[name], tensor), (source, name)
    with pytest.raises(UserError, match=r"has no \.metadata"):
        build_llama("llama3-debug", seed=0, checkpoint=tmp_path)
    # the shape is the checkpoint's, not the preset's: a 2-layer request still loads all 6 trained layers
    assert (
        build_llama("llama3-debug", seed=0, checkpoint=tmp_path / "model.pt", overrides={"layers": 2}).shape.layers == 6
    )
    state = trained.state_dict()
    state["layers.1.feed_forward.w2.weight"] = torch.zeros(3, 3)  # a tensor no llama of this shape has
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(UserError, match="does not fit the llama model"):
        build_llama("llama3-debug", seed=0, checkpoint=tmp_path / "bad.pt")


@pytest.mark.skipif(
    __import__("psutil").virtual_memory().available > 70 * 2**30, reason="this host could hold Llama-3-8B twice"
)
def test_llama_8b_refused_before_allocating_where_it_cannot_fit(tmp_path: Path) -> None:
    done = run_cli("edge", "llm", "--preset", "llama3-8b", "--results-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "preset llama3-8b needs about 60 GiB" in done.stderr and "accepted here: llama3-debug" in done.stderr


@needs_llama_cpp
@pytest.mark.parametrize("threads", [1, 2])
def test_llama_cpp_session_decodes_on_its_own_threadpool_and_frees_it_after_the_context(
    threads: int, tmp_path: Path
) -> None:
    """The session's context runs on a pool it attached (as llama-bench does) and gives the logits of a
    context with none (ggml's pool per graph); closing frees the context, then the pool, once."""
    from fleetbench.edge.llm.runtimes import LlamaCppSession

    path = _export("llama.cpp", build_llama("llama3-debug", seed=4, overrides=SMALL), "f32", tmp_path)
    prompt = list(range(3, 19))
    session = LlamaCppSession(path, mmap=True, threads=threads, context=64, batch=32)
    pool = session._pool
    try:
        assert pool.pool
        steps = [session.prefill(prompt), session.decode(7), session.decode(11)]
        without = session.logits([*prompt, 7, 11])  # a second context, no pool attached
    finally:
        session.close()
    assert pool.pool is None
    pool.free()  # a second free does nothing
    for position, logits in zip((-3, -2, -1), steps, strict=True):
        np.testing.assert_allclose(logits, without[position], rtol=0, atol=1e-5)


# A long prompt for the RoPE bug: Llama 3's scaling divides the frequencies whose wavelength is over
# 2048 positions (ROPE_ORIGINAL_CONTEXT / high_freq_factor) by up to 8; a few hundred positions in,
# the rotation angles of those pairs differ by radians, so logits there see a missing scaling.
ROPE_PROMPT_TOKENS = 768


def _plant(monkeypatch: pytest.MonkeyPatch, bug: str, shape: object) -> None:
    """Make export_gguf write one of the export bugs seen in practice, by rewriting what it hands the writer."""
    import gguf

    add_tensor = gguf.GGUFWriter.add_tensor

    def planted(self: object, name: str, tensor: np.ndarray, *args: object, **kwargs: object) -> None:
        if bug == "rope scaling dropped" and name == "rope_freqs.weight":
            return  # the file says nothing of Llama 3's frequency scaling
        if bug == "dequant scale x2" and name == "blk.0.attn_v.weight":
            blocks = tensor.reshape(-1, 34).copy()  # q8_0: an f16 scale, then 32 int8 values per block
            scales = blocks[:, :2].copy().view(np.float16)
            blocks[:, :2] = (scales * 2).view(np.uint8)
            tensor = blocks.reshape(tensor.shape)
        if bug == "swapped heads" and name == "blk.0.attn_q.weight":
            head_dim = shape.head_dim  # type: ignore[attr-defined]
            tensor = tensor.copy()
            tensor[[*range(head_dim), *range(head_dim, 2 * head_dim)]] = tensor[
                [*range(head_dim, 2 * head_dim), *range(head_dim)]
            ]
        add_tensor(self, name, tensor, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFWriter, "add_tensor", planted)


@needs_llama_cpp
@pytest.mark.parametrize(
    ("bug", "dtype", "prompt_tokens"),
    [
        ("dequant scale x2", "q8_0", 24),
        ("rope scaling dropped", "f32", ROPE_PROMPT_TOKENS),
        ("swapped heads", "f32", 24),
    ],
)
def test_planted_export_bugs_fail_agreement(
    bug: str, dtype: str, prompt_tokens: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetbench.edge.llm.gguf_export import export_gguf

    model = build_llama("llama3-debug", seed=2, overrides=SMALL)
    if bug == "rope scaling dropped":
        # a fresh init attends almost uniformly, so positions hardly matter (the missing scaling moved its
        # logits by 5e-5 at 768 tokens); sharper queries and keys make attention depend on position (2e-3)
        with torch.no_grad():
            for layer in model.layers:
                layer.attention.wq.weight.mul_(4.0)
                layer.attention.wk.weight.mul_(4.0)
    prompt = torch.randint(0, 2048, (prompt_tokens,), generator=torch.Generator().manual_seed(0)).tolist()
    reference = eager_reference(model, prompt, 6)
    own = quantisation_error(model, prompt, reference[0], "llama.cpp", dtype)
    right = LlmRow("llama.cpp", dtype, True)
    out = _measure("llama.cpp", export_gguf(model, tmp_path / "right.gguf", dtype), True, prompt, tmp_path)
    ref = Reference(*reference, {("llama.cpp", dtype): own})
    _fill(right, out, ref, tmp_path / "logits.npy", 1.0)
    assert right.ok and right.agrees, (right.logit_error, right.decode_logit_error, right.tolerance)
    _plant(monkeypatch, bug, model.shape)
    wrong = LlmRow("llama.cpp", dtype, True)
    out = _measure("llama.cpp", export_gguf(model, tmp_path / "wrong.gguf", dtype), True, prompt, tmp_path)
    _fill(wrong, out, ref, tmp_path / "logits.npy", 1.0)
    assert wrong.ok and not wrong.agrees, (wrong.logit_error, wrong.decode_logit_error, wrong.tolerance)
