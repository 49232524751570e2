"""The profiling job: macro traces (torch.profiler), micro analysis (Nsight Compute), roofline.

Jobs, in jobs/ (each `JOB: (config, context) -> JobResult`, the contract of fleetbench/job.py), above
every module they use (nothing below imports a job):
  jobs/profile   `fleetbench profile`: capture, trace summary, peaks, analytical roofline (steps A, C)
  jobs/ncu       `fleetbench ncu run`: capture under Nsight Compute, then its summary (step B)
  jobs/roofline  `fleetbench roofline`: from an ncu report, from a profile run's ops, or peaks only
  jobs/trace     `fleetbench trace summarize --record`: one result record per rank, in one run
  jobs/trace_stage  the demo's trace stage: the per-rank breakdown of the train stage's profiled steps
Modules they share (the GPU table they read is fleetbench.gpus, below the trainer too):
  names          kernel-name shortening for labels and chart text (stable, documented rule)
  classify       memory-bound / compute-bound / balanced / latency-bound / cache-resident, and the fix
  trace/         reading traces, HTA's step window, breakdowns of devices and CPU ranks, the straggler,
                 and `fleetbench trace summarize` (report, tables)
  workloads      what is profiled: the trainer hook, the Linear probe, a script, a module
  capture        torch.profiler capture of a workload into the run folder (step A)
  flops          FLOPs and bytes per op call: torch.profiler, flop_counter, the op table
  ncu/           the ncu binary, its report readers and the per-kernel summary
  peaks          measured local peaks (the probe's matmul, copy and triad), cached per device
  roofline/      roofline points (ncu or analytical), ridge classification and the log-log PNG
  export         the metrics and headline figures every profiling run records
What the commands show (tables) is the CLI's: fleetbench/cli/views/profile.py and trace.py.
Folders: results/<run_id>/profile/, .../ncu/, .../roofline/.

Reading a report needs no torch (a profiler host may not have it): `ncu summarize` and
`roofline --ncu` import none. What captures or measures imports torch in the functions that use it
(capture, peaks, flops, devices) or is imported only by such functions (workloads, ncu/target).
"""
