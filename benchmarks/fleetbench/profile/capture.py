"""Step A: run a workload under torch.profiler and write what it saw into the run folder.

A step workload runs wait + warmup + active steps under `torch.profiler.schedule` (only the
active steps are recorded); a script or module runs once, recorded whole. Activities: CPU, plus
CUDA on a GPU. record_shapes, profile_memory, with_flops and with_stack as configured. `record` runs
the workload and keeps what the profiler saw in memory; `write_capture` then writes the files, so a
program that fails leaves nothing behind.

Files (in <run folder>/profile/):
  key_averages.txt     the key_averages() table sorted by self device time (CUDA) or self CPU time
  trace.json[.gz]      the Chrome trace (opens in ui.perfetto.dev); gzip above profile.gzip_above_mib
  memory_timeline.html the memory timeline of the profiled device (torch.profiler's exporter)
  ops.json             per-op time, FLOPs (and their source), tensor bytes and dtype: the analytical
                       roofline's input; FLOPs and bytes per call as profile/flops.py counts them
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import shutil
import sys
import time
import warnings
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetbench import jsonio
from fleetbench.edge.native import native_stderr
from fleetbench.profile.flops import VIEW_OPS, Arg, args_from_event, args_from_tree, count_call, main_dtype
from fleetbench.profile.names import label
from fleetbench.profile.roofline.analysis import OpStat

if TYPE_CHECKING:  # torch loads when a capture runs: CaptureResult and load_ops are read without it
    from torch.profiler import profile

    from fleetbench.config.schema import ProfileConfig
    from fleetbench.devices import DeviceInfo
    from fleetbench.profile.workloads import Workload

log = logging.getLogger(__name__)

SKIPPED_OPS = ("ProfilerStep",)


@dataclass
class CaptureResult:
    """What a capture left in the run folder (`files` by kind) and the per-op figures it read."""

    out_dir: Path
    files: dict[str, Path]
    ops: list[OpStat]
    steps_recorded: int
    wall_s: float
    sort_key: str
    notes: list[str] = field(default_factory=list)


def tensor_list_calls(prof: profile) -> dict[str, list[list[Arg]]]:
    """The inputs of each call of the ops that take tensor lists, by op name in call order.

    A FunctionEvent records no shape for a TensorList argument, and the fused optimizer step takes
    all its parameters so; the profiler's event tree (a private API, read defensively) keeps them.
    """
    from torch._C._profiler import _ExtraFields_TorchOp

    try:
        results = prof.profiler.kineto_results if prof.profiler is not None else None
        roots = results.experimental_event_tree() if results is not None else []
    except (AttributeError, RuntimeError) as exc:
        log.debug("no event tree for the tensor-list ops: %s", exc)
        return {}
    found: list[tuple[int, str, list[Arg]]] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        fields = node.extra_fields
        if isinstance(fields, _ExtraFields_TorchOp) and any(isinstance(i, list) for i in fields.inputs):
            found.append((node.start_time_ns, node.name, args_from_tree(fields.inputs)))
    calls: dict[str, list[list[Arg]]] = defaultdict(list)
    for _, name, args in sorted(found, key=lambda call: call[0]):
        calls[name].append(args)
    return dict(calls)


def _new_row() -> dict[str, Any]:
    return {
        "count": 0,
        "time": 0.0,
        "self": 0.0,
        "flops": 0.0,
        "bytes": 0.0,
        "dtypes": defaultdict(float),
        "sources": defaultdict(float),
    }


def kineto_input_dtypes(prof: profile) -> dict[int, list[str]]:
    """Each CPU op's input dtypes by event id, read from the kineto events the FunctionEvents were made from.

    torch before 2.12 leaves `input_dtypes` off its FunctionEvent (the trace has them, as "Input type");
    a FunctionEvent's id is its kineto event's correlation id. A private API, read defensively.
    """
    from torch.profiler import DeviceType

    try:
        results = prof.profiler.kineto_results if prof.profiler is not None else None
        events = results.events() if results is not None else []
        return {
            event.correlation_id(): [str(d) for d in event.dtypes()]
            for event in events
            if event.device_type() == DeviceType.CPU
        }
    except (AttributeError, RuntimeError) as exc:
        log.debug("no input dtypes from the kineto events: %s", exc)
        return {}


def input_dtypes(event: Any, by_id: dict[int, list[str]]) -> list[str]:
    """The dtype strings of an op event's inputs: its own, else those of its kineto event (same count of inputs)."""
    recorded = getattr(event, "input_dtypes", None)
    if recorded is not None:
        return [str(d) for d in recorded]
    found = by_id.get(event.id, [])
    return found if len(found) == len(event.input_shapes or []) else []


def _event_args(event: Any, lists: dict[str, deque[list[Arg]]], dtypes_by_id: dict[int, list[str]]) -> list[Arg]:
    dtypes = input_dtypes(event, dtypes_by_id)
    if "TensorList" in dtypes and lists.get(event.name):
        return lists[event.name].popleft()  # events and tree calls of one op run in the same order
    return args_from_event(list(event.input_shapes or []), dtypes)


def _stat(name: str, row: dict[str, Any]) -> OpStat:
    dtypes, sources = row["dtypes"], row["sources"]
    counted = {source: flops for source, flops in sources.items() if flops > 0}
    return OpStat(
        name=name,
        label=label(name),
        count=row["count"],
        time_s=row["time"],
        self_time_s=row["self"],
        flops=row["flops"],
        bytes=row["bytes"],
        dtype=max(dtypes, key=dtypes.get) if dtypes else None,
        flop_source=max(counted, key=lambda s: counted[s]) if counted else "none",
    )


def op_stats(
    events: Any,
    on_gpu: bool,
    tensor_lists: dict[str, list[list[Arg]]] | None = None,
    dtypes_by_id: dict[int, list[str]] | None = None,
) -> list[OpStat]:
    """Aggregate the profiler's op events by name: time, FLOPs (and their source), tensor bytes, main dtype.

    `tensor_lists`: the inputs of the tensor-list ops (`tensor_list_calls`), which the events lack;
    `dtypes_by_id`: the input dtypes of events that lack them (`kineto_input_dtypes`, torch < 2.12).
    """
    from torch.profiler import DeviceType

    lists = {name: deque(calls) for name, calls in (tensor_lists or {}).items()}
    rows: dict[str, dict[str, Any]] = defaultdict(_new_row)
    for event in events:
        if (
            event.device_type != DeviceType.CPU
            or getattr(event, "is_python_function", False)
            or event.name.startswith(SKIPPED_OPS)
        ):
            continue  # device-side events, Python frames (with_stack) and step markers are not ops
        time_us = event.device_time_total if on_gpu else event.cpu_time_total
        allocated = event.device_memory_usage if on_gpu else event.cpu_memory_usage
        args = _event_args(event, lists, dtypes_by_id or {})
        call = count_call(event.name, args, float(event.flops or 0), int(allocated or 0))
        row = rows[event.name]
        row["count"] += 1
        row["time"] += time_us * 1e-6
        row["self"] += (event.self_device_time_total if on_gpu else event.self_cpu_time_total) * 1e-6
        row["flops"] += call.flops
        row["sources"][call.source] += call.flops
        if event.name not in VIEW_OPS:
            row["bytes"] += call.bytes
        if (dtype := main_dtype(args)) is not None:
            row["dtypes"][dtype] += time_us
    stats = [_stat(name, row) for name, row in rows.items()]
    return sorted(stats, key=lambda s: s.self_time_s, reverse=True)


def write_trace(prof: profile, out_dir: Path, gzip_above_mib: float) -> Path:
    """Export the Chrome trace; gzip it when it is larger than `gzip_above_mib` MiB."""
    plain = out_dir / "trace.json"
    prof.export_chrome_trace(str(plain))
    if plain.stat().st_size <= gzip_above_mib * 2**20:
        return plain
    packed = out_dir / "trace.json.gz"
    with plain.open("rb") as source, gzip.open(packed, "wb", compresslevel=6) as target:
        shutil.copyfileobj(source, target)
    plain.unlink()
    return packed


# libkineto's lines on fd 2 when a trace starts and stops ("USDT:... profiler_start"): noise to a user.
_KINETO_CHATTER = re.compile(r"^(USDT|STAGE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \S+:\d+\] ")


@contextmanager
def _quiet_kineto() -> Iterator[None]:
    """Leave out libkineto's start/stop chatter printed during the block; anything else is printed as it came."""
    sink: list[str] = []
    try:
        with native_stderr(sink):
            yield
    finally:
        kept = [line for line in "".join(sink).splitlines(keepends=True) if not _KINETO_CHATTER.match(line)]
        if kept:
            sys.stderr.write("".join(kept))
            sys.stderr.flush()


@dataclass
class Recording:
    """What torch.profiler saw of a workload that ran to its end; nothing is written yet."""

    prof: Any  # torch.profiler.profile, stopped
    wall_s: float
    stepped: bool


def record(
    workload: Workload, cfg: ProfileConfig, device: DeviceInfo, progress: Callable[[str], None] | None = None
) -> Recording:
    """Run `workload` under torch.profiler and keep what it saw in memory; writes nothing.

    A script or module that fails raises workloads.UserCodeFailed before anything was written, so a
    failed program leaves no folder behind. `progress` receives a short line per step.
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    on_gpu = device.backend == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    stepped = workload.step is not None
    total_steps = cfg.wait + cfg.warmup + cfg.active
    plan = schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=1) if stepped else None
    # Any: torch.profiler's context methods and events() carry no annotations.
    prof: Any = profile(
        activities=activities,
        schedule=plan,
        record_shapes=cfg.record_shapes,
        profile_memory=cfg.profile_memory,
        with_flops=cfg.with_flops,
        with_stack=cfg.with_stack,
    )
    started = time.perf_counter()
    # The profiler's context protocol called by hand: its start, steps and stop are the moments
    # libkineto prints its chatter, and only those are filtered, not the program's own stderr.
    with _quiet_kineto():
        prof.__enter__()
    try:
        if workload.step is not None:
            for index in range(total_steps):
                if progress:
                    progress(f"step {index + 1}/{total_steps}")
                workload.step()
                device.synchronize()
                with _quiet_kineto():
                    prof.step()
        else:
            assert workload.run_once is not None
            if progress:
                progress("running the program")
            workload.run_once()
            device.synchronize()
    finally:
        with _quiet_kineto():
            prof.__exit__(None, None, None)
    wall = time.perf_counter() - started
    log.debug("torch.profiler ran the workload in %.2f s", wall)
    return Recording(prof, wall, stepped)


def capture(
    workload: Workload,
    cfg: ProfileConfig,
    device: DeviceInfo,
    out_dir: Path,
    progress: Callable[[str], None] | None = None,
) -> CaptureResult:
    """Run `workload` under torch.profiler and write its files into `out_dir` (see the module docstring).

    `progress` receives a short line per step, for a status display.
    """
    return write_capture(record(workload, cfg, device, progress), cfg, device, out_dir)


def write_capture(recording: Recording, cfg: ProfileConfig, device: DeviceInfo, out_dir: Path) -> CaptureResult:
    """Write what `record` saw into `out_dir` (created here): the tables, trace, memory timeline and ops."""
    out_dir.mkdir(parents=True, exist_ok=True)
    prof, wall, stepped = recording.prof, recording.wall_s, recording.stepped
    on_gpu = device.backend == "cuda"
    files: dict[str, Path] = {}
    notes: list[str] = []
    sort_key = "self_device_time_total" if on_gpu else "self_cpu_time_total"
    averages = prof.key_averages()
    table = averages.table(sort_by=sort_key, row_limit=cfg.top)
    files["key_averages"] = out_dir / "key_averages.txt"
    files["key_averages"].write_text(f"sorted by {sort_key}\n{table}\n", encoding="utf-8")
    files["trace"] = write_trace(prof, out_dir, cfg.gzip_above_mib)
    if cfg.profile_memory and cfg.record_shapes and cfg.with_stack:
        target = out_dir / "memory_timeline.html"
        try:
            with warnings.catch_warnings():
                # Deprecated in favour of torch.cuda.memory snapshots, which do not cover the CPU.
                warnings.simplefilter("ignore", FutureWarning)
                prof.export_memory_timeline(str(target), device=str(device.torch_device))
            files["memory_timeline"] = target
        except Exception as exc:  # the exporter fails on some event mixes; the rest of the capture stands
            notes.append(f"memory timeline not written: {type(exc).__name__}: {exc}")
            log.warning(notes[-1])
    else:
        notes.append("memory timeline needs profile_memory, record_shapes and with_stack")
        log.info(notes[-1])
    events = prof.events()
    lacking = any(getattr(e, "input_dtypes", None) is None for e in events if e.input_shapes)
    dtypes_by_id = kineto_input_dtypes(prof) if lacking else {}
    needs_lists = any("TensorList" in input_dtypes(e, dtypes_by_id) for e in events)
    ops = op_stats(events, on_gpu, tensor_list_calls(prof) if needs_lists else None, dtypes_by_id)
    files["ops"] = out_dir / "ops.json"
    files["ops"].write_text(jsonio.dumps([asdict(op) for op in ops], indent=1), encoding="utf-8")
    return CaptureResult(
        out_dir=out_dir,
        files=files,
        ops=ops,
        steps_recorded=cfg.active if stepped else 1,
        wall_s=wall,
        sort_key=sort_key,
        notes=notes,
    )


def load_ops(path: Path) -> list[OpStat]:
    """The ops.json a capture wrote, back as OpStat rows."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for row in data:  # written before ops kept their FLOP source: only the profiler counted then
        row.setdefault("flop_source", "torch.profiler" if row.get("flops", 0) > 0 else "none")
    return [OpStat(**row) for row in data]
