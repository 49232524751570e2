"""Reading PyTorch profiler Chrome traces and what the trace summary computes from them.

Modules:
  load       find trace files (one, several, a folder of rank traces), read them, sort their events
  summary    the per-trace summary: breakdown per device and step, top kernels and ops, launch gaps
  windows    the window a summary covers: ProfilerStep windows as HTA takes them, or the whole trace
  breakdown  the temporal breakdown of one device or one CPU rank (HTA's definitions)
  ranks      across ranks: the straggler and the per-rank stacked-bar PNG
  report     `fleetbench trace summarize`: every trace summarised, compared, charted; its JSON
  comm       which kernels and host events are communication: the table of name patterns and markers
  idle       idle time per stream: host wait, kernel wait, other (HTA's idle-time breakdown)
  queue      queue length per stream and launch delay per step (HTA's launch statistics)
  diff       `fleetbench trace diff`: two traces or runs, op by op and kernel by kernel
  critical   `fleetbench trace critical-path`: the critical path of one step (HTA's graph), by kind and name
  critical_chart  the step's timeline with its critical path drawn over it (PNG)
The analysis modules import only each other and `profile.names`; the jobs that record a trace
summary and the demo's trace stage are in profile/jobs/ (trace, trace_stage). The tables it prints live in `fleetbench.cli.views.trace`.
"""
