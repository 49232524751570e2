"""Judge an `edge run` of the FMA peak probes against the vendor's FP32 peak (gpu-check's edge-peak stage).

Usage: edge_peak_check.py EDGE_RESULTS_JSON GPU_NAME

Prints every probe's rate and sizing and every GEMM/peak ratio (and the refused ones); exits 1 when the
best float32 probe is under MIN_SHARE of the vendor's FP32 (non-tensor) peak, when a published
GEMM/peak ratio is above 1, or when the run has no float32 probe. A GPU missing from the table is said
and not judged (exit 0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MIN_SHARE = 0.70
# Vendor FP32 (non-tensor) peaks at boost clock, FLOP/s, from NVIDIA's data sheets; matched by substring
# of nvidia-smi's name, most specific first.
FP32_PEAK = (
    ("H100 PCIe", 51.2e12),
    ("H100 NVL", 60.0e12),
    ("H100", 66.9e12),  # SXM5 (nvidia-smi: "NVIDIA H100 80GB HBM3")
    ("H200", 66.9e12),
    ("GH200", 66.9e12),
    ("A100", 19.5e12),
    ("L40S", 91.6e12),
    ("L4", 30.3e12),
    ("A10", 31.2e12),
)


def vendor_peak(gpu: str) -> float | None:
    """The FP32 peak of the first table entry whose name is in `gpu`; None where none is."""
    return next((peak for name, peak in FP32_PEAK if name in gpu), None)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: edge_peak_check.py EDGE_RESULTS_JSON GPU_NAME", file=sys.stderr)
        return 2
    results = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    probes = [k for k in results["kernels"] if k["kernel"].startswith("peak_fma") and k["flop_per_second"]]
    for k in probes:
        sizing = k.get("sizing") or {}
        print(
            f"{k['kernel']} {k['dtype']}: {k['flop_per_second'] / 1e12:.2f} TFLOP/s, {sizing.get('workgroups')} "
            f"workgroups x {sizing.get('iterations')} steps, {sizing.get('dispatch_s', 0) * 1e3:.1f} ms a dispatch, "
            f"{k.get('verdict')}"
        )
    for name, ratio in results["gemm_peak_ratio"].items():
        print(f"GEMM/peak {name}: {ratio:.3f}")
    for name, why in results.get("gemm_peak_ratio_refused", {}).items():
        print(f"refused {name}: {why}")
    best = max((k["flop_per_second"] for k in probes if k["dtype"] == "float32"), default=0.0)
    if best <= 0:
        print("no float32 peak probe was timed", file=sys.stderr)
        return 1
    failed = [f"GEMM/peak {n} = {r:.3f} > 1 was published" for n, r in results["gemm_peak_ratio"].items() if r > 1]
    peak = vendor_peak(argv[1])
    if peak is None:
        print(f"no vendor FP32 peak for {argv[1]!r} in the table: the probe's share is not judged")
    else:
        share = best / peak
        print(f"best float32 probe {best / 1e12:.2f} TFLOP/s = {share:.1%} of {argv[1]}'s {peak / 1e12:.1f} TFLOP/s")
        if share < MIN_SHARE:
            failed.append(f"the probe reached {share:.1%} of the vendor's FP32 peak; wanted >= {MIN_SHARE:.0%}")
    for line in failed:
        print(line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
