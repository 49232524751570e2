"""Where the tests' real profiler outputs live: `tests/data/`, inside the repository."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


def get_test_data_dir() -> Path:
    """The folder of real Nsight Compute reports and PyTorch traces (provenance in its README.md)."""
    return DATA_DIR
