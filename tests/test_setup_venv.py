"""The venv `make setup` makes (scripts/setup.sh): its packages carry their bytecode.

Where PYTHONDONTWRITEBYTECODE is set (CI sets it), a module without a .pyc is compiled again in every
process that imports it: torch then takes 3-5 s to import instead of 1.5 s, in every CLI call and every
torchrun rank, and the suite ran 29 minutes instead of 18-20. uv, unlike pip, compiles only when asked.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest


@pytest.mark.parametrize("module", ["torch", "torch.distributed.fsdp", "numpy", "scipy.stats", "fleetbench.cli.main"])
def test_the_modules_every_process_imports_have_their_bytecode(module: str) -> None:
    source = importlib.import_module(module).__file__
    assert source is not None and source.endswith(".py"), source
    cached = Path(importlib.util.cache_from_source(source))
    assert cached.is_file(), f"{module}: no bytecode at {cached} (make setup compiles it; see scripts/setup.sh)"
