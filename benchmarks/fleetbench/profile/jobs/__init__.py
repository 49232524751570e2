"""The profiling jobs, one module each (a `JOB` entry, a run factory, a typed outcome), above what they use.

profile   `fleetbench profile`: torch.profiler trace, its summary, the analytical roofline of the top ops
ncu       `fleetbench ncu run|summarize --record`: an Nsight Compute capture or report, summarised
roofline  `fleetbench roofline`: the roofline of an ncu report's kernels or a profile run's ops
trace     `fleetbench trace summarize --record`: one result record per rank, in one run
trace_stage  the demo's trace stage: the per-rank breakdown of the train stage's profiled steps

Jobs import the analysis packages (ncu/, roofline/, trace/, export); nothing below imports a job.
"""
