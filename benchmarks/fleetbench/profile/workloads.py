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

A script or module is checked before it runs (the file exists, is readable and compiles; the
module is found and runnable). When it raises or exits non-zero it is a UserCodeFailed: one line,
the status it asked for (2 for an exception), and its own traceback without fleetbench's frames.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from fleetbench.config.schema import FleetbenchConfig, ProfileConfig
from fleetbench.devices import DeviceInfo
from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec


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
    from fleetbench.train.decoder import build_decoder
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
        model = build_decoder(shape)
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


class UserCodeFailed(UserError):
    """The profiled script or module raised (or exited non-zero): the capture did not happen.

    One line, like every UserError, with the exit status the program asked for (2 for an exception);
    `traceback` holds the program's own traceback, its frames only, for whoever shows it.
    """

    def __init__(self, message: str, exit_code: int = 2, traceback: str = "") -> None:
        super().__init__(message, exit_code)
        self.traceback = traceback


# Frames of the machinery between fleetbench and the user's code: left out of the user's traceback.
_FLEETBENCH_DIR = str(Path(__file__).resolve().parents[1])
_RUNNERS = ("<frozen runpy>", "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_RUNNER_FILES = (runpy.__file__ or "runpy.py", importlib.util.__file__ or "importlib")


def _internal(filename: str) -> bool:
    """Whether a frame's file belongs to fleetbench, runpy, the import system or torch.profiler."""
    if filename in _RUNNERS or filename in _RUNNER_FILES:
        return True
    path = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return path.startswith(_FLEETBENCH_DIR + "/") or "/torch/profiler/" in path


def _drop_internal(te: traceback.TracebackException, seen: set[int]) -> None:
    """Keep only the user's frames, in this exception and in those it was raised from (or during)."""
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([frame for frame in te.stack if not _internal(frame.filename)])
    for linked in (te.__cause__, te.__context__):
        if linked is not None:
            _drop_internal(linked, seen)


def user_traceback(exc: BaseException) -> tuple[str, str]:
    """(the traceback of `exc` with only the user's frames, where it was raised: `file:line in name` or "")."""
    te = traceback.TracebackException.from_exception(exc)
    _drop_internal(te, set())
    where = f"{te.stack[-1].filename}:{te.stack[-1].lineno} in {te.stack[-1].name}" if te.stack else ""
    return "".join(te.format()).rstrip(), where


def _short(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


NOT_CAPTURED = "the profile capture did not happen and no run was recorded"


def _exit_failure(what: str, exc: SystemExit) -> UserCodeFailed | None:
    """SystemExit of the program: None for a clean exit (0 or None), else the failure with its status."""
    code = exc.code
    if code is None or code is False or code == 0:
        return None
    if isinstance(code, int):
        status = code if 0 < code < 256 else 2
        return UserCodeFailed(
            f"{what} exited with status {code}; {NOT_CAPTURED}; accepted: a program that exits with status 0",
            exit_code=status,
        )
    return UserCodeFailed(  # SystemExit("message"): Python prints it and exits with status 1
        f"{what} exited with {_short(str(code))!r} (status 1); {NOT_CAPTURED}; "
        "accepted: a program that exits with status 0",
        exit_code=1,
    )


def _run_with_argv(argv: list[str], target: Callable[[], object], what: str) -> None:
    """Run the program with `argv` as sys.argv; its failure becomes a UserCodeFailed (Ctrl-C passes)."""
    saved = sys.argv[:]
    sys.argv = argv
    try:
        target()
    except SystemExit as exc:
        failure = _exit_failure(what, exc)
        if failure is not None:
            raise failure from None
    except Exception as exc:
        text, where = user_traceback(exc)
        at = f" at {where}" if where else ""
        raise UserCodeFailed(
            f"{what} failed: {type(exc).__name__}: {_short(str(exc))}{at}; {NOT_CAPTURED}; "
            "accepted: a program that runs to its end",
            traceback=text,
        ) from None
    finally:
        sys.argv = saved


def _compile_check(path: Path) -> None:
    """Refuse a script that does not compile (syntax, encoding, NUL bytes) before anything runs."""
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" at line {exc.lineno}" if exc.lineno else ""
        raise UserError(
            f"profile.script {path}: {type(exc).__name__}: {exc.msg}{where}; accepted: a Python file that compiles"
        ) from None
    except (ValueError, OSError) as exc:  # NUL bytes, undecodable text, read errors
        raise UserError(f"profile.script {path}: {_short(str(exc))}; accepted: a Python source file") from None


def script_workload(cfg: ProfileConfig) -> Workload:
    """`profile.script` run once as __main__ with `profile.args`; UserError when it is missing or does not compile."""
    assert cfg.script is not None
    path = readable_file(cfg.script, "profile.script", "pass an existing Python file")
    _compile_check(path)
    argv = [str(path), *cfg.args]
    return Workload(
        kind="script",
        dtype=None,
        description=f"script {' '.join(argv)}",
        run_once=lambda: _run_with_argv(argv, lambda: runpy.run_path(str(path), run_name="__main__"), f"script {path}"),
        details={"script": str(path), "args": cfg.args},
    )


def _module_spec(name: str) -> ModuleSpec | None:
    """importlib's spec of `name`; importing its parent package is the user's code, and may fail as such."""
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if name == missing or name.startswith(missing + "."):
            return None  # the module or a package on its way does not exist
        failure: Exception = exc
    except ValueError:
        return None
    except Exception as exc:  # a parent package raised while being imported
        failure = exc
    text, where = user_traceback(failure)
    at = f" at {where}" if where else ""
    raise UserCodeFailed(
        f"profile.module {name!r}: importing its package failed: {type(failure).__name__}: {_short(str(failure))}"
        f"{at}; {NOT_CAPTURED}; accepted: a module whose packages import",
        traceback=text,
    ) from None


def module_workload(cfg: ProfileConfig) -> Workload:
    """`profile.module` run once like `python -m`; UserError when it is not importable or not runnable."""
    assert cfg.module is not None
    name = cfg.module
    spec = _module_spec(name)
    if spec is None:
        raise UserError(f"profile.module {name!r} not found on the Python path; pass an importable module")
    locations = spec.submodule_search_locations
    if locations is not None and importlib.machinery.PathFinder.find_spec("__main__", list(locations)) is None:
        raise UserError(
            f"profile.module {name!r} is a package without a __main__ module, so it cannot run like "
            f"python -m {name}; pass a module, or a package with __main__.py"
        )
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
