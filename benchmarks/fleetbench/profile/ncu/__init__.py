"""Nsight Compute: capture with the `ncu` binary, read its reports, summarise kernels.

model     what a report is to fleetbench, whichever file it came from: the metrics wanted, per launch
report_module  finds NVIDIA's `ncu_report` module (the ncu-report wheel, else Nsight Compute's copy)
command   wraps the `ncu` binary and explains its usual failures (step B of profiling)
readers   .ncu-rep (NVIDIA's ncu_report) and ncu CSV (details/raw pages) into metric values
console   ncu's console output (launches, --print-summary per-kernel/per-gpu) into metric values
tensor    tensor-core work in a report: FLOPs, pipe activity, the tensor roof
summary   per-kernel speed-of-light, FLOPs, DRAM bytes, intensity, class and memory level, from metric values
guidance  NVIDIA's guided analysis: its SOLBottleneck verdict in our class names, the top rules
agreement how often our class agrees with NVIDIA's over a set of reports (`make perf`, the tests)
target    the program profiled when none is given: the profile workload inside an NVTX range
permissions  who may read the GPU counters here (the driver's RmProfilingAdminOnly) and how ncu must
          run: `fleetbench ncu permissions`, the deploy's preflight
pipes     the busiest SM pipe of a launch and the compute-bound fix that fits it
The job (`fleetbench ncu run`, `ncu summarize --record`) is fleetbench.profile.jobs.ncu.
"""
