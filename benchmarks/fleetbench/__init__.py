"""fleetbench: train, profile and run ML workloads on GPUs and edge devices, measured one way."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fleetbench")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"
