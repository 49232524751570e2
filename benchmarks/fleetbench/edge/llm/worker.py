"""One runtime, one dtype, one load mode, measured in a process of its own, so that its peak RSS and load
time are its own: `python -m fleetbench.edge.llm.worker SPEC.json OUT.json`.

Order: the runtime's imports (RSS before and after: the interpreter's and the imports' share, torch's
among them where ExecuTorch's bindings import it), a cold load (the model's files dropped from the
page cache first with posix_fadvise(DONTNEED); timed), the session closed, a warm load (timed; RSS
after it), warm-up (one pp and one tg, untimed), tries of pp, time to first token and tg until the
coefficient of variation of both pp and tg is below the target (at least min_tries, at most
max_tries), peak RSS, then the agreement pass (logits of the prompt, the timed decode path's logits
over the prompt's last tokens, greedy tokens), which loads what it needs after the peak was read.
The model's own memory is the RSS after the load minus the RSS after the imports (`rss_model_bytes`,
`peak_rss_model_bytes`): the runtimes' figures side by side without the interpreter's or torch's share.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psutil

if TYPE_CHECKING:
    from fleetbench.energy.meter import EnergyMeter

from fleetbench import jsonio


def _peak_rss() -> int:
    """This process's peak resident set: VmHWM (ru_maxrss survives exec on Linux: it would be the parent's)."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def drop_from_page_cache(path: Path) -> bool:
    """Ask the kernel to drop `path`'s pages (every file under it, for a folder) from the page cache:
    posix_fadvise(DONTNEED), which needs no root; pages another process maps stay. False where the
    platform has no posix_fadvise (macOS): the cold load is then not cold, and the record says so."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)  # written pages are dirty until flushed, and DONTNEED keeps dirty pages
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


# How each runtime's load is to be read: MLX maps and loads lazily; its loader forces every array at once.
LOAD_KIND = {
    "llama.cpp": "eager",
    "executorch": "eager",
    "mlx": "lazy (mx.load maps the file; load_mlx forces every array with mx.eval)",
}


def _cv(values: list[float]) -> float:
    return float(np.std(values) / np.mean(values)) if len(values) > 1 and np.mean(values) > 0 else float("inf")


def _try(session: Any, prompt: list[int], gen: int) -> tuple[float, float, float]:
    """(pp seconds, time to first token in seconds, tg seconds) of one try."""
    start = time.perf_counter()
    last = session.prefill(prompt)
    prefilled = time.perf_counter()
    int(np.argmax(last))  # the first generated token is known here
    first = time.perf_counter()
    session.prefill([prompt[0]])  # empty the cache: tg starts at position 1, as llama-bench's at 0
    token = prompt[0]
    decoding = 0.0
    for _ in range(gen):
        before = time.perf_counter()
        logits = session.decode(token)
        decoding += time.perf_counter() - before
        # the greedy pick is the harness's work, off the clock: llama-bench's tg picks no token at all
        token = int(np.argmax(logits))
    return prefilled - start, first - start, decoding


def decode_logits(session: Any, prompt: list[int], count: int) -> np.ndarray:
    """The timed path's logits at the prompt's last `count` + 1 positions: prefill of all but the last
    `count` tokens, then those tokens decoded one at a time through the key/value cache, exactly as the
    tg tries run. Rows line up with the eager logits of positions len(prompt) - count - 1 .. end."""
    count = max(0, min(count, len(prompt) - 1))
    head = len(prompt) - count
    rows = [session.prefill(prompt[:head])]
    rows += [session.decode(token) for token in prompt[head:]]
    return np.stack(rows).astype(np.float32)


def _greedy(session: Any, prompt: list[int], count: int) -> list[int]:
    tokens = [int(np.argmax(session.prefill(prompt)))]
    while len(tokens) < count:
        tokens.append(int(np.argmax(session.decode(tokens[-1]))))
    return tokens


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything one (runtime, dtype, mmap) measured; see the module docstring."""
    from fleetbench.edge.llm.runtimes import open_session, prepare

    process = psutil.Process()
    rss_interpreter = process.memory_info().rss
    device = prepare(spec["runtime"])  # imports outside the timed load
    prompt: list[int] = spec["prompt"]
    gen = int(spec["gen_tokens"])
    path = Path(spec["path"])
    rss_before = process.memory_info().rss

    def load() -> tuple[Any, float]:
        start = time.perf_counter()
        opened = open_session(
            spec["runtime"],
            path,
            bool(spec["mmap"]),
            int(spec["threads"]),
            spec["context"],
            len(prompt),
            bool(spec.get("kv_f32", False)),
            int(spec.get("gpu_layers", 0)),
        )
        return opened, time.perf_counter() - start

    dropped = drop_from_page_cache(path)
    session, cold_load_s = load()
    session.close()
    del session
    session, load_s = load()
    rss_loaded = process.memory_info().rss
    where = _placement(spec, session)
    _try(session, prompt, min(gen, 4))  # warm-up: first-call allocations, MLX's graph caches
    pp: list[float] = []
    tg: list[float] = []
    ttft: list[float] = []
    meter = _meter(spec)
    while len(pp) < spec["max_tries"]:
        p, f, t = _try(session, prompt, gen)
        pp.append(len(prompt) / p)
        ttft.append(f)
        tg.append(gen / t)
        if len(pp) >= spec["min_tries"] and max(_cv(pp), _cv(tg)) <= spec["cv_target"]:
            break
    # the tries' energy: every try processed the prompt and generated `gen` tokens
    energy = meter.stop().summary(len(pp), len(pp) * (len(prompt) + gen)) if meter is not None else None
    peak_rss = _peak_rss()
    logits = session.logits(prompt)
    decoded = decode_logits(session, prompt, int(spec["decode_check_tokens"]))
    greedy = _greedy(session, prompt, int(spec["agree_tokens"]))
    session.close()
    np.save(spec["logits_out"], logits.astype(np.float32))
    np.save(spec["decode_logits_out"], decoded)
    return {
        "load_s": load_s,
        "cold_load_s": cold_load_s,
        "cold_load_page_cache_dropped": dropped,
        "load_kind": LOAD_KIND[spec["runtime"]],
        "device": device,
        "rss_interpreter_bytes": rss_interpreter,
        "rss_imports_bytes": rss_before - rss_interpreter,
        "rss_after_load_bytes": rss_loaded,
        "rss_load_delta_bytes": rss_loaded - rss_before,
        "rss_model_bytes": rss_loaded - rss_before,
        "peak_rss_model_bytes": peak_rss - rss_before,
        "peak_rss_bytes": peak_rss,
        "pp_tokens_per_s": pp,
        "tg_tokens_per_s": tg,
        "ttft_s": ttft,
        "cv": max(_cv(pp), _cv(tg)),
        "greedy": greedy,
        "placement": where,
        "energy": energy,
    }


def _meter(spec: dict[str, Any]) -> EnergyMeter | None:
    """The energy meter of the timed tries (edge.energy_sources): NVML for a GPU build's row, where NVML
    reads (an NVIDIA GPU under its Vulkan driver), else RAPL and the board's sampled power; None: none asked."""
    from fleetbench.energy.meter import EnergyMeter
    from fleetbench.energy.sampled import SAMPLED_SOURCES

    sources: list[str] = spec.get("energy_sources", [])
    if not sources:
        return None
    gpu = spec.get("backend", "cpu") != "cpu" and "nvml" in sources
    return EnergyMeter(
        gpu_index=0 if gpu else None,
        sampled=tuple(s for s in sources if s in SAMPLED_SOURCES),
        read_rapl="rapl" in sources,
    ).start()


def _placement(spec: dict[str, Any], session: Any) -> dict[str, Any]:
    """Where a llama.cpp session's model went, and which build ran it; a Vulkan row whose build registered
    no Vulkan device (no driver, or the CPU build found first) is an error, not a CPU row under its name."""
    if spec["runtime"] != "llama.cpp":
        return {}
    import llama_cpp

    where: dict[str, Any] = {**session.placement, "build": str(Path(llama_cpp.__file__).parent)}
    backend = spec.get("backend", "cpu")
    if backend == "vulkan" and not any(d["name"].startswith("Vulkan") for d in where["devices_registered"]):
        names = ", ".join(d["name"] for d in where["devices_registered"])
        raise RuntimeError(f"llama.cpp from {where['build']} registered no Vulkan device (only {names})")
    return where


def main(argv: list[str]) -> int:
    """Read the spec, measure, write the result (or the error, one line) as JSON."""
    spec = json.loads(Path(argv[0]).read_text())
    try:
        out: dict[str, Any] = {"ok": True, **measure(spec)}
    except Exception as exc:  # the parent reports it as this runtime's failure, in one line
        out = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    Path(argv[1]).write_text(jsonio.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
