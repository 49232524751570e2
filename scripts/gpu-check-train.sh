#!/usr/bin/env bash
# GPU check of the FSDP2 trainer (run on a machine with an NVIDIA GPU; nothing here runs on CPU):
# the `seed` preset (the reference workload) on 1 GPU, eager and with torch.compile. Writes tokens/s,
# MFU, TFLOP/s and peak memory of both runs to docs/results/train-gpu-<UTC time>.json and prints them,
# after the GPU tests of the in-trainer profiler capture.
#   STEPS=30 LOG_EVERY=5 PRESET=seed PY=.venv/bin/python scripts/gpu-check-train.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PRESET=${PRESET:-seed}
STEPS=${STEPS:-30}
LOG_EVERY=${LOG_EVERY:-5}
OUT_DIR=${OUT_DIR:-docs/results}
STAMP=$(date -u +%Y%m%d-%H%M%S)
RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-train.XXXXXX")
mkdir -p "$OUT_DIR"

"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-check-train: torch sees no CUDA GPU')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# The in-trainer capture on CUDA: kernels, NCCL where there are 2+ GPUs, and the memory snapshot.
"$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_train_profile.py

for compile in false true; do
  "$PY" -m fleetbench train --nproc 1 --device cuda --preset "$PRESET" --steps "$STEPS" \
    --results-dir "$RESULTS" --run-id "$PRESET-compile-$compile" \
    --set train.compile=$compile --set train.log_every="$LOG_EVERY" --set train.plot=false
done

"$PY" - "$RESULTS" "$OUT_DIR/train-gpu-$STAMP.json" "$PRESET" <<'PY'
import json
import sys
from pathlib import Path

from fleetbench.results.store import read_records

results, target, preset = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rows = []
for compile in ("false", "true"):
    record = [r for r in read_records(results / f"{preset}-compile-{compile}") if r.rank == 0][-1]
    s = record.summary
    rows.append({
        "preset": preset, "compile": compile == "true", "device": record.device, "status": record.status,
        "tokens_per_s": s.get("tokens_per_s"), "mfu": s.get("mfu"), "tflops_per_device": s.get("tflops_per_device"),
        "peak_source": s.get("peak_source"), "peak_allocated_bytes": s.get("peak_memory_bytes"),
        "peak_reserved_bytes": s.get("peak_reserved_bytes"), "final_loss": s.get("final_loss"),
        "steady_state_steps": s.get("steady_state_steps"), "packages": record.packages,
        "git_revision": record.git_revision,
    })
target.write_text(json.dumps(rows, indent=2) + "\n")
print(f"{'compile':8} {'tokens/s':>10} {'MFU':>7} {'TFLOP/s':>8} {'peak alloc GiB':>15} {'reserved GiB':>13}")
for r in rows:
    mfu = "-" if r["mfu"] is None else f"{r['mfu']:.1%}"
    print(f"{str(r['compile']):8} {r['tokens_per_s']:>10,.0f} {mfu:>7} {r['tflops_per_device']:>8.1f} "
          f"{r['peak_allocated_bytes'] / 2**30:>15.2f} {(r['peak_reserved_bytes'] or 0) / 2**30:>13.2f}")
print(f"written: {target}")
PY
