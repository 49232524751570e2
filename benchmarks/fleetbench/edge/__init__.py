"""`fleetbench edge`: neural-network kernels and a small model on the GPUs of phones, laptops and boards.

Kernels (WGSL, and GLSL compiled to SPIR-V by glslc) live in `mobile/kernels` and run through wgpu-py,
which picks Vulkan on Linux/Android, Metal on macOS and D3D12 on Windows; on a machine without a GPU
that is lavapipe (Mesa's software Vulkan). Importing this package is cheap: wgpu, numpy, torch and
ExecuTorch are imported by the modules that need them.

Modules: paths (kernels and SPIR-V folders), gpu (adapter choice, report, device), vulkan (device
extensions through libvulkan), kernels (the kernel set, inputs, numpy references), spirv (glslc),
timing (timestamp and wall-clock timers, statistics, stable-median tries), runner (`edge run`),
model (the tiny model or a given module), mps (PyTorch MPS path), pte (ExecuTorch export and runtime),
report (table, JSON, CSV, PNG).
"""
