"""Find and read PyTorch profiler Chrome traces; sort their events into what the summary uses.

A trace is the `.json` or `.json.gz` that torch.profiler exports (`export_chrome_trace`, or
`tensorboard_trace_handler`, which names each rank's file `<worker>.<time>.pt.trace.json[.gz]`).
Holistic Trace Analysis reads a folder of them, one per rank, and takes each file's rank from its
`distributedInfo`; `find_traces` takes a folder the same way, keeping only files whose names say
they are traces (`*.pt.trace.json[.gz]`, a `rank-<N>` / `rank_<N>` / `rankN` part, or the
`trace.json[.gz]` of `fleetbench profile`), so the summaries a run writes beside its trace
(`trace_summary.json`, `roofline.json`) are not mistaken for one.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file
from fleetbench.profile.trace.comm import COLLECTIVE_ARGS, is_host_collective

US = 1e-6  # Chrome trace timestamps and durations are microseconds
DEVICE_CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "memcpy": "memcpy",
    "memset": "memset",
}
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
CPU_OP_CATEGORIES = {"cpu_op", "operator"}
SYNC_CATEGORIES = {"cuda_sync"}  # host waits the CUPTI records on the device's timeline
ANNOTATION_CATEGORIES = {"user_annotation"}
GPU_ANNOTATION_CATEGORIES = {"gpu_user_annotation"}
HOST_CATEGORIES = CPU_OP_CATEGORIES | ANNOTATION_CATEGORIES
STEP_PATTERN = re.compile(r"ProfilerStep\s*#\s*(\d{1,18})")
RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)", re.IGNORECASE)
TRACE_SUFFIXES = (".json", ".json.gz")
PROFILE_TRACE_NAMES = {"trace.json", "trace.json.gz"}  # what `fleetbench profile` writes
# Beyond this a time is not one (1e18 µs is 31,000 years; real traces count µs since the epoch,
# about 1.7e15): larger values, infinities and NaN are skipped, so sums of times stay finite.
MAX_TIME_US = 1e18
MIN_DUR_US = sys.float_info.min  # a non-zero duration below this is a denormal: no time either
ID_TYPES = (str, int)  # what a correlation id, pid or tid can be; anything else is written as text
TRACE_ACCEPTED = "pass a PyTorch profiler Chrome trace (.json or .json.gz)"
MAX_RANK = 1 << 20  # a distributedInfo.rank beyond this (or below 0) is damage, not a rank


def _decode(raw: bytes) -> Any:
    """JSON text as Python objects: msgspec's decoder (about 1.7x the standard library's on traces),
    the standard library's where msgspec refuses what it accepts (NaN and Infinity literals, which
    some traces carry and whose events are then counted as left out, not the whole trace refused)."""
    raw.decode("utf-8")  # msgspec does not check the text's encoding; a trace that is not UTF-8 is refused
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


class _FastArgs(msgspec.Struct):
    """The args the summary reads; the rest of each event's args are skipped while decoding."""

    correlation: int | str | None = None
    device: int | str | None = None
    stream: int | str | None = None
    collective_name: Any = msgspec.field(default=msgspec.UNSET, name=COLLECTIVE_ARGS[0])
    in_nelems: Any = msgspec.field(default=msgspec.UNSET, name=COLLECTIVE_ARGS[1])
    out_nelems: Any = msgspec.field(default=msgspec.UNSET, name=COLLECTIVE_ARGS[2])

    @property
    def collective(self) -> bool:
        """Whether record_param_comms' collective fields are there."""
        unset = msgspec.UNSET
        return self.collective_name is not unset or self.in_nelems is not unset or self.out_nelems is not unset


class _FastEvent(msgspec.Struct):
    """One event as well-formed torch.profiler traces write it: any other shape fails the typed decode."""

    ph: str
    name: str
    cat: str = ""
    ts: int | float | None = None
    dur: int | float = 0
    pid: int | str | None = None
    tid: int | str | None = None
    args: _FastArgs | None = None


class _FastTrace(msgspec.Struct):
    traceEvents: list[_FastEvent]
    distributedInfo: Any = None
    deviceProperties: Any = None


_FAST_DECODER = msgspec.json.Decoder(_FastTrace | list[_FastEvent])


def _read_bytes(path: Path) -> bytes:
    """The trace's JSON text (gunzipped); UserError when the file cannot be read."""
    readable_file(path, "trace", TRACE_ACCEPTED)
    try:
        raw = path.read_bytes()
        return gzip.decompress(raw) if path.suffix == ".gz" else raw
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(
            f"trace {path} is not a readable Chrome trace JSON ({exc}); "
            "expected the .json or .json.gz that torch.profiler exports"
        ) from None


def load_trace(path: Path) -> dict[str, Any]:
    """The trace's JSON object (a bare event array is wrapped as `traceEvents`).

    Raises UserError when the file is missing, unreadable or not a Chrome trace.
    """
    return _parse(_read_bytes(path), path)


def _parse(raw: bytes, path: Path) -> dict[str, Any]:
    """`load_trace` of text already read."""
    try:
        data = _decode(raw)
    # ValueError: also an integer of more digits than Python converts (4300), which json raises as such;
    # UnicodeDecodeError (a ValueError) for bytes that are no UTF-8
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise UserError(
            f"trace {path} is not a readable Chrome trace JSON ({exc}); "
            "expected the .json or .json.gz that torch.profiler exports"
        ) from None
    except RecursionError:  # arrays or objects nested thousands deep: no trace is
        raise UserError(
            f"trace {path} is not a Chrome trace: its JSON is nested too deep to be one; "
            "expected the .json or .json.gz that torch.profiler exports"
        ) from None
    if isinstance(data, list):  # the JSON Array Format of the trace-event spec
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise UserError(f"trace {path} has no traceEvents list; expected a PyTorch profiler Chrome trace")
    return data


def _looks_like_trace(path: Path) -> bool:
    name = path.name
    if not name.endswith(TRACE_SUFFIXES):
        return False
    return name in PROFILE_TRACE_NAMES or ".pt.trace.json" in name or RANK_IN_NAME.search(name) is not None


def find_traces(paths: Sequence[Path]) -> list[Path]:
    """The trace files `paths` name: files as given, folders expanded to their rank traces (sorted).

    Raises UserError for a path that does not exist and for a folder without a trace in it.
    """
    if not paths:
        raise UserError("give a trace file (.json or .json.gz), several, or a folder of rank traces")
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            traces = sorted(p for p in path.iterdir() if p.is_file() and _looks_like_trace(p))
            if not traces:
                raise UserError(f"no traces in folder {path}: looked for rank-<N>.*.json[.gz] and *.pt.trace.json[.gz]")
            found.extend(traces)
        else:
            found.append(readable_file(path, "trace", TRACE_ACCEPTED))
    return found


@dataclass(slots=True)
class DeviceEvent:
    """A kernel, memcpy or memset on the device; times in microseconds."""

    start: float
    end: float
    device: str
    stream: str
    category: str  # kernel, memcpy or memset
    name: str
    launch: float | None  # start of the runtime call that launched it; None: not in the trace
    launch_dur: float  # duration of that call (0 without one)
    collective_args: bool = False  # its args carry record_param_comms' collective fields


@dataclass(slots=True)
class HostOp:
    """A CPU op, or the annotation of a collective, on one host thread; times in microseconds."""

    start: float
    end: float
    thread: tuple[str, str]  # (pid, tid)
    name: str
    collective: bool = False  # the host side of a collective (`comm.is_host_collective`)


@dataclass
class Step:
    """One `ProfilerStep#N` annotation on the host; times in microseconds."""

    name: str
    number: int
    start: float
    end: float


@dataclass
class Dropped:
    """Complete events whose times are not times, left out: how many, and the first one of each kind."""

    counts: dict[str, int] = field(default_factory=dict)  # why -> how many
    examples: dict[str, str] = field(default_factory=dict)  # why -> `name: field=value` of the first

    def add(self, why: str, example: str) -> None:
        """Count one more event left out for `why`."""
        self.counts[why] = self.counts.get(why, 0) + 1
        self.examples.setdefault(why, example)

    @property
    def total(self) -> int:
        """Events left out, whatever the reason."""
        return sum(self.counts.values())

    def describe(self) -> str:
        """`N with ts NaN (e.g. ...), M with ...`: each reason with its count and first example."""
        return "; ".join(f"{n} {why} (e.g. {self.examples[why]})" for why, n in self.counts.items())


@dataclass
class TraceEvents:
    """One trace's complete events, sorted by what they are."""

    path: Path
    rank: int
    device_names: list[str]
    device: list[DeviceEvent] = field(default_factory=list)
    cpu_ops: list[HostOp] = field(default_factory=list)  # ops and the collectives' annotations
    syncs: int = 0  # cuda_sync events, left out of device time
    steps: list[Step] = field(default_factory=list)
    complete: int = 0  # complete (`ph: X`) events in the file, used or not
    dropped: Dropped = field(default_factory=Dropped)
    text_times: int = 0  # complete events whose times were written as text (read as numbers)
    # Every time above is relative to this (µs, the trace's clock): the whole µs of its first complete
    # event. Epoch µs near 1.7e15 sit on a 0.25 µs float grid; a duration added there loses its
    # fraction, a duration added to a time relative to the origin keeps it.
    origin_us: float | None = None
    host_streams: int = 0  # host events (not kernels, copies or syncs) that carry a stream id, which HTA counts
    gpu_steps: int = 0  # ProfilerStep annotations on the device's timeline, which HTA may cut steps by

    def dropped_note(self) -> str:
        """One line on the events left out for their times, or "" when none was."""
        if not self.dropped.total:
            return ""
        return (
            f"left out {self.dropped.total} of {self.complete} complete events whose times are not times: "
            f"{self.dropped.describe()}"
        )


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _rank(data: dict[str, Any], path: Path) -> int:
    """The trace's rank: distributedInfo.rank where the trace has one, else the file name's, else 0.

    Raises UserError when distributedInfo.rank is there but no rank: taking the file name's instead
    would put one rank's figures under another's without a word.
    """
    info = data.get("distributedInfo")
    if isinstance(info, dict) and "rank" in info:
        rank = info["rank"]
        if type(rank) is int and 0 <= rank < MAX_RANK:  # exact type: a bool is no rank
            return rank
        shown = repr(rank) if len(repr(rank)) <= 40 else repr(rank)[:37] + "..."
        raise UserError(
            f"trace {path}: distributedInfo.rank is {shown}, not a rank; "
            f"expected an integer from 0 to {MAX_RANK - 1} (as torch.distributed writes it)"
        )
    match = RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else 0


def _number(value: Any) -> bool:
    # exact types on purpose: bool is an int, and a flag is no time
    return type(value) is float or type(value) is int


def _usable(start: float, dur: float) -> bool:
    """Whether a start and a duration are times: finite, within MAX_TIME_US, the duration not negative and
    not a denormal (no clock ticks 1e-308 µs; such a value is damage, and its ratios overflow)."""
    return -MAX_TIME_US <= start <= MAX_TIME_US and (dur == 0 or MIN_DUR_US <= dur <= MAX_TIME_US)


def _why_not_a_time(name: str, value: Any) -> str:
    """Why a ts or dur value is no time: what the count of left-out events says."""
    try:
        number = float(value) if _number(value) or isinstance(value, str) else math.nan
    except ValueError:
        return f"with a {name} that is no number"
    except OverflowError:  # an integer too large for a float
        number = math.inf
    if not (_number(value) or isinstance(value, str)):
        return f"with a {name} that is no number"
    if math.isnan(number):
        return f"with {name} NaN"
    if math.isinf(number):
        return (
            f"with an infinite {name}" if not isinstance(value, int) else f"with a {name} beyond {MAX_TIME_US:.0e} µs"
        )
    if name == "dur" and number < 0:
        return "with a negative dur"
    if name == "dur" and number < MIN_DUR_US:
        return "with a denormal dur"
    return f"with a {name} beyond {MAX_TIME_US:.0e} µs"


def _times(event: Any, out: TraceEvents) -> tuple[float, float] | None:
    """Start and end of a complete (`ph: X`) event with numeric times; None for any other event.

    A complete event whose times are not times (NaN, infinite, beyond MAX_TIME_US, a negative
    duration, text that is no number) is counted in `out.dropped`; times written as text are read
    as numbers and counted in `out.text_times`.
    """
    if not isinstance(event, dict) or event.get("ph") != "X":
        return None
    out.complete += 1
    start: Any = event.get("ts")
    dur: Any = event.get("dur", 0)
    if not (_number(start) and _number(dur)):
        try:  # a time written as a string still counts, and is counted; a bool, list or null is no time
            start, dur = _text_time(start), _text_time(dur)
        except (TypeError, ValueError, OverflowError):
            _drop(event, out)
            return None
        out.text_times += 1
    if not _usable(start, dur):
        _drop(event, out)
        return None
    origin = out.origin_us
    if origin is None:
        origin = out.origin_us = math.floor(start)
    # ints stay ints: whole-µs traces keep exact arithmetic, and it is quicker
    start = start - origin  # exact: both lie on the same float grid, and the difference is smaller
    return start, start + dur


def _text_time(value: Any) -> float:
    """A number as it is, text as the number it spells; TypeError for anything else (a bool is a flag)."""
    if _number(value):
        return float(value)
    if isinstance(value, str):
        return float(value)
    raise TypeError(type(value).__name__)


def _drop(event: dict[str, Any], out: TraceEvents) -> None:
    """Count a complete event left out for its times, with the field and value that ruled it out."""
    start: Any = event.get("ts")
    dur: Any = event.get("dur", 0)
    field_name, value = ("dur", dur) if _as_time(start, lowest=-MAX_TIME_US) is not None else ("ts", start)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    name = str(event.get("name", ""))[:60]
    out.dropped.add(_why_not_a_time(field_name, value), f"{name!r}: {field_name}={shown}")


def _as_time(value: Any, lowest: float = 0.0) -> float | None:
    """`value` as µs when it is one (a number, or text of one) within [lowest, MAX_TIME_US]; else None."""
    try:
        number = float(value) if _number(value) or isinstance(value, str) else math.nan
    except (ValueError, OverflowError):
        return None
    return number if lowest <= number <= MAX_TIME_US else None  # False for NaN too


def _id(value: Any) -> str | int | None:
    """A correlation id, pid or tid as a dict key: a string or an int as it is, anything else as text."""
    if value is None or (isinstance(value, ID_TYPES) and not isinstance(value, bool)):
        return value
    return str(value)


class _HostFiler:
    """Files host events: ProfilerSteps, ops, collectives' annotations; other annotations are not work.

    Names and threads repeat thousands of times in a trace, so what is decided about one is kept.
    """

    def __init__(self, out: TraceEvents) -> None:
        self.out = out
        self.kinds: dict[tuple[str, str], str] = {}  # (category, name) -> step, op, collective or skip
        self.threads: dict[tuple[str | int | None, str | int | None], tuple[str, str]] = {}

    def file(self, event: dict[str, Any], category: str, times: tuple[float, float]) -> None:
        args = event.get("args")
        collective = isinstance(args, dict) and any(key in args for key in COLLECTIVE_ARGS)
        pid, tid = _id(event.get("pid")), _id(event.get("tid"))
        self.file_op(str(event.get("name", "")), category, pid, tid, collective, *times)

    def file_op(  # noqa: PLR0913 - one event's fields, on the hot path of reading a trace
        self,
        name: str,
        category: str,
        pid: str | int | None,
        tid: str | int | None,
        collective_args: bool,
        start: float,
        end: float,
    ) -> None:
        """File one host event; `collective_args`: its args carry record_param_comms' fields, which
        mark a collective whatever its name."""
        kind = self.kinds.get((category, name))
        if kind is None:
            kind = self.kinds[(category, name)] = self._kind(category, name)
        if collective_args and (kind == "skip" or kind == "op"):
            kind = "collective"
        if kind == "op" or kind == "collective":
            key = (pid, tid)
            thread = self.threads.get(key)
            if thread is None:
                thread = self.threads[key] = (str(pid), str(tid))
            self.out.cpu_ops.append(HostOp(start, end, thread, name, kind == "collective"))
        elif kind == "step":
            step = STEP_PATTERN.fullmatch(name)
            assert step is not None
            self.out.steps.append(Step(name, int(step.group(1)), start, end))

    @staticmethod
    def _kind(category: str, name: str) -> str:
        if STEP_PATTERN.fullmatch(name) is not None:
            return "step"
        if is_host_collective(name):
            return "collective"
        return "op" if category in CPU_OP_CATEGORIES else "skip"


def read_events(path: Path) -> TraceEvents:
    """Read one trace and sort its complete (`ph: X`) events; UserError when it is not a trace.

    A trace whose every event has the shape torch.profiler writes (typed numbers, string names, args
    an object) takes the typed decode, about 3x quicker; any other is read as plain JSON, event by
    event, with every check of the slow path.
    """
    raw = _read_bytes(path)
    try:
        raw.decode(
            "utf-8"
        )  # msgspec does not check the text's encoding: bytes that are no UTF-8 take the slow path's refusal
        fast = _FAST_DECODER.decode(raw)
    except (msgspec.MsgspecError, ValueError):  # ValueError: bytes that are no UTF-8, among others
        return _read_plain(_parse(raw, path), path)
    if isinstance(fast, list):
        fast = _FastTrace(fast)
    return _read_fast(fast, path)


def _record_launch(launches: dict[Any, tuple[float, float]], correlation: Any, start: float, dur: float) -> None:
    """Keep a runtime call as the launch of its correlation id: the earliest call of an id launched it."""
    call = (start, dur)
    if correlation is not None and call <= launches.get(correlation, call):
        launches[correlation] = call


def _note_host_event(out: TraceEvents, category: str, name: str, has_stream: bool) -> None:
    """Count what HTA reads differently: a host event with a stream id (HTA takes it for GPU work) and a
    ProfilerStep on the device's timeline (HTA may cut its steps by it)."""
    if has_stream and category not in SYNC_CATEGORIES and category not in GPU_ANNOTATION_CATEGORIES:
        out.host_streams += 1
    elif category in GPU_ANNOTATION_CATEGORIES and STEP_PATTERN.fullmatch(name) is not None:
        out.gpu_steps += 1


def _read_fast(data: _FastTrace, path: Path) -> TraceEvents:
    """`read_events` of a well-formed trace: the same filing as `_read_plain`, on typed events."""
    props = data.deviceProperties
    names = [str(p.get("name")) for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    out = TraceEvents(path=path, rank=_rank({"distributedInfo": data.distributedInfo}, path), device_names=names)
    host = _HostFiler(out)
    launches: dict[Any, tuple[float, float]] = {}
    device_raw: list[tuple[_FastEvent, str, float, float]] = []
    lower: dict[str, str] = {}
    origin: float | None = None
    for event in data.traceEvents:
        if event.ph != "X":
            continue
        out.complete += 1
        start, dur = event.ts, event.dur
        if start is None or not _usable(start, dur):
            _drop({"name": event.name, "ts": start, "dur": dur}, out)
            continue
        if origin is None:
            origin = out.origin_us = math.floor(start)
        start = start - origin
        category = lower.get(event.cat) or lower.setdefault(event.cat, event.cat.lower())
        if category not in DEVICE_CATEGORIES:
            _note_host_event(out, category, event.name, event.args is not None and event.args.stream is not None)
        if category in DEVICE_CATEGORIES:
            device_raw.append((event, category, start, start + dur))
        elif category in RUNTIME_CATEGORIES:
            _record_launch(launches, (event.args or _NO_ARGS).correlation, start, dur)
        elif category in SYNC_CATEGORIES:
            out.syncs += 1
        elif category in HOST_CATEGORIES:
            args = event.args
            host.file_op(
                event.name, category, event.pid, event.tid, args is not None and args.collective, start, start + dur
            )
    out.steps.sort(key=lambda s: s.start)
    out.device = [_fast_device(*raw, launches) for raw in device_raw]
    # every event has ph and name here: what the refusal needs of the rest is their ph, when none was complete
    shapes = [{"ph": e.ph, "name": e.name} for e in (data.traceEvents if not out.complete else data.traceEvents[:1])]
    _refuse_what_is_no_trace(shapes, out)
    return out


_NO_ARGS = _FastArgs()


def _fast_device(
    event: _FastEvent, category: str, start: float, end: float, launches: dict[Any, tuple[float, float]]
) -> DeviceEvent:
    """A typed device event, with the runtime call that launched it where the trace has that."""
    args = event.args or _NO_ARGS
    launch = launches.get(args.correlation)
    device = args.device if args.device is not None else (event.pid if event.pid is not None else "?")
    return DeviceEvent(
        start=start,
        end=end,
        device=str(device),
        stream=str(event.tid if args.stream is None else args.stream),
        category=DEVICE_CATEGORIES[category],
        name=event.name,
        launch=None if launch is None else launch[0],
        launch_dur=0.0 if launch is None else launch[1],
        collective_args=args.collective,
    )


def _read_plain(data: dict[str, Any], path: Path) -> TraceEvents:
    """`read_events` of a trace read as plain JSON objects."""
    props = data.get("deviceProperties")
    names = [str(p.get("name")) for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    out = TraceEvents(path=path, rank=_rank(data, path), device_names=names)
    host = _HostFiler(out)
    launches: dict[Any, tuple[float, float]] = {}
    device_raw: list[tuple[dict[str, Any], str, float, float]] = []
    lower: dict[str | int | None, str] = {}
    for event in data["traceEvents"]:
        times = _times(event, out)
        if times is None:
            continue
        raw = _id(event.get("cat", ""))
        category = lower.get(raw) or lower.setdefault(raw, str(raw).lower())
        if category not in DEVICE_CATEGORIES:
            _note_host_event(out, category, str(event.get("name", "")), "stream" in _args(event))
        if category in DEVICE_CATEGORIES:
            device_raw.append((event, category, *times))
        elif category in RUNTIME_CATEGORIES:
            _record_launch(launches, _id(_args(event).get("correlation")), times[0], times[1] - times[0])
        elif category in SYNC_CATEGORIES:
            out.syncs += 1
        elif category in HOST_CATEGORIES:
            host.file(event, category, times)
    out.steps.sort(key=lambda s: s.start)
    for event, category, start, end in device_raw:
        args = _args(event)
        launch = launches.get(_id(args.get("correlation")))
        out.device.append(
            DeviceEvent(
                start=start,
                end=end,
                device=str(args.get("device", event.get("pid", "?"))),
                stream=str(args.get("stream", event.get("tid"))),
                category=DEVICE_CATEGORIES[category],
                name=str(event.get("name", "")),
                launch=None if launch is None else launch[0],
                launch_dur=0.0 if launch is None else launch[1],
                collective_args=any(key in args for key in COLLECTIVE_ARGS),
            )
        )
    _refuse_what_is_no_trace(data["traceEvents"], out)
    return out


TRACE_EVENT_FIELDS = ("ph", "name")  # what every event of the trace-event format carries


def _refuse_what_is_no_trace(events: list[Any], out: TraceEvents) -> None:
    """A UserError when the events are no trace's: none has an event's fields, or every timed one is no time."""
    path = out.path
    if not any(isinstance(e, dict) and all(k in e for k in TRACE_EVENT_FIELDS) for e in events):
        what = "an empty traceEvents list" if not events else f"{len(events)} traceEvents without ph and name"
        raise UserError(
            f"trace {path} is not a torch.profiler trace: {what}; expected the .json or .json.gz that "
            "torch.profiler exports (events with ph, name, ts and dur)"
        )
    if not out.complete:  # metadata, instants, counters only: nothing ran while it recorded
        kinds = sorted({str(e.get("ph"))[:8] for e in events if isinstance(e, dict) and "ph" in e})
        raise UserError(
            f"trace {path} holds no complete events (ph 'X': ops, kernels, steps), only ph {', '.join(kinds)}: "
            "nothing was recorded to summarise; profile a step that runs (torch.profiler's schedule active)"
        )
    if out.complete and out.dropped.total == out.complete:
        raise UserError(
            f"trace {path} has no usable times: every one of its {out.complete} complete events was left out: "
            f"{out.dropped.describe()}; accepted: ts and dur as numbers of µs, dur not negative"
        )
