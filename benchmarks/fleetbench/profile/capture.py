"""Step A: run a workload under torch.profiler and write what it saw into the run folder.

A step workload runs wait + warmup + active steps under `torch.profiler.schedule` (only the
active steps are recorded); a script or module runs once, recorded whole. Activities: CPU, plus
CUDA on a GPU. record_shapes, profile_memory, with_flops and with_stack as configured.

Files (in <run folder>/profile/):
  key_averages.txt     the key_averages() table sorted by self device time (CUDA) or self CPU time
  trace.json[.gz]      the Chrome trace (opens in ui.perfetto.dev); gzip above profile.gzip_above_mib
  memory_timeline.html the memory timeline of the profiled device (torch.profiler's exporter)
  ops.json             per-op time, FLOPs, tensor bytes and dtype: the analytical roofline's input
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from torch.profiler import DeviceType, ProfilerActivity, profile, schedule

from fleetbench.config.schema import ProfileConfig
from fleetbench.devices import DeviceInfo
from fleetbench.profile.names import label
from fleetbench.profile.roofline.analysis import OpStat
from fleetbench.profile.workloads import Workload

log = logging.getLogger(__name__)

# Element sizes of the dtype strings torch.profiler records for op inputs.
ELEMENT_SIZE = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
}
FLOAT_DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16"}
SKIPPED_OPS = ("ProfilerStep",)
# Ops that only make a new view of their input: no tensor traffic of their own.
VIEW_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "t",
        "transpose",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "expand",
        "expand_as",
        "permute",
        "slice",
        "select",
        "unsqueeze",
        "squeeze",
        "detach",
        "alias",
        "resolve_conj",
        "resolve_neg",
        "split",
        "split_with_sizes",
        "chunk",
        "narrow",
        "unflatten",
        "flatten",
        "view_as",
        "unbind",
        "numpy_T",
        "lift_fresh",
        "empty",
        "empty_like",
        "empty_strided",
    )
)


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


def input_bytes(shapes: list[Any], dtypes: list[Any]) -> int:
    """Bytes of an op's tensor inputs, from the shapes and dtypes torch.profiler recorded (others count 0)."""
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=False):
        size = ELEMENT_SIZE.get(str(dtype))
        if size is None or not isinstance(shape, list | tuple):
            continue  # Scalar, ScalarList, TensorList, None: no tensor shape recorded
        if all(isinstance(d, int) for d in shape):
            total += prod(shape) * size
    return total


def op_stats(events: Any, on_gpu: bool) -> list[OpStat]:
    """Aggregate the profiler's op events by name: time, FLOPs, tensor bytes, main dtype."""
    rows: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"count": 0, "time": 0.0, "self": 0.0, "flops": 0.0, "bytes": 0.0, "dtypes": defaultdict(float)}
    )
    for event in events:
        if (
            event.device_type != DeviceType.CPU
            or getattr(event, "is_python_function", False)
            or event.name.startswith(SKIPPED_OPS)
        ):
            continue  # device-side events, Python frames (with_stack) and step markers are not ops
        time_us = event.device_time_total if on_gpu else event.cpu_time_total
        self_us = event.self_device_time_total if on_gpu else event.self_cpu_time_total
        allocated = event.device_memory_usage if on_gpu else event.cpu_memory_usage
        row = rows[event.name]
        row["count"] += 1
        row["time"] += time_us * 1e-6
        row["self"] += self_us * 1e-6
        row["flops"] += float(event.flops or 0)
        if event.name not in VIEW_OPS:
            row["bytes"] += max(int(allocated or 0), 0) + input_bytes(
                list(event.input_shapes or []), list(getattr(event, "input_dtypes", []) or [])
            )
        floating = [FLOAT_DTYPES[str(d)] for d in getattr(event, "input_dtypes", []) or [] if str(d) in FLOAT_DTYPES]
        if floating:
            row["dtypes"][floating[0]] += time_us
    stats = []
    for name, row in rows.items():
        dtypes = row["dtypes"]
        stats.append(
            OpStat(
                name=name,
                label=label(name),
                count=row["count"],
                time_s=row["time"],
                self_time_s=row["self"],
                flops=row["flops"],
                bytes=row["bytes"],
                dtype=max(dtypes, key=dtypes.get) if dtypes else None,
            )
        )
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
    out_dir.mkdir(parents=True, exist_ok=True)
    on_gpu = device.backend == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    stepped = workload.step is not None
    total_steps = cfg.wait + cfg.warmup + cfg.active
    plan = schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=1) if stepped else None
    started = time.perf_counter()
    with profile(
        activities=activities,
        schedule=plan,
        record_shapes=cfg.record_shapes,
        profile_memory=cfg.profile_memory,
        with_flops=cfg.with_flops,
        with_stack=cfg.with_stack,
    ) as prof:
        if workload.step is not None:
            for index in range(total_steps):
                if progress:
                    progress(f"step {index + 1}/{total_steps}")
                workload.step()
                device.synchronize()
                prof.step()
        else:
            assert workload.run_once is not None
            if progress:
                progress("running the program")
            workload.run_once()
            device.synchronize()
    wall = time.perf_counter() - started
    log.debug("torch.profiler ran the workload in %.2f s", wall)
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
    ops = op_stats(prof.events(), on_gpu)
    files["ops"] = out_dir / "ops.json"
    files["ops"].write_text(json.dumps([asdict(op) for op in ops], indent=1), encoding="utf-8")
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
    return [OpStat(**row) for row in data]
