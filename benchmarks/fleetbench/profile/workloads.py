"""What gets profiled. Each workload is either a step (run wait + warmup + active times under a
profiler schedule) or a program run once (a script or module, profiled whole).

  train    steps of the trainer's model (fleetbench.train): the preset's Decoder (optionally only its
           first `profile.train_layers` blocks), forward, cross-entropy, backward, AdamW step, on one
           device without FSDP; bf16 autocast on CUDA as the trainer's mixed precision, fp32 on CPU.
           Default preset: tiny on CPU, seed on GPU.
  linear   the probe: one nn.Linear(size, size) forward + backward on a (batch, size) input,
           float16 on GPU and float32 on CPU by default (profile.linear_size, profile.linear_batch)
  script   a Python file, run as __main__ with profile.args as its argv
  module   a module, run like `python -m NAME` with profile.args
  auto     script or module when one is given, else train when fleetbench.train is importable,
           else linear
"""

from __future__ import annotations

import contextlib
import importlib.util
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from fleetbench.config.schema import FleetbenchConfig, ProfileConfig
from fleetbench.devices import DeviceInfo
from fleetbench.errors import UserError


@dataclass
class Workload:
    """What to profile: a `step` repeated under the schedule, or a `run_once` program; never both."""

    kind: str  # train | linear | script | module
    description: str
    dtype: str | None  # the main compute dtype, for the roofline's compute roof
    step: Callable[[], None] | None = None  # repeated under the profiler schedule
    run_once: Callable[[], None] | None = None  # or run once, profiled whole
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def linear_dtype(cfg: ProfileConfig, device: DeviceInfo) -> torch.dtype:
    """`profile.dtype`, or for auto float16 on a GPU and float32 on the CPU."""
    if cfg.dtype != "auto":
        dtype: torch.dtype = getattr(torch, cfg.dtype)
        return dtype
    return torch.float16 if device.backend == "cuda" else torch.float32


def linear_workload(cfg: ProfileConfig, device: DeviceInfo) -> Workload:
    """One nn.Linear forward and backward per step; refuses float16 on the CPU (UserError)."""
    dtype = linear_dtype(cfg, device)
    if device.backend == "cpu" and dtype == torch.float16:
        raise UserError(
            "profile.dtype=float16 is not accepted on CPU (no fast fp16 GEMM there); "
            "accepted on CPU: float32, bfloat16 or auto"
        )
    generator = torch.Generator(device="cpu").manual_seed(0)
    layer = torch.nn.Linear(cfg.linear_size, cfg.linear_size).to(device=device.torch_device, dtype=dtype)
    # The input asks for its gradient too, as inside a network: backward runs dX and dW GEMMs.
    x = torch.randn(cfg.linear_batch, cfg.linear_size, generator=generator).to(device.torch_device, dtype)
    x.requires_grad_(True)
    grad_out = torch.ones(cfg.linear_batch, cfg.linear_size, device=device.torch_device, dtype=dtype)

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).backward(grad_out)

    name = str(dtype).removeprefix("torch.")
    return Workload(
        kind="linear",
        dtype=name,
        step=step,
        description=f"Linear {cfg.linear_size}x{cfg.linear_size} forward+backward, batch {cfg.linear_batch}, {name}",
        details={"size": cfg.linear_size, "batch": cfg.linear_batch, "dtype": name},
    )


def trainer_available() -> bool:
    """Whether this install has the trainer (fleetbench.train), the default workload."""
    return importlib.util.find_spec("fleetbench.train") is not None


def train_workload(config: FleetbenchConfig, device: DeviceInfo) -> Workload:
    """The trainer's model and step on one device (no process group, no FSDP)."""
    import torch.nn.functional as F

    from fleetbench.config.train import TrainConfig
    from fleetbench.train.data import TokenBatches
    from fleetbench.train.decoder import Decoder
    from fleetbench.train.defaults import choose_precision, choose_preset
    from fleetbench.train.parallel import build_optimizer
    from fleetbench.train.plan import resolve_plan

    cfg = config.profile
    base = getattr(config, "train", None)
    train_cfg = base if isinstance(base, TrainConfig) else TrainConfig()
    preset = cfg.train_preset or choose_preset(None, device.backend).name
    try:
        train_cfg = train_cfg.model_copy(update={"preset": preset, "fsdp": False, "hsdp": False})
        train_cfg = TrainConfig.model_validate(train_cfg.model_dump())
    except ValueError as exc:
        raise UserError(f"profile.train_preset={preset!r} is not accepted: {exc}") from None
    plan = resolve_plan(train_cfg, world_size=1)
    shape = plan.shape if cfg.train_layers is None else replace(plan.shape, layers=cfg.train_layers)
    with device.torch_device:  # default init right on the device: weight values do not change timings
        model = Decoder(shape)
    optimizer = build_optimizer(model, plan.lr, train_cfg.weight_decay)
    data = TokenBatches(
        plan.data, shape.vocab_size, plan.seq_len, plan.batch_size, train_cfg.seed, 0, device.torch_device
    )
    mixed = choose_precision(train_cfg.mixed_precision, True, device.backend).bf16  # as the FSDP2 trainer's
    counter = {"step": 0}

    def step() -> None:
        inputs, targets = data.batch(counter["step"])
        counter["step"] += 1
        precision = torch.autocast(device.backend, dtype=torch.bfloat16) if mixed else contextlib.nullcontext()
        with precision:
            logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        torch.autograd.backward(loss)  # what loss.backward() calls, with type annotations
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    dtype = "bfloat16" if mixed else "float32"
    blocks = f"{shape.layers} of {plan.shape.layers} blocks" if cfg.train_layers else f"{shape.layers} blocks"
    return Workload(
        kind="train",
        dtype=dtype,
        step=step,
        description=f"trainer preset {preset} ({blocks}, dim {shape.dim}, seq {plan.seq_len}, "
        f"batch {plan.batch_size}, {dtype}) forward+backward+AdamW",
        details={
            "preset": preset,
            "layers": shape.layers,
            "dim": shape.dim,
            "seq_len": plan.seq_len,
            "batch_size": plan.batch_size,
            "dtype": dtype,
        },
    )


def _run_with_argv(argv: list[str], target: Callable[[], object], what: str) -> None:
    saved = sys.argv[:]
    sys.argv = argv
    try:
        target()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise UserError(f"{what} exited with status {exc.code} while being profiled") from None
    finally:
        sys.argv = saved


def script_workload(cfg: ProfileConfig) -> Workload:
    """`profile.script` run once as __main__ with `profile.args`; UserError when the file is missing."""
    assert cfg.script is not None
    path = cfg.script
    if not path.is_file():
        raise UserError(f"profile.script {path} not found; pass an existing Python file")
    argv = [str(path), *cfg.args]
    return Workload(
        kind="script",
        dtype=None,
        description=f"script {' '.join(argv)}",
        run_once=lambda: _run_with_argv(argv, lambda: runpy.run_path(str(path), run_name="__main__"), f"script {path}"),
        details={"script": str(path), "args": cfg.args},
    )


def module_workload(cfg: ProfileConfig) -> Workload:
    """`profile.module` run once like `python -m`; UserError when it is not importable."""
    assert cfg.module is not None
    name = cfg.module
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UserError(f"profile.module {name!r} not found on the Python path; pass an importable module")
    argv = [name, *cfg.args]
    return Workload(
        kind="module",
        dtype=None,
        description=f"python -m {' '.join(argv)}",
        run_once=lambda: _run_with_argv(
            argv, lambda: runpy.run_module(name, run_name="__main__", alter_sys=True), f"module {name}"
        ),
        details={"module": name, "args": cfg.args},
    )


def resolve_workload(config: FleetbenchConfig, device: DeviceInfo) -> Workload:
    """The workload `profile.workload` names (auto: see the module docstring), built and checked."""
    cfg = config.profile
    kind = cfg.workload
    if kind == "auto":
        kind = "script" if cfg.script else "module" if cfg.module else "train" if trainer_available() else "linear"
    if kind == "script":
        return script_workload(cfg)
    if kind == "module":
        return module_workload(cfg)
    if kind == "train":
        if not trainer_available():
            raise UserError(
                "profile.workload=train needs the trainer (fleetbench.train), which this install "
                "lacks; accepted here: linear, script, module"
            )
        return train_workload(config, device)
    return linear_workload(cfg, device)
