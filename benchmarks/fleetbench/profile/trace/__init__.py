"""Reading PyTorch profiler Chrome traces and what the trace summary computes from them.

Modules:
  load       find trace files (one, several, a folder of rank traces), read them, sort their events
  windows    the window a summary covers: ProfilerStep windows as HTA takes them, or the whole trace
  breakdown  the temporal breakdown of one device or one CPU rank (HTA's definitions)
  ranks      across ranks: the straggler and the per-rank stacked-bar PNG
  report     `fleetbench trace summarize`: every trace summarised, compared, charted; its JSON
  record     its `--record`: one result record per rank, in one run
  stage      the demo's trace stage: the per-rank breakdown of the train stage's profiled steps
The tables it prints are the CLI's: fleetbench/cli/views/trace.py.
The per-trace summary itself is `fleetbench.profile.trace_summary`.
"""
