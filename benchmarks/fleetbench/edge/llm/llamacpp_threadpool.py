"""A ggml CPU threadpool attached to a llama.cpp context for the context's whole life, as llama.cpp's own
tools attach one (llama-bench, llama-cli). llama-cpp-python attaches none, and then ggml makes and frees a
pool for every graph it computes, that is for every decoded token; where ggml is built without OpenMP
(Apple's clang has none) that starts and joins the worker threads at every token.

The pool's functions are looked up through the CPU backend's registry, as llama-bench does, so a ggml that
loads its CPU backend at run time (GGML_BACKEND_DL) works too.
"""

from __future__ import annotations

import ctypes
from typing import Any

_CPU = 0  # GGML_BACKEND_DEVICE_TYPE_CPU
# ggml_threadpool_params_init fills the struct; its layout (512 cpumask bools and four scalars, 528 bytes
# in ggml.h today) is never read here, so a buffer with room to spare keeps a longer one from overrunning
_PARAMS_BYTES = 4096
_NEW = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _ggml() -> Any:
    """ggml's library as llama-cpp-python loaded it (the CPU backend and ggml-base are its dependencies)."""
    from llama_cpp import _ggml

    lib = _ggml.libggml
    lib.ggml_backend_dev_by_type.argtypes, lib.ggml_backend_dev_by_type.restype = [ctypes.c_int], ctypes.c_void_p
    lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    lib.ggml_threadpool_params_init.argtypes, lib.ggml_threadpool_params_init.restype = (
        [ctypes.c_void_p, ctypes.c_int],
        None,
    )
    return lib


def _llama() -> Any:
    from llama_cpp import llama_cpp

    lib = llama_cpp._lib
    lib.llama_attach_threadpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.llama_attach_threadpool.restype = None
    return lib


class AttachedThreadpool:
    """One pool of `threads` (ggml's default parameters: hybrid polling, normal priority, no pinning) for
    both the single-token and the batch passes of `context`.

    `free` it only once the context is freed, llama-bench's order: after a detach, the CPU backend keeps the
    pool's address until its next graph and then pauses it, so a pool freed while its context lives is
    used after the free (a hang, where ggml is built without OpenMP and the pause takes the pool's mutex)."""

    def __init__(self, context: int, threads: int) -> None:
        ggml = _ggml()
        device = ggml.ggml_backend_dev_by_type(_CPU)
        registry = ggml.ggml_backend_dev_backend_reg(device) if device else None
        new, free = (
            ggml.ggml_backend_reg_get_proc_address(registry, name) if registry else None
            for name in (b"ggml_threadpool_new", b"ggml_threadpool_free")
        )
        if not new or not free:
            raise RuntimeError("llama.cpp: the CPU backend exposes no ggml_threadpool_new (is it loaded?)")
        self._new, self._free = _NEW(new), _FREE(free)
        params = ctypes.create_string_buffer(_PARAMS_BYTES)
        ggml.ggml_threadpool_params_init(params, threads)
        self.pool: int | None = self._new(params)
        if not self.pool:
            raise RuntimeError(f"llama.cpp: ggml_threadpool_new failed for {threads} threads")
        _llama().llama_attach_threadpool(context, self.pool, self.pool)

    def free(self) -> None:
        """Free the pool, after its context was freed; a second call does nothing."""
        if self.pool:
            self._free(self.pool)
            self.pool = None
