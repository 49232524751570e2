#!/usr/bin/env bash
# GPU check of the profiling job, for a machine with an NVIDIA GPU, PyTorch and Nsight Compute.
# One prepared run, in the repository root:
#   0  the gpu-marked profiling tests (pytest -m gpu tests/test_profile_*.py)
#   A  fleetbench profile      the trainer's `seed` preset, one block (dim 2048, ffn 8192, seq 1024,
#                              batch 8, bf16 autocast), forward + backward + AdamW under torch.profiler
#   B  fleetbench ncu run      the same block under ncu --set full (the active step only, selected by
#                              its NVTX range), then fleetbench ncu summarize on the report
#   C  fleetbench roofline     the roofline PNG from the ncu report (A wrote the analytical one)
# and copies into DEST (default docs/results/profile-gpu-check) at most 8 files:
#   report.ncu-rep  ncu_summary.json  ncu_summarize.txt  roofline_ncu.png  roofline_analytical.png
#   trace_summary.json  records.jsonl  log.txt
# Steps go on after a failure (B needs counter access that some sandboxes refuse); the exit status is
# that of the first failed step. Usage: scripts/gpu-check-profile.sh [DEST]
#
# Where nothing can be installed on the GPU machine, carry wheels in .whl/ (git-ignored) made here:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl pydantic pydantic-core annotated-types typing-inspection ncu-report
# This script installs them into /tmp/site when the machine's python lacks them. Without the
# ncu-report wheel it falls back to the ncu_report module that ships with Nsight Compute (extras/python).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

DEST=${1:-docs/results/profile-gpu-check}
PY=${PY:-python3}
CLOCK_CONTROL=${CLOCK_CONTROL:-none}  # `base` locks clocks; `none` also works where clock control is refused
RUN_ID=gpu-check-profile-$(date -u +%Y%m%d-%H%M%S)
WORK=$(mktemp -d)
RESULTS=$WORK/results
mkdir -p "$DEST"
LOG=$DEST/log.txt
: >"$LOG"
status=0

say() { printf '\n== %s\n' "$*" | tee -a "$LOG"; }
step() {  # step NAME COMMAND...: run, log, remember the first failure
  local name=$1
  shift
  say "$name: $*"
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  say "$name: exit status $rc"
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
  return 0
}

export PYTHONPATH="$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 FLEETBENCH_PUSHGATEWAY=""
if ! "$PY" -c 'import pydantic, ncu_report' 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
if ! "$PY" -c 'import ncu_report' 2>/dev/null && command -v ncu >/dev/null; then
  NCU_HOME=$(dirname "$(readlink -f "$(command -v ncu)")")
  for extras in "$NCU_HOME/extras/python" "$NCU_HOME/../extras/python"; do
    [ -d "$extras" ] && export PYTHONPATH="$PYTHONPATH:$extras"
  done
fi

# The real CLI, as a user runs it.
fb() {
  "$PY" -m fleetbench "$@"
}

WORKLOAD=(--set profile.device=cuda --set profile.workload=train --set profile.train_preset=seed
  --set profile.train_layers=1 --set profile.wait=1 --set profile.warmup=1 --set profile.active=1
  --set "profile.peaks_cache_dir=$WORK/peaks")

say "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; command -v ncu && ncu --version
  "$PY" -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, torch.cuda.get_device_name(0))'
  "$PY" -c 'import ncu_report; print("ncu_report from", ncu_report.__file__)'; } 2>&1 | tee -a "$LOG"

step "0 gpu tests" "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_profile_cli.py
step "A profile" fb profile --results-dir "$RESULTS" --run-id "$RUN_ID" "${WORKLOAD[@]}"
step "B ncu run" fb ncu run --results-dir "$RESULTS" --run-id "$RUN_ID" --clock-control "$CLOCK_CONTROL" \
  --set profile.ncu.timeout_s=420 "${WORKLOAD[@]}"
REPORT=$RESULTS/$RUN_ID/ncu/report.ncu-rep
if [ -f "$REPORT" ]; then
  step "B summarize" fb ncu summarize "$REPORT"
  fb ncu summarize "$REPORT" --json >"$DEST/ncu_summary.json" 2>>"$LOG"
  fb ncu summarize "$REPORT" >"$DEST/ncu_summarize.txt" 2>>"$LOG"
  cp "$REPORT" "$DEST/report.ncu-rep"
  step "C roofline" fb roofline --ncu "$REPORT" --results-dir "$RESULTS" --run-id "$RUN_ID-roofline"
  cp "$RESULTS/$RUN_ID-roofline/roofline/roofline.png" "$DEST/roofline_ncu.png" 2>>"$LOG"
else
  say "no ncu report: steps B and C skipped (see the ncu error above)"
fi
{
  cp "$RESULTS/$RUN_ID/profile/roofline.png" "$DEST/roofline_analytical.png"
  cp "$RESULTS/$RUN_ID/profile/trace_summary.json" "$DEST/trace_summary.json"
  cat "$RESULTS"/"$RUN_ID"*/records.jsonl >"$DEST/records.jsonl"
} 2>>"$LOG"
# shellcheck disable=SC2012  # a listing for the log to read, not parsed
say "files in $DEST: $(ls "$DEST" | tr '\n' ' ')"
say "overall exit status $status"
exit "$status"
