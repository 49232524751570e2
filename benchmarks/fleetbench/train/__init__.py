"""`fleetbench train`: the FSDP2 training benchmark (torchrun launcher, trainer, MFU, checkpoints).

Importing this package is cheap: its configuration lives in `fleetbench.config.train`, which has no
torch import, so the CLI reads it without loading torch. The trainer modules import torch themselves.

  run         the job's entry: launcher or rank
  launch      checks, then torchrun's elastic agent with c10d rendezvous
  loop        one rank: FSDP2 steps, metrics, checkpoints, the record and its headline
  plan        the model shape and step plan from the config and the world size
  parallel    process group, device mesh, fully_shard, optimizer
  defaults    the two device defaults, decided once: the preset and the precision
  blocks      what both decoders are built of: RMSNorm and the activation-checkpointed block
  decoder     the reference decoder and its seeded, shard-independent initialisation
  llama       the llama-family decoder (`train.model=llama`): RoPE (rope), SwiGLU, GQA, RMSNorm
  knobs       what the FSDP2 knobs did in this run, measured by the trainer (the record's summary.knobs)
  profiling   torch.profiler over `train.profile_steps` on every rank: one trace per rank (HTA's naming)
  handoff     what a node's ranks leave for its launcher: the agreed run id, their errors
  energy      joules per step and per token from the node's power meters (fleetbench.energy)
  nccl_transport  which transport NCCL chose, read from its INFO lines; the fall-back-to-sockets warning
  step_rows   how a logged step reads: the live table's row and the log line
  data, flops, memory, checkpoint, history, plots, rope   what their names say
  stage       the demo's train stage (tiny preset, 2 gloo ranks)
  ac, float8  selective op-level activation checkpointing; torchao float8 linears (refused without FP8)
  tune/       `fleetbench tune`: a run's verdicts as candidate knob changes, each measured against the base
"""
