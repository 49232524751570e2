"""scripts/edge_peak_check.py, the judge of gpu-check's edge-peak stage, on planted results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "edge_peak_check.py"


def judge(tmp_path: Path, probe_tflops: float, ratios: dict[str, float], gpu: str) -> subprocess.CompletedProcess[str]:
    results = {
        "kernels": [
            {
                "kernel": "peak_fma",
                "dtype": "float32",
                "flop_per_second": probe_tflops * 1e12,
                "verdict": "stable",
                "sizing": {"workgroups": 4224, "iterations": 65536, "dispatch_s": 0.1},
            }
        ],
        "gemm_peak_ratio": ratios,
        "gemm_peak_ratio_refused": {},
    }
    path = tmp_path / "edge_results.json"
    path.write_text(json.dumps(results))
    return subprocess.run([sys.executable, str(SCRIPT), str(path), gpu], capture_output=True, text=True, check=False)


def test_a_probe_at_most_of_the_vendor_peak_passes(tmp_path: Path) -> None:
    done = judge(tmp_path, 55.0, {"gemm_vec4_spirv float32 4096": 0.4}, "NVIDIA H100 80GB HBM3")
    assert done.returncode == 0, done.stderr
    assert "= 82.2% of NVIDIA H100 80GB HBM3's 66.9 TFLOP/s" in done.stdout
    assert "4224 workgroups x 65536 steps, 100.0 ms a dispatch" in done.stdout


def test_the_h100s_first_probe_and_a_published_ratio_above_one_fail(tmp_path: Path) -> None:
    # the first H100 run: 4.59 TFLOP/s from a probe that used a fraction of the GPU, a GEMM at 4.651 of it
    done = judge(tmp_path, 4.591, {"gemm_vec4_spirv float32 4096": 4.651}, "NVIDIA H100 80GB HBM3")
    assert done.returncode == 1
    assert "GEMM/peak gemm_vec4_spirv float32 4096 = 4.651 > 1 was published" in done.stderr
    assert "the probe reached 6.9% of the vendor's FP32 peak; wanted >= 70%" in done.stderr


def test_a_gpu_missing_from_the_table_is_said_not_judged(tmp_path: Path) -> None:
    done = judge(tmp_path, 1.0, {}, "Some Future GPU")
    assert done.returncode == 0 and "not judged" in done.stdout
