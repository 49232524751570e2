"""`fleetbench edge llm`: a llama-family model exported once and run by each edge LLM runtime, side by side.

Model (fresh init of a preset, a trainer checkpoint of any llama shape, a Hugging Face llama folder
with --hf, or an existing GGUF with --gguf, which llama.cpp alone runs) -> eager PyTorch reference
(prompt logits, greedy tokens) -> one export per runtime and dtype (GGUF for llama.cpp, its 4-bit
types by llama.cpp's own quantizer; safetensors for MLX, int4 packed by mx.quantize; a .pte with a
key/value cache for ExecuTorch) -> per runtime, dtype and load mode a worker process (worker.py)
inside the device-farm discipline (cooldown and thermal reading around it, tries until the CV
target) -> agreement with eager, metrics, the record (each row with the device that ran it),
llm_results.json and a PNG. A runtime whose logits leave the dtype's tolerance, or whose f32 greedy
tokens differ from eager's, fails the run (exit 1) after everything was written.

llama.cpp runs once per build chosen (edge.llm.llamacpp_backends, backends.py): the CPU build, and the
Vulkan build with edge.llm.gpu_layers offloaded (all by default) on whatever Vulkan device its ggml finds
(lavapipe here, the NVIDIA/AMD/Intel/Mali/Adreno driver elsewhere); each row records where llama.cpp put
the model (llamacpp_placement) and is checked against the same eager reference.

Tolerance: derived per export from eager's logit error with the weights as that export stores them
(fleetbench.edge.llm.tolerance), twice it, never under 1e-4; for --gguf from llama.cpp's rounding of
the activations (fleetbench.edge.llm.gguf_source); a GPU build's row is held to the larger of its
export's error and that of the build's own arithmetic (f16 on Vulkan).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fleetbench import jsonio
from fleetbench.config.edge import EdgeLlmConfig
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.edge.discipline import Watch
from fleetbench.edge.llm import backends
from fleetbench.edge.llm.backends import worker_env
from fleetbench.edge.llm.tolerance import (
    ARITHMETIC_DTYPE,
    MARGIN,
    UNDERIVED,
    logit_error,
    quantisation_error,
    row_error,
    tolerance,
)
from fleetbench.edge.stability import Stability, supported_percentile
from fleetbench.errors import UserError
from fleetbench.job import Job, JobFailed, JobResult, RunContext
from fleetbench.telemetry.session import BenchmarkRun, open_run

BENCHMARK = "edge-llm"
PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99))
# What this host cannot run, said instead of faked.
METAL_REASON = "needs macOS on Apple silicon (Metal); this host runs the CPU build"
DTYPES_OF = {
    "llama.cpp": ("f32", "f16", "q8_0", "q4_0", "q4_k_m"),
    "mlx": ("f32", "f16", "int4"),
    "executorch": ("f32",),
}
# 4-bit where an exporter does not offer it here, said plainly
NOT_OFFERED = {
    ("executorch", "int4"): "4-bit weight-only is not offered for XNNPACK: ExecuTorch lowers 4-bit weights to "
    "it only with 8-bit dynamic activations (8da4w, another scheme); its weight-only 4-bit modes are the "
    "Vulkan and MPS delegates', which this runtime lacks",
}
WORKER_TIMEOUT_S = 1800
# The timed decode path (prefill, then one token at a time through the key/value cache) is checked on
# the prompt's last tokens, beside the full forward's logits (worker.decode_logits).
DECODE_CHECK_TOKENS = 4

log = logging.getLogger(__name__)


@dataclass
class LlmRow:
    """One runtime, dtype and load mode: what its worker measured and whether it agrees with eager."""

    runtime: str
    dtype: str
    mmap: bool
    backend: str = "cpu"  # llama.cpp's build: cpu or vulkan (backends.py); the other runtimes run on the CPU
    gpu_layers: int = 0  # asked for: llama.cpp's n_gpu_layers, -1 all
    # what ran it: llama.cpp the device holding most of the weights as its driver names it (its load log);
    # MLX "gpu" (Metal) or "cpu"; ExecuTorch "cpu (xnnpack)"
    device: str = ""
    offloaded_layers: int = 0  # llama.cpp's own count of the layers it put on the GPU device
    layers: int | None = None  # ... out of (the repeating layers and the output layer); None: a CPU build
    placement: dict[str, Any] = field(default_factory=dict)  # llamacpp_placement.placement of the load
    energy: dict[str, Any] = field(default_factory=dict)  # the timed tries' energy (EnergyReading.summary), or why none
    ok: bool = False
    error: str | None = None
    load_s: float = float("nan")  # warm: the files in the page cache
    cold_load_s: float = float("nan")  # the files dropped from the page cache first (posix_fadvise)
    cold_load_page_cache_dropped: bool = False
    load_kind: str = ""  # eager, or MLX's lazy load forced at once
    rss_after_load_bytes: int = 0
    peak_rss_bytes: int = 0
    # the model's share: RSS minus the RSS after the runtime's imports (interpreter, numpy, torch where
    # the runtime's bindings import it), so runtimes compare without the harness's share
    rss_imports_bytes: int = 0
    rss_model_bytes: int = 0
    peak_rss_model_bytes: int = 0
    pp: dict[str, float] = field(default_factory=dict)
    tg: dict[str, float] = field(default_factory=dict)
    ttft: dict[str, float] = field(default_factory=dict)
    tries: int = 0
    cv: float = float("nan")
    logit_error: float = float("nan")
    quantisation_error: float = float("nan")  # eager PyTorch's logit error with the weights as exported
    tolerance: float = float("nan")  # derived from quantisation_error (fleetbench.edge.llm.tolerance)
    decode_logit_error: float = float("nan")  # the timed decode path's logits against eager's
    greedy_equal: int = 0
    greedy_total: int = 0
    agrees: bool = False
    stability: dict[str, Any] = field(default_factory=dict)  # Stability.as_dict of the tries
    thermal: dict[str, Any] = field(default_factory=dict)  # ThermalRecord.summary around the worker
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The runtime as metrics and tables name it: llama.cpp for its CPU build, llama.cpp-vulkan, mlx, ..."""
        return self.runtime if self.backend == "cpu" else f"{self.runtime}-{self.backend}"

    @property
    def verdict(self) -> str:
        """stable, unstable or single sample: whether the tries met the CV target."""
        return str(self.stability.get("verdict", ""))


@dataclass(frozen=True)
class LlmOutcome:
    """What `edge llm` measured, as its view needs it."""

    model: str
    params: int
    threads: int
    prompt_tokens: int
    gen_tokens: int
    rows: list[LlmRow]
    skipped: list[tuple[str, str]]
    failures: list[str]
    png: Path | None


def _percentiles(values: list[float]) -> dict[str, float]:
    """The percentiles the tries support (fleetbench.edge.stability: p90 needs 10, p99 100); NaN otherwise."""
    return {name: supported_percentile(values, q) for name, q in PERCENTILES}


def _threads(cfg: EdgeLlmConfig) -> int:
    if cfg.threads is not None:
        return cfg.threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def eager_reference(model: Any, prompt: list[int], count: int) -> tuple[np.ndarray, list[int]]:
    """Eager PyTorch's logits of the prompt and its `count` greedy tokens (the whole sequence re-run each step)."""
    import torch

    tokens = list(prompt)
    with torch.no_grad():
        logits = model(torch.tensor([tokens]))[0]
        reference = logits.numpy().copy()
        greedy = [int(logits[-1].argmax())]
        while len(greedy) < count:
            out = model(torch.tensor([tokens + greedy]))[0, -1]
            greedy.append(int(out.argmax()))
    return reference, greedy


def export_all(
    model: Any, cfg: EdgeLlmConfig, folder: Path
) -> tuple[dict[tuple[str, str], Path], list[tuple[str, str]]]:
    """One export per runtime and dtype it reads; the pairs it does not, as skipped with why."""
    exports: dict[tuple[str, str], Path] = {}
    skipped: list[tuple[str, str]] = []
    for runtime in cfg.runtimes:
        for dtype in cfg.dtypes:
            if dtype not in DTYPES_OF[runtime]:
                why = NOT_OFFERED.get((runtime, dtype), f"{runtime} export writes {', '.join(DTYPES_OF[runtime])}")
                skipped.append((f"{runtime} {dtype}", why))
                continue
            if runtime == "executorch":
                exports[runtime, dtype] = _export_pte(model, cfg, folder)
            elif runtime == "llama.cpp":
                exports[runtime, dtype] = _export_gguf(model, folder, dtype)
            else:
                from fleetbench.edge.llm.mlx_model import export_mlx

                exports[runtime, dtype] = export_mlx(model, folder / f"mlx-{dtype}", dtype)  # type: ignore[arg-type]
        if runtime == "llama.cpp" and sys.platform != "darwin":
            skipped.append(("llama.cpp Metal", METAL_REASON))
        elif runtime == "mlx" and sys.platform != "darwin":
            skipped.append(("mlx Metal", METAL_REASON + " (MLX ran on the CPU)"))
        elif runtime == "executorch":
            from fleetbench.edge.llm.runtimes import executorch_delegates_not_run

            skipped += [(f"executorch {delegate}", why) for delegate, why in executorch_delegates_not_run()]
    return exports, [s for s in skipped if s[0]]


def _export_gguf(model: Any, folder: Path, dtype: str) -> Path:
    """The GGUF of `dtype`: written by the suite (f32, f16, q8_0), or llama.cpp's quantizer run on the f32 one."""
    from fleetbench.edge.llm.gguf_export import export_gguf
    from fleetbench.edge.llm.gguf_quant import quantize_gguf

    path = folder / f"model-{dtype}.gguf"
    if dtype not in ("q4_0", "q4_k_m"):
        return export_gguf(model, path, dtype)  # type: ignore[arg-type]
    source = folder / "model-f32.gguf"
    if not source.is_file():
        export_gguf(model, source, "f32")
    return quantize_gguf(source, path, dtype)  # type: ignore[arg-type]


def context_tokens(cfg: EdgeLlmConfig) -> int:
    """The positions a session holds: the prompt, then the longer of the timed and the agreement generation."""
    return cfg.prompt_tokens + max(cfg.gen_tokens, cfg.agree_tokens) + 8


def _export_pte(model: Any, cfg: EdgeLlmConfig, folder: Path) -> Path:
    """The model with a key/value cache of context_tokens positions, lowered to XNNPACK."""
    from fleetbench.edge.llm.pte_cache import export_cached_pte

    return export_cached_pte(model, context_tokens(cfg), cfg.prompt_tokens, folder / "model-f32.pte")


def _run_worker(spec: dict[str, Any], scratch: Path) -> dict[str, Any]:
    spec_path, out_path = scratch / "spec.json", scratch / "out.json"
    spec_path.write_text(jsonio.dumps(spec))
    out_path.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "fleetbench.edge.llm.worker", str(spec_path), str(out_path)],
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT_S,
        check=False,
        env=worker_env(str(spec.get("backend", "cpu"))),  # the Vulkan build first on its path
    )
    if not out_path.is_file():
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"ok": False, "error": f"the worker died: {tail}"}
    result: dict[str, Any] = json.loads(out_path.read_text())
    return result


@dataclass(frozen=True)
class Reference:
    """Eager PyTorch's answer on the prompt: its logits, its greedy tokens, and per (runtime, dtype) the
    logit error of the weights as that export stores them (fleetbench.edge.llm.tolerance)."""

    logits: np.ndarray
    greedy: list[int]
    quant_errors: dict[tuple[str, str], float]
    wrong_exports: dict[tuple[str, str], str] = field(default_factory=dict)  # gguf_quant.WrongExport's line


def _fill(row: LlmRow, out: dict[str, Any], ref: Reference, logits_path: Path, cv_target: float) -> None:
    """The worker's output `out` on `row`: figures, stability, and agreement with eager's logits and greedy
    tokens within the tolerance derived from the export's own error."""
    reference, greedy = ref.logits, ref.greedy
    wrong = ref.wrong_exports.get((row.runtime, row.dtype))
    if wrong is not None:
        row.ok, row.error = False, f"wrong export: {wrong}"
        return
    row.quantisation_error = ref.quant_errors[row.runtime, row.dtype]
    row.tolerance = tolerance(row_error(ref.quant_errors, row.runtime, row.dtype, row.backend))
    row.ok = bool(out.get("ok"))
    row.device = str(out.get("device", ""))
    if not row.ok:
        row.error = str(out.get("error"))
        return
    where = out.get("placement") or {}
    row.placement = where
    row.energy = dict(out.get("energy") or {})
    row.device = str(where.get("device") or row.device)  # llama.cpp's own word on where the weights went
    row.offloaded_layers, row.layers = int(where.get("offloaded_layers", 0)), where.get("layers")
    row.load_s, row.cold_load_s = out["load_s"], out["cold_load_s"]
    row.cold_load_page_cache_dropped, row.load_kind = out["cold_load_page_cache_dropped"], out["load_kind"]
    row.rss_after_load_bytes, row.peak_rss_bytes = out["rss_after_load_bytes"], out["peak_rss_bytes"]
    row.rss_imports_bytes = out["rss_imports_bytes"]
    row.rss_model_bytes, row.peak_rss_model_bytes = out["rss_model_bytes"], out["peak_rss_model_bytes"]
    row.samples = {"pp": out["pp_tokens_per_s"], "tg": out["tg_tokens_per_s"], "ttft": out["ttft_s"]}
    row.pp, row.ttft = _percentiles(row.samples["pp"]), _percentiles(row.samples["ttft"])
    row.tg = _percentiles(row.samples["tg"])
    # One try has no spread: the worker writes that NaN as null (strict JSON), read back as NaN.
    row.tries, row.cv = len(out["pp_tokens_per_s"]), float("nan") if out["cv"] is None else float(out["cv"])
    row.stability = Stability(row.tries, row.cv, cv_target).as_dict()
    logits = np.load(logits_path)
    row.logit_error = logit_error(logits, reference)
    decoded = np.load(decode_logits_path(logits_path))
    tail = reference[len(reference) - len(decoded) :]
    row.decode_logit_error = float(np.abs(decoded - tail).max() / np.abs(reference).max())
    row.greedy_total = len(greedy)
    row.greedy_equal = sum(1 for a, b in zip(out["greedy"], greedy, strict=False) if a == b)
    row.agrees = max(row.logit_error, row.decode_logit_error) <= row.tolerance and (
        row.dtype != "f32" or row.greedy_equal == row.greedy_total
    )


def decode_logits_path(logits_path: Path) -> Path:
    """Where the worker writes the decode path's logits, beside the full forward's."""
    return logits_path.with_name("decode_" + logits_path.name)


def _record_energy(bench: BenchmarkRun, row: LlmRow, ident: dict[str, str]) -> None:
    """Joules per token of the row's tries, where a power source gave a figure (the record says why not)."""
    per_token = row.energy.get("joules_per_token")
    if per_token is not None:
        source = str(row.energy["source"])
        bench.metrics.set("fleetbench_edge_llm_energy_per_token_joules", per_token, source=source, **ident)


def _record(bench: BenchmarkRun, row: LlmRow) -> None:
    ident = {"runtime": row.label, "dtype": row.dtype, "mmap": str(row.mmap).lower()}
    # NaN percentiles (too few tries to support them) are left out.
    for phase, values in (("pp", row.pp), ("tg", row.tg)):
        for name, value in values.items():
            if math.isfinite(value):
                bench.metrics.set("fleetbench_edge_llm_tokens_per_second", value, phase=phase, percentile=name, **ident)
    for name, value in row.ttft.items():
        if math.isfinite(value):
            bench.metrics.set("fleetbench_edge_llm_time_to_first_token_seconds", value, percentile=name, **ident)
    for phase in ("before", "after"):
        celsius = row.thermal.get(f"celsius_{phase}")
        if celsius is not None:
            bench.metrics.set("fleetbench_edge_llm_temperature_celsius", celsius, phase=phase, **ident)
    if row.thermal.get("throttled") is not None:
        bench.metrics.set("fleetbench_edge_llm_throttled", 1 if row.thermal["throttled"] else 0, **ident)
    _record_energy(bench, row, ident)
    bench.metrics.set("fleetbench_edge_llm_load_seconds", row.load_s, **ident)
    bench.metrics.set("fleetbench_edge_llm_cold_load_seconds", row.cold_load_s, **ident)
    bench.metrics.set("fleetbench_edge_llm_rss_bytes", row.rss_after_load_bytes, phase="load", **ident)
    bench.metrics.set("fleetbench_edge_llm_rss_bytes", row.peak_rss_bytes, phase="peak", **ident)
    bench.metrics.set("fleetbench_edge_llm_rss_bytes", row.rss_imports_bytes, phase="imports", **ident)
    bench.metrics.set("fleetbench_edge_llm_rss_bytes", row.rss_model_bytes, phase="model_load", **ident)
    bench.metrics.set("fleetbench_edge_llm_rss_bytes", row.peak_rss_model_bytes, phase="model_peak", **ident)
    if row.mmap:  # agreement does not depend on how the weights were loaded: once per runtime and dtype
        pair = {"runtime": row.label, "dtype": row.dtype}
        bench.metrics.set("fleetbench_edge_llm_logit_error_ratio", row.logit_error, **pair)
        bench.metrics.set("fleetbench_edge_llm_agreement", 1 if row.agrees else 0, **pair)
    bench.add_headline(
        "fleetbench_edge_llm_tokens_per_second", row.pp["p50"], row.samples["pp"], phase="pp", percentile="p50", **ident
    )
    bench.add_headline(
        "fleetbench_edge_llm_tokens_per_second", row.tg["p50"], row.samples["tg"], phase="tg", percentile="p50", **ident
    )


def _measure(  # noqa: PLR0913 - what runs, on what, judged against what, watched and metered how
    cfg: EdgeLlmConfig,
    exports: dict[tuple[str, str], Path],
    prompt: list[int],
    ref: Reference,
    context: RunContext,
    watch: Watch,
    energy_sources: tuple[str, ...] = (),
) -> list[LlmRow]:
    rows: list[LlmRow] = []
    builds = llamacpp_backends(cfg)[0]
    plan = [
        (runtime, dtype, backend, mmap)
        for (runtime, dtype) in exports
        for backend in (builds if runtime == "llama.cpp" else ["cpu"])
        for mmap in cfg.mmap
        if not _underived(cfg, backend, dtype)
    ]
    with (
        tempfile.TemporaryDirectory(prefix="fleetbench-llm-") as tmp,
        context.progress.task("edge llm", "measuring ...", total=len(plan)) as task,
    ):
        scratch = Path(tmp)
        for runtime, dtype, backend, mmap in plan:
            row = LlmRow(runtime, dtype, mmap, backend, _gpu_layers(cfg, backend))
            task.update(f"{row.label} {dtype} {'mmap' if mmap else 'read-in'}")
            logits_path = scratch / "logits.npy"
            spec = {
                "runtime": runtime,
                "backend": backend,
                "gpu_layers": row.gpu_layers,
                "path": str(exports[runtime, dtype]),
                "mmap": mmap,
                "kv_f32": dtype == "f32",  # a float32 file's check sees float32 arithmetic only
                "threads": _threads(cfg),
                "context": context_tokens(cfg),
                "prompt": prompt,
                "gen_tokens": cfg.gen_tokens,
                "agree_tokens": cfg.agree_tokens,
                "decode_check_tokens": DECODE_CHECK_TOKENS,
                "decode_logits_out": str(decode_logits_path(logits_path)),
                "min_tries": cfg.min_tries,
                "max_tries": cfg.max_tries,
                "cv_target": cfg.cv_target,
                "logits_out": str(logits_path),
                "energy_sources": list(energy_sources),
            }
            out, record = watch.around(functools.partial(_run_worker, spec, scratch))
            _fill(row, out, ref, logits_path, cfg.cv_target)
            row.thermal = {**record.summary(), "warnings": record.warnings}
            rows.append(row)
            task.advance()
    return rows


def _failures(rows: list[LlmRow]) -> list[str]:
    out = []
    for row in rows:
        what = f"{row.label} {row.dtype} {'mmap' if row.mmap else 'read-in'}"
        if not row.ok:
            out.append(f"{what}: {row.error}")
        elif not row.agrees:
            out.append(
                f"{what}: logits off eager by {row.logit_error:.2e} (decode path {row.decode_logit_error:.2e}) "
                "of their range (tolerance "
                f"{row.tolerance:.1e}, {MARGIN:g}x the export's own {row.quantisation_error:.1e}"
                f"{_arithmetic(row)}), greedy "
                f"{row.greedy_equal}/{row.greedy_total} equal"
            )
    return out


def _arithmetic(row: LlmRow) -> str:
    dtype = ARITHMETIC_DTYPE.get(row.backend)
    return f" or {dtype} arithmetic's on {row.backend}" if dtype else ""


def _write(folder: Path, outcome: LlmOutcome, plot: bool) -> Path | None:
    rows = [asdict(r) for r in outcome.rows]
    (folder / "llm_results.json").write_text(jsonio.dumps({"rows": rows, "skipped": outcome.skipped}, indent=1) + "\n")
    ok = [r for r in outcome.rows if r.ok]
    if not plot or not ok:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.label}\n{r.dtype} {'mmap' if r.mmap else 'read'}" for r in ok]
    fig, axes = plt.subplots(1, 3, figsize=(4 + 1.4 * len(ok), 4))
    for ax, (title, values) in zip(
        axes,
        (
            ("prefill pp tok/s (p50)", [r.pp["p50"] for r in ok]),
            ("decode tg tok/s (p50)", [r.tg["p50"] for r in ok]),
            ("load ms", [r.load_s * 1e3 for r in ok]),
        ),
        strict=True,
    ):
        colours = {"llama.cpp": "#1f77b4", "llama.cpp-vulkan": "#2ca02c"}
        ax.bar(range(len(ok)), values, color=[colours.get(r.label, "#ff7f0e") for r in ok])
        ax.set_xticks(range(len(ok)), labels, fontsize=7, rotation=60)
        ax.set_title(title, fontsize=9)
    fig.suptitle(
        f"{outcome.model}: {outcome.prompt_tokens}-token prompt, {outcome.gen_tokens} generated, {outcome.threads} threads"
    )
    fig.tight_layout()
    png = folder / "llm_runtimes.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[LlmOutcome]:
    """Export, measure each runtime side by side, check agreement; a wrong export fails the run last."""
    import torch

    from fleetbench.train.decoder import param_counts

    cfg = config.edge.llm
    if cfg.gguf is not None:
        cfg = _gguf_only(cfg)
    else:
        _refuse_nothing_measured(cfg)
    _require(cfg)
    model, name, gguf_dtype = _model(cfg, config.edge.seed)
    if cfg.prompt_tokens + cfg.gen_tokens > 8192:
        raise UserError(
            f"edge.llm.prompt_tokens + gen_tokens = {cfg.prompt_tokens + cfg.gen_tokens}; accepted: at most 8192"
        )
    generator = torch.Generator().manual_seed(config.edge.seed)
    prompt = torch.randint(0, model.shape.vocab_size, (cfg.prompt_tokens,), generator=generator).tolist()
    bench = open_run(config, context, BENCHMARK, cfg, "cpu", "cpu")
    folder = context.folder("edge")
    with bench:
        folder.mkdir(parents=True, exist_ok=True)
        with context.progress.task("edge llm", "eager reference and exports ..."):
            reference = eager_reference(model, prompt, cfg.agree_tokens)
            exports, skipped = _exports(model, cfg, config.edge.llm, folder / "llm", gguf_dtype)
        for what, why in skipped:
            log.info("skipped %s: %s", what, why)
        quant_errors, wrong_exports = _errors(model, cfg, prompt, reference[0], exports, gguf_dtype)
        watch = Watch.start(config.edge)
        ref = Reference(reference[0], reference[1], quant_errors, wrong_exports)
        rows = _measure(cfg, exports, prompt, ref, context, watch, tuple(config.edge.energy_sources))
        for row in rows:
            if row.ok:
                _record(bench, row)
        failures = _failures(rows)
        outcome = LlmOutcome(
            name,
            param_counts(model.shape)[0],
            _threads(cfg),
            cfg.prompt_tokens,
            cfg.gen_tokens,
            rows,
            skipped,
            failures,
            None,
        )
        png = _write(folder, outcome, config.edge.plot)
        outcome = LlmOutcome(**{**outcome.__dict__, "png": png})
        bench.summary.update(
            {
                "rows": [asdict(r) for r in rows],
                "skipped": skipped,
                "failures": failures,
                "tolerance": {f"{r.runtime} {r.dtype}": r.tolerance for r in rows},
            }
        )
        if failures:
            bench.finish(error="wrong or failed runtimes: " + "; ".join(failures))
    result = JobResult([bench.result()], outcome)
    if failures:
        raise JobFailed("wrong or failed runtimes: " + "; ".join(failures), result)
    return result


def _exports(
    model: Any, cfg: EdgeLlmConfig, asked: EdgeLlmConfig, folder: Path, gguf_dtype: str | None
) -> tuple[dict[tuple[str, str], Path], list[tuple[str, str]]]:
    """The files each runtime runs (a --gguf file as it is, else the exports), and what is left out with why
    (`asked`: the runtimes as configured, before --gguf narrowed them)."""
    if cfg.gguf is not None and gguf_dtype is not None:
        exports, skipped = {("llama.cpp", gguf_dtype): cfg.gguf}, gguf_left_out(asked)
    else:
        exports, skipped = export_all(model, cfg, folder)
    builds, left_out = llamacpp_backends(cfg)
    skipped += left_out
    skipped += [
        (f"llama.cpp {b} {d}", UNDERIVED[b, d])
        for (r, d) in exports
        for b in builds
        if r == "llama.cpp" and _underived(cfg, b, d)
    ]
    return exports, skipped


def _errors(
    model: Any,
    cfg: EdgeLlmConfig,
    prompt: list[int],
    logits: np.ndarray,
    exports: dict[tuple[str, str], Path],
    gguf_dtype: str | None,
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], str]]:
    """Each export's own logit error (a --gguf file's: llama.cpp's activation rounding), the arithmetic's of
    the GPU builds that run (tolerance.row_error), and the exports that are not the model's weights."""
    if cfg.gguf is not None and gguf_dtype is not None:
        from fleetbench.edge.llm.gguf_source import activation_rounding_error

        error = activation_rounding_error(model, prompt, logits, gguf_dtype)
        quant_errors, wrong_exports = {("llama.cpp", gguf_dtype): error}, dict[tuple[str, str], str]()
    else:
        quant_errors, wrong_exports = _quant_errors(model, prompt, logits, exports)
    for build in llamacpp_backends(cfg)[0]:
        arithmetic = ARITHMETIC_DTYPE.get(build)
        if arithmetic is not None and ("llama.cpp", arithmetic) not in quant_errors:
            quant_errors["llama.cpp", arithmetic] = quantisation_error(model, prompt, logits, "llama.cpp", arithmetic)
    return quant_errors, wrong_exports


def _model(cfg: EdgeLlmConfig, seed: int) -> tuple[Any, str, str | None]:
    """The model eager runs, its name for the view, and the dtype of a --gguf file (None otherwise)."""
    if cfg.gguf is not None:
        from fleetbench.edge.llm.gguf_source import load_gguf

        model, dtype = load_gguf(cfg.gguf)
        return model, cfg.gguf.name, dtype
    if cfg.hf is not None:
        from fleetbench.edge.llm.hf_source import load_hf

        return load_hf(cfg.hf), cfg.hf.name, None
    from fleetbench.edge.llm.source import build_llama

    name = cfg.preset if cfg.checkpoint is None else f"{cfg.checkpoint.name} ({cfg.preset})"
    return build_llama(cfg.preset, seed, cfg.checkpoint), name, None


def _gguf_only(cfg: EdgeLlmConfig) -> EdgeLlmConfig:
    """--gguf: llama.cpp alone runs the file; refused where the runtimes leave llama.cpp out."""
    if "llama.cpp" not in cfg.runtimes:
        raise UserError(
            f"edge.llm.gguf is set but edge.llm.runtimes are {', '.join(cfg.runtimes)}; accepted: runtimes with "
            "llama.cpp (the one runtime that runs a GGUF)"
        )
    return cfg.model_copy(update={"runtimes": ["llama.cpp"]})


def gguf_left_out(cfg: EdgeLlmConfig) -> list[tuple[str, str]]:
    """One line per runtime a --gguf run leaves out, with why."""
    why = {
        "mlx": "cannot run a GGUF (it runs its own safetensors export; --hf DIR exports a llama folder to it)",
        "executorch": "cannot run a GGUF (it runs a .pte program; --hf DIR exports a llama folder to it)",
    }
    return [(runtime, why[runtime]) for runtime in cfg.runtimes if runtime in why]


def _quant_errors(
    model: Any, prompt: list[int], logits: np.ndarray, exports: dict[tuple[str, str], Path]
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], str]]:
    """Per export, eager's logit error with the weights as it stores them; the exports whose file is not
    the model's weights (gguf_quant.WrongExport), with why."""
    from fleetbench.edge.llm.gguf_quant import WrongExport

    errors: dict[tuple[str, str], float] = {}
    wrong: dict[tuple[str, str], str] = {}
    for (runtime, dtype), path in exports.items():
        try:
            errors[runtime, dtype] = quantisation_error(model, prompt, logits, runtime, dtype, path)
        except WrongExport as exc:
            wrong[runtime, dtype] = str(exc)
    return errors, wrong


def llamacpp_backends(cfg: EdgeLlmConfig) -> tuple[list[str], list[tuple[str, str]]]:
    """The llama.cpp builds to run, and those left out with why: as configured (a build that is not
    installed is refused in _require), else the CPU build, and the Vulkan one where it is installed."""
    if "llama.cpp" not in cfg.runtimes:
        return [], []
    if cfg.llamacpp_backends is not None:
        return list(cfg.llamacpp_backends), []
    why = backends.missing("vulkan")
    return (["cpu"], [("llama.cpp vulkan", why)]) if why else (["cpu", "vulkan"], [])


def _underived(cfg: EdgeLlmConfig, backend: str, dtype: str) -> bool:
    """Whether a default run leaves (backend, dtype) out: no tolerance is derived for its arithmetic."""
    return cfg.llamacpp_backends is None and (backend, dtype) in UNDERIVED


def _gpu_layers(cfg: EdgeLlmConfig, backend: str) -> int:
    """llama.cpp's n_gpu_layers of a row: none on the CPU build, edge.llm.gpu_layers (unset: all, -1) on a GPU one."""
    if backend == "cpu":
        return 0
    return -1 if cfg.gpu_layers is None else cfg.gpu_layers


def _refuse_nothing_measured(cfg: EdgeLlmConfig) -> None:
    """A run whose runtimes read none of its dtypes would measure nothing and look like a success: refused."""
    if any(dtype in DTYPES_OF[runtime] for runtime in cfg.runtimes for dtype in cfg.dtypes):
        return
    reads = "; ".join(f"{runtime} reads {', '.join(DTYPES_OF[runtime])}" for runtime in cfg.runtimes)
    raise UserError(
        f"edge llm: nothing would be measured: runtimes {', '.join(cfg.runtimes)} read none of the dtypes "
        f"{', '.join(cfg.dtypes)} ({reads}); accepted: a dtype one of the runtimes reads"
    )


def _require(cfg: EdgeLlmConfig) -> None:
    """Refuse, in one line with the install hint, a runtime whose package is missing."""
    import importlib.util

    packages = {
        "llama.cpp": ("llama_cpp", "llm", "llama-cpp-python==0.3.36"),
        "mlx": ("mlx", "llm", "mlx[cpu]==0.32.4"),
        "executorch": ("executorch", "mobile", "executorch==1.5.1"),
    }
    # llama.cpp's Vulkan rows run their own build (checked below): only its CPU rows need the module here
    cpu_llama = "cpu" in llamacpp_backends(cfg)[0]
    for runtime in cfg.runtimes:
        module, extra, pip = packages[runtime]
        if (runtime != "llama.cpp" or cpu_llama) and importlib.util.find_spec(module) is None:
            # llama-cpp-python ships only sources: `make setup` (the [llm] extra) builds it once, minutes
            build = " (`make setup` builds it once: about 5-10 minutes on 2 cores)" if runtime == "llama.cpp" else ""
            raise UserError(
                f"edge.llm.runtimes has {runtime} but {module} is not installed; install the [{extra}] extra ({pip}){build}, "
                f"or accepted without it: {', '.join(r for r in packages if r != runtime)}"
            )
    if cfg.hf is not None and importlib.util.find_spec("safetensors") is None:
        raise UserError(
            "edge.llm.hf is set but safetensors is not installed; install the [llm] extra (safetensors==0.8.0)"
        )
    for backend in llamacpp_backends(cfg)[0]:
        why = backends.missing(backend)
        if why:
            raise UserError(f"edge.llm.llamacpp_backends has {backend} but there is {why}; accepted without it: cpu")
    if "llama.cpp" in cfg.runtimes and "gguf" not in sys.modules and importlib.util.find_spec("gguf") is None:
        raise UserError(
            "edge.llm.runtimes has llama.cpp but gguf is not installed; install the [llm] extra (gguf==0.19.0)"
        )


JOB: Job[LlmOutcome] = run
