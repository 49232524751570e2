"""The profiling job: macro traces (torch.profiler), micro analysis (Nsight Compute), roofline.

One module per job:
  names          kernel-name shortening for labels and chart text (stable, documented rule)
  classify       memory-bound / compute-bound / balanced / latency-bound, with the main fix
  trace_summary  HTA-style temporal breakdown, top kernels/ops, launch gaps from a Chrome trace
  workloads      what is profiled: the trainer hook, the Linear probe, a script, a module
  capture        torch.profiler capture of a workload into the run folder (step A)
  ncu_runner     wraps the `ncu` binary and explains its usual failures (step B)
  ncu_readers    .ncu-rep (NVIDIA's ncu_report) and ncu CSV (details/raw pages) into metric values
  ncu_summary    per-kernel speed-of-light, FLOPs, DRAM bytes, intensity, class, from metric values
  peaks          datasheet peak tables and measured local peaks, cached per device
  roofline       roofline points (ncu or analytical), ridge classification and the log-log PNG
  tables         rich tables shown by the commands
  run            the commands' orchestration: telemetry, result records, artifacts
"""
