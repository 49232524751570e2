"""What the FSDP2 knobs did in this run, measured by the trainer itself: the record's `summary.knobs`.

Each figure comes from the run, not from a model of it:

- Around the model build (`BuildMeter`), set against the unsharded model's parameter bytes and this
  rank's shard: the peak of the C heap's bytes in use (glibc's `mallinfo2`, read after every aten op
  of the build by a dispatch mode; torch's CPU allocator takes its memory there), less what was in
  use before; and the peak resident set size the build added (the kernel's `VmHWM`, reset through
  `/proc/self/clear_refs` just before), which also counts the pages of torch's own code the build
  touches first (tens of MB). With `meta_init` no rank ever holds the unsharded model, so the
  heap's peak stays below it; without, every rank builds the whole model first.
- On one step of each attempt, the probe step (`StepProbe`; the attempt's second step, or its only
  one; left out of tokens/s, MFU and step time like a profiled step, and not taken in a profiled
  run, whose trace has these figures):
  * `saved_for_backward_bytes`: a `torch.autograd.graph.saved_tensors_hooks` pack hook sums the
    distinct storages autograd keeps for backward during the forward, parameters left out (FSDP2
    frees or keeps those itself). That is the activation memory; with activation checkpointing a
    block keeps only its input.
  * `held_after_forward_bytes`: the memory the step holds once the loss is computed, less what was
    allocated when it started: on the CPU the C heap's bytes in use (glibc's `mallinfo2`, where
    torch's CPU allocator takes its memory), on CUDA `torch.cuda.memory_allocated`.
  * `unsharded_param_bytes_held`: the bytes of the parameters FSDP2 keeps unsharded between forward
    and backward (registered as plain tensors instead of DTensor shards): every block's with
    `reshard_after_forward=false`, none with true.
  * FLOPs (`torch.utils.flop_counter.FlopCounterMode`) of the forward, of forward plus backward,
    and of the blocks' forward: activation checkpointing adds its recompute to the backward. They
    are counted on a forward and backward of the step's batch run just before the step, whose
    gradients are dropped: under the counter's dispatch mode a few backward kernels round
    differently, so the training step itself runs without it (compiled blocks run eagerly for the count).
  The probe leaves the training bit for bit as it is without it (hooks that return what they get,
  counters of the heap).
- With `compile`: dynamo's counters after the run (frames, graphs, graph breaks with their reasons)
  and, per compiled module class, the frames compiled for its forward.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "BuildMeter",
    "HeapPeak",
    "StepProbe",
    "compile_report",
    "heap_in_use_bytes",
    "param_bytes",
    "probe_step",
]

log = logging.getLogger(__name__)

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (glibc 2.33 and later): every field a size_t."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@cache
def _mallinfo2() -> Any:
    """glibc's mallinfo2, or None where the C library has none (musl, macOS, old glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2
    function.argtypes = []
    return function


def heap_in_use_bytes() -> int | None:
    """Bytes the C heap has handed out and not taken back (arenas plus mmapped blocks), or None."""
    function = _mallinfo2()
    if function is None:
        return None
    info = function()
    return int(info.uordblks + info.hblkhd)


def _status_kib(key: str) -> int | None:
    try:
        for line in _STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False where Linux does not allow it."""
    try:
        _CLEAR_REFS.write_text("5", encoding="ascii")
    except OSError:
        return False
    return True


def param_bytes(model: nn.Module) -> tuple[int, int]:
    """(unsharded bytes, this rank's bytes) of the model's parameters: a DTensor counts its global
    size and its local shard; a plain tensor counts whole in both."""
    from torch.distributed.tensor import DTensor

    whole = local = 0
    for param in model.parameters():
        size = param.numel() * param.element_size()
        whole += size
        local += param.to_local().numel() * param.element_size() if isinstance(param, DTensor) else size
    return whole, local


# torch's TorchDispatchMode has unannotated __init__ and __init_subclass__: the two ignores below.
class HeapPeak(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The highest C-heap use (`heap_in_use_bytes`) seen after any aten op run under it."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.peak = heap_in_use_bytes() or 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        """Run the op, then note the heap's use."""
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, heap_in_use_bytes() or 0)
        return out


@dataclass
class BuildMeter:
    """What the model build added to this rank's memory at its peak, against the model's parameter bytes."""

    meta_init: bool
    heap_peak_growth_bytes: int | None = None
    peak_rss_growth_bytes: int | None = None
    unsharded_param_bytes: int = 0
    rank_param_bytes: int = 0
    rss_measured: bool = False

    @contextmanager
    def measure(self) -> Iterator[None]:
        """Around the build: the heap's peak through a dispatch mode; the peak-RSS mark reset first, read after."""
        self.rss_measured = _reset_peak_rss()
        rss_before = _status_kib("VmRSS")
        heap_before = heap_in_use_bytes()
        with HeapPeak() as heap:
            yield
        if heap_before is not None:
            self.heap_peak_growth_bytes = heap.peak - heap_before
        peak = _status_kib("VmHWM")
        if self.rss_measured and peak is not None and rss_before is not None:
            self.peak_rss_growth_bytes = max(0, peak - rss_before)

    def built(self, model: nn.Module) -> None:
        """Note the built (sharded) model's parameter bytes."""
        self.unsharded_param_bytes, self.rank_param_bytes = param_bytes(model)

    def summary(self) -> dict[str, Any]:
        """The figures for `summary.knobs.build`."""
        heap, whole = self.heap_peak_growth_bytes, self.unsharded_param_bytes
        return {
            "meta_init": self.meta_init,
            "heap_peak_growth_bytes": heap,
            "heap_peak_over_unsharded": heap / whole if heap is not None and whole else None,
            "peak_rss_growth_bytes": self.peak_rss_growth_bytes,
            "unsharded_param_bytes": whole,
            "rank_param_bytes": self.rank_param_bytes,
            "heap_how": "glibc mallinfo2 after every aten op of the build, less before it"
            if heap is not None
            else "not measured: no glibc mallinfo2",
            "rss_how": "VmHWM after the build less VmRSS before it (VmHWM reset through /proc/self/clear_refs)"
            if self.rss_measured
            else "not measured: /proc/self/clear_refs is not writable here",
        }


def probe_step(start_step: int, steps: int, profiled: bool) -> int | None:
    """The step (numbered from 1) this attempt measures: its second, or its only one; None in a profiled run."""
    if profiled or start_step >= steps:
        return None
    return min(start_step + 2, steps)


def _is_parameter(tensor: torch.Tensor) -> bool:
    base = tensor._base if tensor._base is not None else tensor
    return isinstance(base, nn.Parameter)


@dataclass
class StepProbe:
    """One step's activation memory and memory held between forward and backward; FLOPs of its batch."""

    device: torch.device
    saved: dict[int, int] = field(default_factory=dict)  # storage address -> bytes, of the activations saved
    start_bytes: int | None = None
    held_after_forward_bytes: int | None = None
    unsharded_param_bytes_held: int = 0
    forward_flop: int | None = None
    step_flop: int | None = None
    blocks_forward_flop: int | None = None

    def _allocated(self) -> int | None:
        if self.device.type == "cuda":
            return int(torch.cuda.memory_allocated(self.device))
        return heap_in_use_bytes()

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if not _is_parameter(tensor):
            storage = tensor.untyped_storage()
            self.saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    def count_flops(self, model: nn.Module, forward_loss: Callable[[], torch.Tensor]) -> None:
        """Forward (`forward_loss()`) and backward of the step's batch under the FLOP counter, before the
        step itself; their gradients are dropped. Not the training step: under a dispatch mode a few
        backward kernels round differently. Compiled blocks run eagerly for it (what dynamo would do
        under a dispatch mode anyway; calling them compiled under one leaves them eager for good)."""
        from torch.utils.flop_counter import FlopCounterMode

        with _eager(model), FlopCounterMode(display=False) as counter:
            loss = forward_loss()
            self.forward_flop = int(counter.get_total_flops())
            self.blocks_forward_flop = _blocks_flop(counter.get_flop_counts())
            torch.autograd.backward(loss)
        self.step_flop = int(counter.get_total_flops())
        model.zero_grad(set_to_none=True)

    @contextmanager
    def forward(self) -> Iterator[None]:
        """Around the step's forward and loss: count what autograd saves for backward."""
        self.start_bytes = self._allocated()
        # Called from inside compiled blocks too: dynamo must run the hooks as they are, not trace them
        # (torch.compiler.disable is unannotated: the two ignores).
        pack = torch.compiler.disable(self._pack)  # type: ignore[no-untyped-call]
        unpack = torch.compiler.disable(_unpack)  # type: ignore[no-untyped-call]
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield

    def forward_done(self, model: nn.Module) -> None:
        """Between the step's forward and backward: the memory held and the unsharded parameters kept."""
        from torch.distributed.tensor import DTensor

        now = self._allocated()
        if now is not None and self.start_bytes is not None:
            self.held_after_forward_bytes = now - self.start_bytes
        if _has_fsdp(model):
            self.unsharded_param_bytes_held = sum(
                p.numel() * p.element_size() for p in model.parameters() if not isinstance(p, DTensor)
            )

    def summary(self, step: int) -> dict[str, Any]:
        """The figures for `summary.knobs.probe`."""
        return {
            "step": step,
            "saved_for_backward_bytes": sum(self.saved.values()),
            "held_after_forward_bytes": self.held_after_forward_bytes,
            "held_how": "torch.cuda.memory_allocated"
            if self.device.type == "cuda"
            else ("glibc mallinfo2 (heap in use)" if self.held_after_forward_bytes is not None else "not measured"),
            "unsharded_param_bytes_held": self.unsharded_param_bytes_held,
            "forward_flop": self.forward_flop,
            "step_flop": self.step_flop,
            "blocks_forward_flop": self.blocks_forward_flop,
            "flop_how": "torch.utils.flop_counter over a forward and backward of the step's batch",
        }


@contextmanager
def _eager(model: nn.Module) -> Iterator[None]:
    """Inside the block, modules compiled with `Module.compile` run their eager forward."""
    compiled = [(m, m._compiled_call_impl) for m in model.modules() if m._compiled_call_impl is not None]
    for module, _ in compiled:
        module._compiled_call_impl = None
    try:
        yield
    finally:
        for module, impl in compiled:
            module._compiled_call_impl = impl


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _has_fsdp(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _blocks_flop(counts: dict[str, dict[Any, int]]) -> int:
    """The forward FLOPs of the transformer blocks: the modules named `<root>.layers.<N>` in the counter."""
    total = 0
    for name, by_op in counts.items():
        parts = name.split(".")
        if len(parts) == 3 and parts[1] == "layers" and parts[2].isdigit():
            total += sum(by_op.values())
    return total


def compile_report(model: nn.Module) -> dict[str, Any]:
    """dynamo's counters after the run, and per compiled module class the frames compiled for its forward."""
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.utils import counters

    classes: dict[str, dict[str, int]] = {}
    for module in model.modules():
        if getattr(module, "_compiled_call_impl", None) is None:
            continue
        name = type(module).__name__.removeprefix("FSDP")
        entry = classes.setdefault(name, {"modules": 0, "frames_compiled": 0})
        entry["modules"] += 1
        entry["frames_compiled"] = len(_debug_get_cache_entry_list(type(module).forward.__code__))
    breaks = dict(counters["graph_break"])
    return {
        "compiled_classes": classes,
        "frames": dict(counters["frames"]),
        "unique_graphs": int(counters["stats"].get("unique_graphs", 0)),
        "graph_breaks": sum(breaks.values()),
        "graph_break_reasons": [reason[:200] for reason in list(breaks)[:5]],
    }
