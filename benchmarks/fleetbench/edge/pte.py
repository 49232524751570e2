"""ExecuTorch: export a model to .pte (torch.export + partitioners) and time a .pte with the Python runtime.

Export lowers with `to_edge_transform_and_lower` and one partitioner per program: XNNPACK (CPU, every
host), Vulkan (lowering is pure Python; running needs a runtime built with the Vulkan delegate),
CoreML (lowering needs coremltools; running needs Apple hardware) and MPS (macOS only). A sidecar
`<file>.pte.json` records the model factory, seed and inputs, so `edge run --pte` can rebuild the
eager model and check that both agree on the same input.

Timing follows ExecuTorch's benchmark apps: model load time (program + method), then warm-ups
(10 by default) and timed iterations (50): average, trimmed mean and p90 latency.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.edge.model_factory import BuiltModel, build
from fleetbench.edge.native import native_stderr, optional_module
from fleetbench.errors import UserError
from fleetbench.fsutil import atomic_path, readable_file, write_bytes_atomic

SIDECAR_FORMAT = "fleetbench-pte-1"
INSTALL_HINT = "install the [mobile] extra: pip install 'fleetbench[mobile]' (executorch==1.5.1)"
# name -> (module, class, platform it needs or None, what to say when the host cannot lower to it)
PARTITIONERS: dict[str, tuple[str, str, str | None]] = {
    "xnnpack": ("executorch.backends.xnnpack.partition.xnnpack_partitioner", "XnnpackPartitioner", None),
    "vulkan": ("executorch.backends.vulkan.partitioner.vulkan_partitioner", "VulkanPartitioner", None),
    "coreml": ("executorch.backends.apple.coreml.partition", "CoreMLPartitioner", None),
    "mps": ("executorch.backends.apple.mps.partition", "MPSPartitioner", "darwin"),
}
# torch dtype codes in ExecuTorch's TensorInfo.dtype() (c10::ScalarType)
SCALAR_TYPES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
    15: "bfloat16",
}


def _reason(log: list[str], exc: BaseException) -> str:
    """The runtime's own explanation: its last log line that is not CPU-detection chatter, else the exception."""
    lines = [
        line.strip()
        for line in "".join(log).splitlines()
        if line.strip() and "cpuinfo" not in line and not line.lstrip().startswith(("W", "Failed to load"))
    ]
    text = lines[-1] if lines else str(exc)
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]  # drop the [file.cpp:123] prefix
    return text


def require_executorch() -> None:
    """Refuse with the install hint when the ExecuTorch runtime cannot be imported."""
    sink: list[str] = []
    try:
        with native_stderr(sink):
            importlib.import_module("executorch.runtime")
    except ImportError as exc:
        raise UserError(f"ExecuTorch is not installed ({exc}); {INSTALL_HINT}") from None


# --- export --------------------------------------------------------------------------------------
@dataclass
class ExportResult:
    """One partitioner's export: the .pte (None when skipped, with the reason), delegated subgraphs, seconds."""

    partitioner: str
    path: Path | None
    delegated: int = 0
    seconds: float = 0.0
    skipped: str | None = None


def partitioner_problem(name: str) -> str | None:
    """Why this host cannot lower to the partitioner, or None when it can."""
    module_name, _cls, platform = PARTITIONERS[name]
    if platform is not None and sys.platform != platform:
        return f"{name}: requires macOS (the MPS delegate lowers on Apple hosts only)"
    sink: list[str] = []
    try:
        with native_stderr(sink):
            importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or a dependency failing at import time
        return f"{name}: this host cannot lower to it ({type(exc).__name__}: {exc})"
    return None


def refuse_unavailable(problems: dict[str, str | None]) -> None:
    """One line naming the first partitioner this host cannot lower to, and those it can."""
    for problem in problems.values():
        if problem is not None:
            usable = ", ".join(n for n in PARTITIONERS if partitioner_problem(n) is None)
            raise UserError(f"cannot export with partitioner {problem}; accepted on this host: {usable}")


def _partitioner(name: str) -> Any:
    module_name, cls_name, _platform = PARTITIONERS[name]
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls()


def export(  # noqa: PLR0913 - seed and batch are recorded in the sidecar; `edge export` passes them positionally
    built: BuiltModel,
    partitioners: Sequence[str],
    out_dir: Path,
    seed: int,
    batch: int,
    strict: bool,
    on_step: Callable[[str], None] | None = None,
) -> list[ExportResult]:
    """One .pte per partitioner; partitioners the host cannot lower to are skipped (or refused when strict).

    `on_step` hears what is being done (a progress task's `update`)."""
    require_executorch()
    import torch

    problems = {name: partitioner_problem(name) for name in partitioners}
    if strict:
        refuse_unavailable(problems)
    with native_stderr([]):  # torchao / coremltools import chatter
        to_edge_transform_and_lower = optional_module("executorch.exir").to_edge_transform_and_lower

    started = time.perf_counter()
    try:
        exported = torch.export.export(built.module, built.example_inputs)
    except Exception as exc:
        raise UserError(
            f"torch.export failed on {built.spec}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
        ) from None
    export_s = time.perf_counter() - started
    results: list[ExportResult] = []
    for name in partitioners:
        if problems[name] is not None:
            results.append(ExportResult(name, None, skipped=problems[name]))
            continue
        if on_step is not None:
            on_step(f"lowering {built.name} with the {name} partitioner ...")
        started = time.perf_counter()
        sink: list[str] = []
        try:
            with native_stderr(sink):
                edge = to_edge_transform_and_lower(exported, partitioner=[_partitioner(name)])
                program = edge.to_executorch()
        except Exception as exc:
            raise UserError(
                f"lowering {built.name} with {name} failed: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
        delegated = sum(1 for n, _m in edge.exported_program().graph_module.named_children() if "lowered_module" in n)
        path = out_dir / f"{built.name}-{name}.pte"
        write_program(path, program.buffer)
        sidecar = {
            "format": SIDECAR_FORMAT,
            "model": built.name,
            "module": built.spec,
            "seed": seed,
            "batch": batch,
            "partitioner": name,
            "delegated_subgraphs": delegated,
            "inputs": [
                {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "high": high}
                for t, high in zip(built.example_inputs, built.input_high, strict=True)
            ],
            "export_seconds": export_s,
            "lower_seconds": time.perf_counter() - started,
        }
        _write_atomic(sidecar_path(path), jsonio.dumps(sidecar, indent=2).encode())
        results.append(ExportResult(name, path, delegated, time.perf_counter() - started))
    return results


def write_program(path: Path, data: bytes) -> None:
    """Write an exported program atomically, kept only when the check `edge run --pte` applies to it passes:
    an export never leaves a file a later command refuses."""
    with atomic_path(path, "edge export") as tmp:
        tmp.write_bytes(data)
        try:
            check_program_file(tmp)
        except UserError as exc:
            raise UserError(
                f"edge export: the program lowered for {path.name} is one `edge run --pte` would refuse, so it "
                f"was not written ({str(exc).split('(', 1)[-1].rsplit(')', 1)[0]})"
            ) from None


def _write_atomic(path: Path, data: bytes) -> None:
    write_bytes_atomic(path, data, "edge export")


def sidecar_path(pte: Path) -> Path:
    """The sidecar JSON beside a .pte (`<file>.pte.json`)."""
    return pte.with_name(pte.name + ".json")


# --- runtime -------------------------------------------------------------------------------------
@dataclass
class LoadedProgram:
    """A loaded .pte: its `forward` method, load time, input shapes and dtypes, and its sidecar (empty if none)."""

    path: Path
    program: Any  # kept alive as long as its method is used
    method: Any
    load_s: float
    inputs_meta: list[tuple[list[int], str]]
    sidecar: dict[str, Any] = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        """The sidecar's model name, else the file's stem."""
        return str(self.sidecar.get("model") or self.path.stem)


# The FlatBuffer file identifier of an ExecuTorch program (bytes 4-8): `file_identifier "ET12"` in
# executorch 1.5.1's schema/program.fbs, the only one its runtime accepts.
PROGRAM_IDENTIFIERS = (b"ET12",)
DATA_IDENTIFIER = b"FT01"  # schema/flat_tensor.fbs: a .ptd data file, not a program
EXTENDED_HEADER_MAGIC = b"eh00"  # the header exir writes after the identifier (_program._ExtendedHeader)
EXTENDED_HEADER_MIN = 24  # magic, length, program size, segment base offset
HEAD_BYTES = 64
PTE_ACCEPTED = "accepted: a program written by `fleetbench edge export`"
PROBE_TIMEOUT_S = 300.0


def _bad_program(path: Path, reason: str) -> UserError:
    return UserError(
        f"{path}: not a loadable ExecuTorch program ({reason}); it is not an ExecuTorch program or it is "
        f"damaged; {PTE_ACCEPTED}"
    )


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little")


def _u64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 8], "little")


def _expected_size(head: bytes) -> int | None:
    """The file size the extended header promises (program, then segments), or None without one."""
    if head[8:12] != EXTENDED_HEADER_MAGIC or _u32(head, 12) < EXTENDED_HEADER_MIN:
        return None
    program_size, segment_base = _u64(head, 16), _u64(head, 24)
    segment_size = _u64(head, 32) if _u32(head, 12) > EXTENDED_HEADER_MIN else 0
    return max(program_size, segment_base + segment_size if segment_base else 0)


def check_program_file(path: Path) -> None:
    """Refuse what is not an ExecuTorch program before the runtime sees it: a missing, unreadable or
    non-regular file, one without the program FlatBuffer's identifier, or one shorter than its header says.

    The runtime aborts the process (SIGABRT) on some such files, e.g. when its log line quoting a
    bad identifier is not valid UTF-8; these checks need no ExecuTorch.
    """
    readable_file(path, ".pte file", PTE_ACCEPTED)
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
    if size < 8:
        raise _bad_program(
            path, "the file is empty" if size == 0 else f"{size} bytes, shorter than a FlatBuffer header"
        )
    identifier = head[4:8]
    if identifier not in PROGRAM_IDENTIFIERS:
        shown = identifier.decode("ascii", "backslashreplace")
        kind = ": a FlatTensor data file (.ptd), not a program" if identifier == DATA_IDENTIFIER else ""
        expected = " or ".join(i.decode() for i in PROGRAM_IDENTIFIERS)
        raise _bad_program(path, f"Program identifier '{shown}' != expected '{expected}'{kind}")
    root = _u32(head, 0)
    if not 8 <= root < size:
        raise _bad_program(path, f"its root table offset {root} lies outside the file's {size} bytes")
    expected_size = _expected_size(head)
    if expected_size is not None and size < expected_size:
        raise _bad_program(
            path,
            f"File size is too small: the extended header says {expected_size} bytes, the file has {size}; "
            "cut short, or still being written",
        )


def _probe_in_child(path: Path, runtime: Any) -> None:
    """Load program and `forward` in a forked child first (Linux): the runtime aborts the whole process
    on some damaged programs (a name that is not UTF-8 in a log line), which here becomes one line.

    A child that fails without aborting says nothing: the real load then gives the runtime's reason.
    """
    if not sys.platform.startswith("linux"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: only its exit status speaks, and an abort leaves no core file behind
        status = 0
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            with native_stderr([]):
                runtime.load_program(path).load_method("forward")
        except BaseException:
            status = 3
        os._exit(status)
    waited = _wait_child(pid, PROBE_TIMEOUT_S)
    if waited is None:
        raise _bad_program(path, f"the ExecuTorch runtime did not load it within {PROBE_TIMEOUT_S:g} s")
    if os.WIFSIGNALED(waited):
        name = signal.Signals(os.WTERMSIG(waited)).name
        raise _bad_program(path, f"the ExecuTorch runtime aborts on it ({name})")


def _wait_child(pid: int, timeout_s: float) -> int | None:
    """The child's wait status, or None after killing it when it took longer than `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def load(path: Path) -> LoadedProgram:
    """Load program and `forward` (timed: the model load time); a bad file is a one-line UserError."""
    check_program_file(path)
    require_executorch()
    Runtime = optional_module("executorch.runtime").Runtime

    sink: list[str] = []
    try:
        with native_stderr(sink):
            runtime = Runtime.get()
        _probe_in_child(path, runtime)
        with native_stderr(sink):
            started = time.perf_counter()
            program = runtime.load_program(path)
            method = program.load_method("forward")
            load_s = time.perf_counter() - started
    except UserError:
        raise
    except Exception as exc:
        reason = _reason(sink, exc).rstrip(".")
        if "is not registered" in reason:
            raise UserError(
                f"{path}: {reason} in this ExecuTorch runtime (it has: {', '.join(_registered())}); run this program "
                "on a host whose runtime includes that delegate, or export with --partitioners xnnpack"
            ) from None
        raise _bad_program(path, reason) from None
    meta = method.metadata
    inputs_meta = []
    for index in range(meta.num_inputs()):
        info = meta.input_tensor_meta(index)
        inputs_meta.append((list(info.sizes()), SCALAR_TYPES.get(int(info.dtype()), f"code{int(info.dtype())}")))
    sidecar: dict[str, Any] = {}
    side = sidecar_path(path)
    if side.is_file():
        try:
            loaded = json.loads(side.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{side}: unreadable sidecar ({exc}); delete it or export again") from None
        if isinstance(loaded, dict) and loaded.get("format") == SIDECAR_FORMAT:
            sidecar = loaded
    return LoadedProgram(path, program, method, load_s, inputs_meta, sidecar)


def _registered() -> list[str]:
    runtime = optional_module("executorch.runtime").Runtime
    sink: list[str] = []
    with native_stderr(sink):
        return list(runtime.get().backend_registry.registered_backend_names)


@dataclass
class ModelTiming:
    """One runtime's latencies of one model (seconds), with its error against eager and memory figures where known."""

    runtime: str
    model: str
    load_s: float
    latencies: list[float]
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    agrees: bool | None = None
    note: str = ""
    memory: dict[str, int] = field(default_factory=dict)


def _flatten(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flatten(v)]
    return []


def compare_outputs(got: Any, expected: Any) -> tuple[float, float]:
    """(max abs difference, that over max |expected|) across all output tensors."""
    got_t, exp_t = _flatten(got), _flatten(expected)
    if len(got_t) != len(exp_t) or any(g.shape != e.shape for g, e in zip(got_t, exp_t, strict=True)):
        shapes = [tuple(t.shape) for t in got_t], [tuple(t.shape) for t in exp_t]
        raise UserError(f"outputs differ in structure from eager PyTorch: {shapes[0]} vs {shapes[1]}")
    max_abs, scale = 0.0, 0.0
    for g, e in zip(got_t, exp_t, strict=True):
        g64, e64 = g.detach().double().cpu(), e.detach().double().cpu()
        max_abs = max(max_abs, float((g64 - e64).abs().max()) if g64.numel() else 0.0)
        scale = max(scale, float(e64.abs().max()) if e64.numel() else 0.0)
    if max_abs != max_abs:  # NaN
        return float("inf"), float("inf")
    return max_abs, (max_abs / scale if scale > 0 else max_abs)


def reference_model(loaded: LoadedProgram, module_spec: str | None, seed: int) -> BuiltModel | None:
    """The eager model behind the program: the sidecar's factory (or --module), same seed and batch."""
    spec = module_spec or loaded.sidecar.get("module")
    if not spec:
        return None
    built = build(str(spec), int(loaded.sidecar.get("seed", seed)), int(loaded.sidecar.get("batch", 1)))
    shapes = [(list(t.shape), str(t.dtype).removeprefix("torch.")) for t in built.example_inputs]
    if shapes != loaded.inputs_meta:
        raise UserError(
            f"{loaded.path}: inputs {loaded.inputs_meta} do not match {spec}'s example inputs {shapes}; "
            "accepted: the --module the program was exported from"
        )
    return built


def synthetic_inputs(loaded: LoadedProgram, seed: int) -> tuple[Any, ...]:
    """Inputs from the program's own metadata: token ids 0 (safe for any vocabulary), floats N(0, 1)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    out = []
    for shape, dtype in loaded.inputs_meta:
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise UserError(f"{loaded.path}: input dtype {dtype} is not supported; accepted: int and float inputs")
        if torch_dtype.is_floating_point:
            out.append(torch.randn(shape, generator=generator).to(torch_dtype))
        else:
            out.append(torch.zeros(shape, dtype=torch_dtype))
    return tuple(out)


def time_calls(call: Any, warmup: int, iterations: int) -> list[float]:
    """Call `call` `warmup` times, then time `iterations` calls; latencies in seconds."""
    for _ in range(warmup):
        call()
    latencies = []
    for _ in range(iterations):
        started = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - started)
    return latencies


def time_interleaved(calls: list[Any], warmup: int, iterations: int) -> list[list[float]]:
    """Warm-ups of each, then A B A B ...: drift on a shared or throttling machine hits all alike."""
    for call in calls:
        for _ in range(warmup):
            call()
    out: list[list[float]] = [[] for _ in calls]
    for _ in range(iterations):
        for call, latencies in zip(calls, out, strict=True):
            started = time.perf_counter()
            call()
            latencies.append(time.perf_counter() - started)
    return out


def run_program(
    loaded: LoadedProgram, module_spec: str | None, seed: int, warmup: int, iterations: int, tolerance: float
) -> tuple[ModelTiming, ModelTiming | None]:
    """Time the program and eager PyTorch on the same input, interleaved; check that their outputs agree."""
    import torch

    built = reference_model(loaded, module_spec, seed)
    inputs = built.example_inputs if built is not None else synthetic_inputs(loaded, seed)

    def program_call() -> Any:
        return loaded.method.execute(list(inputs))

    sink: list[str] = []
    try:
        with native_stderr(sink), torch.inference_mode():
            outputs = program_call()
            if built is None:
                et = ModelTiming(
                    "executorch", loaded.model_name, loaded.load_s, time_calls(program_call, warmup, iterations)
                )
                et.note = "agreement not checked: no eager model known (no sidecar; pass --module PKG.MODULE:FACTORY)"
                return et, None
            started = time.perf_counter()
            expected = built.module(*inputs)
            first_s = time.perf_counter() - started
            et_lat, eager_lat = time_interleaved([program_call, lambda: built.module(*inputs)], warmup, iterations)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"{loaded.path}: execution failed ({_reason(sink, exc)})") from None
    et = ModelTiming("executorch", loaded.model_name, loaded.load_s, et_lat)
    eager = ModelTiming("eager", loaded.model_name, first_s, eager_lat)
    et.max_abs_error, et.max_rel_error = compare_outputs(outputs, expected)
    et.agrees = et.max_rel_error <= tolerance
    eager.max_abs_error, eager.max_rel_error, eager.agrees = 0.0, 0.0, True
    eager.note = "load time is the first forward pass (no program to load); timed interleaved with executorch"
    return et, eager
