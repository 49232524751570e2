"""Capture what native libraries (wgpu-native, Vulkan/Wayland loaders, ExecuTorch's runtime) write to fd 2.

Such text bypasses Python's sys.stderr and would break the CLI's promise of one line per error.
`native_stderr` redirects fd 2 into a temporary file for the duration of a block and hands the text
to the caller, who decides what to show: `forward_unexpected` logs everything but known noise as warnings.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any


def optional_module(name: str) -> Any:
    """Import a package without type stubs (wgpu, executorch) as an untyped module: mypy then needs no
    per-package override, and the caller decides how a missing package is reported."""
    return importlib.import_module(name)


# Printed by libwayland-client when wgpu's Vulkan backend probes for a Wayland display on a headless
# machine; harmless for compute.
NOISE = ("XDG_RUNTIME_DIR is invalid or not set",)

log = logging.getLogger(__name__)


@contextlib.contextmanager
def native_stderr(sink: list[str]) -> Iterator[None]:
    """fd 2 into a temporary file, and sys.stderr into a buffer: some extensions (ExecuTorch's pybindings)
    route their C++ logs through Python's sys.stderr, which need not be fd 2 (pytest's capture, IDEs)."""
    sys.stderr.flush()
    saved = os.dup(2)
    python_side = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            with contextlib.redirect_stderr(python_side):
                yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            sink.append(capture.read().decode(errors="replace") + python_side.getvalue())


def forward_unexpected(sink: list[str]) -> None:
    """Log what native code wrote as warnings, except the lines known to be harmless noise."""
    for line in "".join(sink).splitlines():
        if line.strip() and not any(noise in line for noise in NOISE):
            log.warning(line)
