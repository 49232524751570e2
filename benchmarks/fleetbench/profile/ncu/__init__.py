"""Nsight Compute: capture with the `ncu` binary, read its reports, summarise kernels.

command   wraps the `ncu` binary and explains its usual failures (step B of profiling)
readers   .ncu-rep (NVIDIA's ncu_report) and ncu CSV (details/raw pages) into metric values
summary   per-kernel speed-of-light, FLOPs, DRAM bytes, intensity and class, from metric values
target    the program profiled when none is given: the profile workload inside an NVTX range
permissions  who may read the GPU counters here (the driver's RmProfilingAdminOnly) and how ncu must
          run: `fleetbench ncu permissions`, the deploy's preflight
run       `fleetbench ncu run` (a job: capture, summary, roofline, record) and
          `fleetbench ncu summarize --record` (an existing report as a run)
"""
