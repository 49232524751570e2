#!/bin/sh
# Entrypoint of the trainer and profiler images.
#   (no arguments), --flags, or train [--flags]
#                                 -> the FSDP2 trainer's launcher (`python -m fleetbench train`, which is
#                                    `fleetbench train`): it starts the ranks through torchrun
#                                    (train.nproc/nnodes/node_rank/rdzv_endpoint; gloo on CPU, NCCL on GPUs)
#   another fleetbench command    -> fleetbench COMMAND [args] (probe, profile, ncu, roofline, results, ...)
#   a program on PATH [args]      -> run as is (torchrun ..., python ..., ncu ..., bash)
set -e
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
