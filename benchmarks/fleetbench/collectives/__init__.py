"""`fleetbench collectives`: all-reduce, all-gather, reduce-scatter and all-to-all over message sizes, with
nccl-tests' algorithm and bus bandwidth; NCCL on GPUs, gloo on the CPU, torchrun ranks as the trainer's."""
