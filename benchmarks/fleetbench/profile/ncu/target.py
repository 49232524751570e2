"""The program `fleetbench ncu run` profiles when it is given none: the configured workload, bare.

`python -m fleetbench.profile.ncu.target [--config FILE] [--set KEY=VALUE ...]` runs the workload of
`fleetbench profile` (same config) without torch.profiler (CUPTI serves one profiler at a time):
wait + warmup steps first, then the active steps inside the NVTX push/pop range `NVTX_RANGE`, which
`fleetbench ncu run` selects with `--nvtx --nvtx-include fleetbench_profiled/`. A script or module
workload runs once, wholly inside the range.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from fleetbench.config.loader import load_config
from fleetbench.devices import resolve_device
from fleetbench.errors import UserError
from fleetbench.profile.workloads import resolve_workload

NVTX_RANGE = "fleetbench_profiled"
NVTX_INCLUDE = f"{NVTX_RANGE}/"


def run(argv: list[str]) -> None:
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
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        for _ in range(cfg.active):
            workload.step()
        device.synchronize()
        torch.cuda.nvtx.range_pop()
    else:
        assert workload.run_once is not None
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        workload.run_once()
        device.synchronize()
        torch.cuda.nvtx.range_pop()
    print(f"fleetbench ncu target: {workload.description}, {cfg.active} active steps", file=sys.stderr)


def main() -> int:
    try:
        run(sys.argv[1:])
    except UserError as exc:
        print(f"fleetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
