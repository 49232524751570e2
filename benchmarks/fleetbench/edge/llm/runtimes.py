"""One edge LLM runtime behind four calls: load, prefill (a prompt from an empty cache, the last position's
logits), decode (one token after what is cached), and logits (every position of a prompt, for the
agreement check). llama.cpp through llama-cpp-python (GGUF), MLX (safetensors + the mlx.nn module),
ExecuTorch (a .pte with a key/value cache, `pte_cache`).

Timings follow llama-bench: pp is a prompt of `prompt_tokens` processed as one batch from an empty
cache, tg is `gen_tokens` tokens decoded one at a time from an empty cache, its clock running over the
decode calls (a token in, its logits on the host out) and stopped while the harness picks the next token.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fleetbench.edge.llm.llamacpp_threadpool import AttachedThreadpool
from fleetbench.edge.native import native_stderr, optional_module


class Session(Protocol):
    """A loaded model in one runtime."""

    def prefill(self, tokens: list[int]) -> np.ndarray:
        """Empty the cache, process `tokens` as one batch; the last position's logits."""

    def decode(self, token: int) -> np.ndarray:
        """Process one more token after the cached ones; its logits."""

    def logits(self, tokens: list[int]) -> np.ndarray:
        """Logits of every position of `tokens` (seq, vocab), from an empty cache."""

    def close(self) -> None:
        """Free the model."""


class LlamaCppSession:
    """llama.cpp: a GGUF file, `use_mmap` on or off, `threads` for both batch and single-token passes,
    `gpu_layers` offloaded to the build's GPU device (-1: all; a CPU build offloads none). `placement`
    is where llama.cpp put the model (llamacpp_placement).

    `kv_f32`: the key/value cache in float32 (for a float32 file: its check then sees float32 arithmetic
    only); otherwise llama.cpp's default f16 cache, which alone moved the logits of a model with sharp
    attention by 9e-4 of their range (tests/test_edge_llm_models.py's Hugging Face folder)."""

    def __init__(  # noqa: PLR0913 - the worker's spec, field by field
        self, path: Path, mmap: bool, threads: int, context: int, batch: int, kv_f32: bool = False, gpu_layers: int = 0
    ) -> None:
        from llama_cpp import GGML_TYPE_F16, GGML_TYPE_F32, Llama

        from fleetbench.edge.llm.llamacpp_placement import LogCapture, devices, placement

        self._sink: list[str] = []
        self._kv_type = GGML_TYPE_F32 if kv_f32 else GGML_TYPE_F16
        capture = LogCapture()
        with native_stderr(self._sink), capture.capturing():
            self.llm = Llama(
                str(path),
                n_ctx=context,
                n_batch=batch,
                n_ubatch=batch,
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=gpu_layers,
                use_mmap=mmap,
                logits_all=False,
                verbose=False,
                type_k=self._kv_type,
                type_v=self._kv_type,
            )
        self.placement = placement("".join(capture.text), devices())
        self.path, self.mmap, self.threads, self.context = path, mmap, threads, context
        self.gpu_layers = gpu_layers
        import llama_cpp

        self._c = llama_cpp
        self._vocab = self.llm.n_vocab()
        self._view: tuple[int | None, np.ndarray] = (None, np.empty(0, dtype=np.float32))
        self._pool = AttachedThreadpool(self.llm._ctx.ctx, threads)

    def _last(self) -> np.ndarray:
        row = self._c.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        address = ctypes.cast(row, ctypes.c_void_p).value
        if address != self._view[0]:  # a new view only where llama.cpp moved its output buffer
            # as_array on a pointer costs about 12 us (ctypes' buffer format, parsed each time): 1 % of a token
            self._view = (address, np.ctypeslib.as_array(row, shape=(self._vocab,)))
        return self._view[1].copy()

    def _decode(self, tokens: list[int]) -> None:
        # llama_decode on llama_batch_get_one, as llama-bench does: Llama.eval's Python bookkeeping (its
        # batch object, cache trimming, score arrays) cost about 1 ms a token, 30-40 % of tg on this model
        array = (self._c.llama_token * len(tokens))(*tokens)
        code = self._c.llama_decode(self.llm._ctx.ctx, self._c.llama_batch_get_one(array, len(tokens)))
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")

    def prefill(self, tokens: list[int]) -> np.ndarray:
        """See Session."""
        self.llm._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
        self._decode(tokens)
        return self._last()

    def decode(self, token: int) -> np.ndarray:
        """See Session."""
        self._decode([token])
        return self._last()

    def logits(self, tokens: list[int]) -> np.ndarray:
        """See Session: a second context with every position's logits kept (logits_all)."""
        from llama_cpp import Llama

        with native_stderr(self._sink):
            full = Llama(
                str(self.path),
                n_ctx=self.context,
                n_batch=len(tokens),
                n_ubatch=len(tokens),
                n_threads=self.threads,
                n_gpu_layers=self.gpu_layers,  # the agreement runs where the timed passes ran
                use_mmap=self.mmap,
                logits_all=True,
                verbose=False,
                type_k=self._kv_type,
                type_v=self._kv_type,
            )
        try:
            full.eval(tokens)
            return np.array(full.scores[: len(tokens)])
        finally:
            full.close()

    def close(self) -> None:
        """See Session: the context first, then the threadpool it used (see AttachedThreadpool)."""
        self.llm.close()
        self._pool.free()


class MlxSession:
    """MLX: the exported folder loaded lazily (memory-mapped) or read into memory first; a key/value cache."""

    def __init__(self, folder: Path, mmap: bool, threads: int) -> None:
        import mlx.core as mx

        from fleetbench.edge.llm.mlx_model import load_mlx

        self.mx = mx
        self.model = load_mlx(folder, mmap)
        self.cache: list[list[Any]] = []

    def _run(self, tokens: list[int], cache: list[list[Any]] | None) -> np.ndarray:
        mx = self.mx
        out = self.model(mx.array([tokens], dtype=mx.int32), cache)
        mx.eval(out)
        return np.array(out[0].astype(mx.float32))

    def prefill(self, tokens: list[int]) -> np.ndarray:
        """See Session."""
        self.cache = [[] for _ in self.model.layers]
        last: np.ndarray = self._run(tokens, self.cache)[-1]
        return last

    def decode(self, token: int) -> np.ndarray:
        """See Session."""
        last: np.ndarray = self._run([token], self.cache)[-1]
        return last

    def logits(self, tokens: list[int]) -> np.ndarray:
        """See Session."""
        return self._run(tokens, None)

    def close(self) -> None:
        """See Session."""
        self.cache = []


class ExecuTorchSession:
    """ExecuTorch: the .pte of `pte_cache` (XNNPACK, a key/value cache in the program's mutable buffers, a
    dynamic sequence length), on `threads` XNNPACK threads. mmap: the runtime's file (mmap) data loader;
    else the bytes are read in and handed over as a buffer."""

    def __init__(self, path: Path, mmap: bool, threads: int) -> None:
        Runtime = optional_module("executorch.runtime").Runtime
        optional_module("executorch.extension.pybindings.portable_lib")._unsafe_reset_threadpool(threads)

        self._sink: list[str] = []
        # the runtime reads the buffer in place: it must live as long as the program (freed: a crash)
        self._data = None if mmap else path.read_bytes()
        with native_stderr(self._sink):
            runtime = Runtime.get()
            program = runtime.load_program(path if self._data is None else self._data)
            self.method = program.load_method("forward")
        self.position = 0

    def _run(self, tokens: list[int], start: int) -> np.ndarray:
        import torch

        with native_stderr(self._sink):
            out = self.method.execute([torch.tensor([tokens], dtype=torch.long), torch.tensor([start])])
        self.position = start + len(tokens)
        result: np.ndarray = out[0][0].float().numpy()
        return result

    def prefill(self, tokens: list[int]) -> np.ndarray:
        """See Session."""
        last: np.ndarray = self._run(tokens, 0)[-1]
        return last

    def decode(self, token: int) -> np.ndarray:
        """See Session."""
        last: np.ndarray = self._run([token], self.position)[-1]
        return last

    def logits(self, tokens: list[int]) -> np.ndarray:
        """See Session."""
        return self._run(tokens, 0)

    def close(self) -> None:
        """See Session."""


# ExecuTorch delegates beside XNNPACK: the backend name its runtime registers, and what running it needs.
OTHER_DELEGATES = {
    "Vulkan": ("VulkanBackend", "an ExecuTorch runtime built with the Vulkan delegate (EXECUTORCH_BUILD_VULKAN)"),
    "CoreML": ("CoreMLBackend", "macOS or iOS on Apple hardware, with the CoreML delegate built in"),
    "MPS": ("MPSBackend", "macOS on Apple silicon, with the MPS delegate built in"),
}


def executorch_delegates_not_run() -> list[tuple[str, str]]:
    """(delegate, why) for each ExecuTorch delegate beside XNNPACK that `edge llm` does not run here."""
    with native_stderr([]):
        registered = list(
            optional_module("executorch.extension.pybindings.portable_lib")._get_registered_backend_names()
        )
    out = []
    for delegate, (backend, needs) in OTHER_DELEGATES.items():
        if backend in registered:
            why = f"this runtime has {backend}, but the LLM program is lowered to XNNPACK only"
        else:
            why = f"this runtime has no {backend} (it has {', '.join(registered) or 'none'}); needs {needs}"
        out.append((delegate, why))
    return out


def mlx_device() -> str:
    """Where MLX runs here: "gpu" (Metal, Apple silicon) where its GPU is available, else "cpu"."""
    import mlx.core as mx

    return "gpu" if mx.is_available(mx.gpu) else "cpu"


def prepare(runtime: str) -> str:
    """Import the runtime's modules, so a timed load is the model's load and not the import; the device
    that will run it (the record's `device`): llama.cpp's CPU build "cpu", MLX "gpu" (Metal) where it
    exists else "cpu", ExecuTorch "cpu (xnnpack)" (the delegate its program is lowered to)."""
    if runtime == "llama.cpp":
        import llama_cpp  # noqa: F401

        return "cpu"
    if runtime == "executorch":
        import torch  # noqa: F401

        with native_stderr([]):
            optional_module("executorch.runtime").Runtime.get()
        return "cpu (xnnpack)"
    import mlx.core as mx

    import fleetbench.edge.llm.mlx_model  # noqa: F401

    device = mlx_device()
    mx.set_default_device(mx.gpu if device == "gpu" else mx.cpu)
    return device


def open_session(  # noqa: PLR0913 - the worker's spec, field by field; kv_f32 and gpu_layers only llama.cpp reads
    runtime: str,
    path: Path,
    mmap: bool,
    threads: int,
    context: int,
    batch: int,
    kv_f32: bool = False,
    gpu_layers: int = 0,
) -> Session:
    """A session of `runtime` on the exported `path` (`kv_f32`: llama.cpp's key/value cache in float32;
    `gpu_layers`: llama.cpp's offload, -1 all)."""
    if runtime == "llama.cpp":
        return LlamaCppSession(path, mmap, threads, context, batch, kv_f32, gpu_layers)
    if runtime == "executorch":
        return ExecuTorchSession(path, mmap, threads)
    if runtime == "mlx":
        return MlxSession(path, mmap, threads)
    raise ValueError(f"unknown runtime {runtime!r}")
