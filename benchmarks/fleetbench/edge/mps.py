"""The PyTorch MPS path: the tiny model's forward on Apple silicon's GPU, with unified-memory figures.

Timing brackets each forward with `torch.mps.synchronize()`; memory is read from
`torch.mps.current_allocated_memory()` (tensors) and `torch.mps.driver_allocated_memory()` (everything
the Metal driver holds for the process) after the timed passes. The output is checked against the same
model on the CPU. Where MPS is missing the path reports "requires Apple silicon (MPS)" and is skipped.
"""

from __future__ import annotations

import copy
import sys
import time

from fleetbench.edge.model_factory import BuiltModel
from fleetbench.edge.pte import ModelTiming, compare_outputs, time_calls

SKIP_REASON = "requires Apple silicon (MPS)"


def mps_available() -> bool:
    """Whether this is macOS with a usable MPS device."""
    import torch

    return sys.platform == "darwin" and bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()


def run_mps(built: BuiltModel, warmup: int, iterations: int, tolerance: float) -> ModelTiming:
    """Time `built`'s forward on MPS, check it against the CPU output and read the Metal memory figures."""
    import torch

    device = torch.device("mps")
    with torch.inference_mode():
        expected = built.module(*built.example_inputs)  # CPU reference first, before the move
        started = time.perf_counter()
        model = copy.deepcopy(built.module).to(device)
        inputs = tuple(t.to(device) for t in built.example_inputs)
        torch.mps.synchronize()
        load_s = time.perf_counter() - started

        def forward() -> None:
            model(*inputs)
            torch.mps.synchronize()

        latencies = time_calls(forward, warmup, iterations)
        got = model(*inputs)
        torch.mps.synchronize()
    timing = ModelTiming("mps", built.name, load_s, latencies)
    timing.max_abs_error, timing.max_rel_error = compare_outputs(
        [t.cpu() for t in (got if isinstance(got, (list, tuple)) else [got])],
        list(expected) if isinstance(expected, (list, tuple)) else [expected],
    )
    timing.agrees = timing.max_rel_error <= tolerance
    timing.memory = {
        "current_allocated": int(torch.mps.current_allocated_memory()),
        "driver_allocated": int(torch.mps.driver_allocated_memory()),
    }
    timing.note = "load time is moving the model and inputs to the device"
    return timing
