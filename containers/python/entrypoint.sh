#!/bin/sh
# Entrypoint of the trainer, profiler and edge-vulkan images.
#   (no arguments), --flags, or train [--flags]
#                                 -> the FSDP2 trainer's launcher (`python -m fleetbench train`, which is
#                                    `fleetbench train`): it starts the ranks through torchrun
#                                    (train.nproc/nnodes/node_rank/rdzv_endpoint; gloo on CPU, NCCL on GPUs)
#   another fleetbench command    -> fleetbench COMMAND [args] (probe, profile, ncu, roofline, results, ...)
#   a program on PATH [args]      -> run as is (torchrun ..., python ..., ncu ..., bash)
set -e
# torch's CUDA build sees no GPU unless the NVIDIA runtime put the driver's devices in: say so once,
# since torch itself only falls back to the CPU quietly.
if [ "${FLEETBENCH_TORCH_FLAVOR:-}" = cuda ] && [ ! -e /dev/nvidiactl ]; then
  echo "fleetbench-entrypoint: no GPU was passed to this container (torch is the CUDA build, torch.cuda.is_available() is False):" \
    "start it with --gpus all (docker run --gpus all ..., fleetbench images run NAME --gpus all) on a host with the" \
    "NVIDIA Container Toolkit, or with --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=all; running on the CPU" >&2
fi
if [ "$#" -eq 0 ]; then
  exec python -m fleetbench train
fi
case "$1" in
  train) shift; exec python -m fleetbench train "$@" ;;
  -*) exec python -m fleetbench train "$@" ;;
esac
if command -v "$1" >/dev/null 2>&1; then
  exec "$@"
fi
exec fleetbench "$@"
