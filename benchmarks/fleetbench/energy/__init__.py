"""Energy of a run: NVML's total-energy counter (GPUs), RAPL's package counters (CPUs), tegrastats'
input rail (Jetson boards); joules per step and per token, average watts, and why where none is readable."""
