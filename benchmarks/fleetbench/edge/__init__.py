"""`fleetbench edge`: neural-network kernels and a small model on the GPUs of phones, laptops and boards.

Kernels (WGSL, and GLSL compiled to SPIR-V by glslc) live in `mobile/kernels` and run through wgpu-py,
which picks Vulkan on Linux/Android, Metal on macOS and D3D12 on Windows; on a machine without a GPU
that is lavapipe (Mesa's software Vulkan). Importing this package is cheap: wgpu, numpy, torch and
ExecuTorch are imported by the modules that need them.

The job's entry is `run.JOB: (config, context) -> JobResult` (fleetbench/job.py); it plans (plan:
adapter, dtypes, timing, the kernel set, compiled pipelines; quick set), measures (measure: bind,
warm up, check, time until stable), runs the model paths (models: MPS, ExecuTorch), records (export:
metrics and headline) and writes (outputs: JSON, CSV, PNG) the results, and returns them for the CLI
to show (cli/views/edge.py). stage is the demo's edge stage.
Underneath: paths (kernels and SPIR-V folders), gpu (adapter choice, report, device), vulkan (device
extensions through libvulkan), kernels (the kernel set, sources, inputs, numpy references), spirv
(glslc), timing (timestamp and wall-clock timers, statistics, stable-median tries), rows (a kernel's
and a model's results), model_factory (the tiny model or a given module), mps (PyTorch MPS path),
pte (ExecuTorch export and runtime), native (what native libraries write to fd 2), vkcompute (a raw
Vulkan compute path for what wgpu cannot express) and coopmat (the cooperative-matrix GEMM on it),
thermal and thermal_parse (the device's thermal state and the tools that report it), discipline (the
cooldown and thermal checks around each measurement), peak_sizing (the FMA peak probe grown until it
fills the device and one dispatch is long enough to time), stability (sample count, CV and the
stable/unstable verdict every figure carries), energy (the meter of the timed work: NVML, RAPL or the
board's sampled power).
llm/ is `fleetbench edge llm`: the trainer's llama model in llama.cpp, MLX and ExecuTorch.
"""
