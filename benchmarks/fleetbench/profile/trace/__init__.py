"""Reading PyTorch profiler Chrome traces and what the trace summary computes from them.

Modules:
  load       find trace files (one, several, a folder of rank traces), read them, sort their events
  summary    the per-trace summary: breakdown per device and step, top kernels and ops, launch gaps
  windows    the window a summary covers: ProfilerStep windows as HTA takes them, or the whole trace
  breakdown  the temporal breakdown of one device or one CPU rank (HTA's definitions)
  ranks      across ranks: the straggler and the per-rank stacked-bar PNG
  report     `fleetbench trace summarize`: every trace summarised, compared, charted; its JSON
  record     its `--record`: one result record per rank, in one run
<<<<<<< HEAD
  stage      the demo's trace stage: the per-rank breakdown of the train stage's profiled steps
The tables it prints are the CLI's: fleetbench/cli/views/trace.py.
The per-trace summary itself is `fleetbench.profile.trace_summary`.
=======
The analysis modules (load to report) import only each other and `profile.names`; `record` adds the
profile exporter, `stage` the job contract. The tables it prints live in `fleetbench.cli.views.trace`.
>>>>>>> issue-48
"""
