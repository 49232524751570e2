"""The program `fleetbench ncu run` profiles when it is given none: the configured workload, bare.

`python -m fleetbench.profile.ncu.target [--config FILE] [--set KEY=VALUE ...]` runs the workload of
`fleetbench profile` (same config) without torch.profiler (CUPTI serves one profiler at a time):
wait + warmup steps first, then the active steps inside the NVTX push/pop range `NVTX_RANGE`, which
`fleetbench ncu run` selects with `--nvtx --nvtx-include fleetbench_profiled/`. A script or module
workload runs once, wholly inside the range.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from fleetbench.config.loader import load_config
from fleetbench.devices import resolve_device
from fleetbench.errors import UserError
from fleetbench.logs import level_from_env, setup_logging
from fleetbench.profile.workloads import resolve_workload

NVTX_RANGE = "fleetbench_profiled"
NVTX_INCLUDE = f"{NVTX_RANGE}/"

log = logging.getLogger(__name__)


@contextmanager
def profiled_range() -> Iterator[None]:
    """Run the body inside the NVTX push/pop range NVTX_RANGE, which `fleetbench ncu run` selects."""
    torch.cuda.nvtx.range_push(NVTX_RANGE)  # type: ignore[no-untyped-call]  # torch.cuda.nvtx has no annotations
    yield
    torch.cuda.nvtx.range_pop()  # type: ignore[no-untyped-call]  # torch.cuda.nvtx has no annotations


def run(argv: list[str]) -> None:
    """Run the configured workload bare, its active steps inside the NVTX range; UserError without a GPU."""
    parser = argparse.ArgumentParser(prog="python -m fleetbench.profile.ncu.target")
    parser.add_argument("--config", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)
    device = resolve_device(config.profile.device)
    if device.backend != "cuda":
        raise UserError(
            "the ncu target needs a CUDA GPU (Nsight Compute profiles CUDA kernels); use fleetbench profile on the CPU"
        )
    workload = resolve_workload(config, device)
    cfg = config.profile
    if workload.step is not None:
        for _ in range(cfg.wait + cfg.warmup):
            workload.step()
        device.synchronize()
        with profiled_range():
            for _ in range(cfg.active):
                workload.step()
            device.synchronize()
    else:
        assert workload.run_once is not None
        with profiled_range():
            workload.run_once()
            device.synchronize()
    log.info("fleetbench ncu target: %s, %d active steps", workload.description, cfg.active)


def main() -> int:
    """`python -m fleetbench.profile.ncu.target`: 0, or a user error's one line and its exit status."""
    setup_logging(level_from_env())  # not started through the CLI, which sets it up for every command
    try:
        run(sys.argv[1:])
    except UserError as exc:
        print(f"fleetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
