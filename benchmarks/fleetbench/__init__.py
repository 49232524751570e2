"""fleetbench: train, profile and run ML workloads on GPUs and edge devices, measured one way."""

from __future__ import annotations

from functools import cache

__version__: str  # looked up in the installed metadata on first use (see __getattr__)


@cache
def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleetbench")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0+unknown"


def __getattr__(name: str) -> str:
    """`fleetbench.__version__`, read from the package metadata when first asked for.

    Reading it scans the installed distributions, which every command would pay at start-up; only
    --version and the run-info metric need it.
    """
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
