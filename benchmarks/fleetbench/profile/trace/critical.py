"""The critical path of one step: the chain of CPU ops, launches and kernels that sets its length.

The graph is Holistic Trace Analysis' (hta/analyzers/critical_path_analysis.py, `CPGraph`), built
here on typed events in one pass instead of data frames:
- every CPU op, runtime call and linked device event (kernel, memcpy, memset) is two nodes, its
  start and its end; the nesting of each CPU thread links them: parent start -> child start ->
  child end -> parent end, each edge weighing the time between its nodes; consecutive top-level
  ops are joined by 0-weight dependency edges (host gaps between them are never on the path);
- a blocking call (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
  cudaEventQuery, cudaMemcpy, cudaMemcpyAsync) weighs 0 up to its end: its wait is the GPU work
  it waited for, joined to its end by a 0-weight sync edge (Context Sync: every stream's last
  kernel; Stream Sync: its stream's; Event Sync: the kernel the recorded event follows);
- a device event weighs its duration; it is reached either from its launch (launch-delay edge,
  launch start -> kernel start) when its stream's queue was empty (HTA's queue length: 1 at the
  launch, 0 at the start) and the stream's previous kernel ended before the launch, or else from the
  previous kernel on its stream (kernel-kernel gap edge); a cudaStreamWaitEvent adds a 0-weight edge
  from the kernel the event follows to the next kernel launched on the waiting stream.
The critical path is the longest path of this DAG (its length: the sum of its edge weights).

The step: host events that start within `ProfilerStep#K` (and last longer than 0), device events
whose launch does. A trace without ProfilerSteps is taken whole. Kernels are linked to their launch
by correlation id, the link the trace's `ac2g` flow events draw; a trace without such links has no
critical path to find.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.profile.names import label, short_name
from fleetbench.profile.trace.comm import CommRules
from fleetbench.profile.trace.load import (
    CPU_OP_CATEGORIES,
    DEVICE_CATEGORIES,
    RUNTIME_CATEGORIES,
    STEP_PATTERN,
    SYNC_CATEGORIES,
    US,
    _rank,
    _read_bytes,
    _usable,
    find_traces,
    load_trace,
)

BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
# The runtime calls HTA's queue length counts as launches (hta/common/trace_symbol_table.py).
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemsetAsync",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
    }
)
# What each edge's time is spent on; `sync` and `dependency` edges weigh 0.
KINDS = ("cpu_op", "runtime", "launch_delay", "kernel", "communication", "memory", "kernel_gap", "sync")
KIND_WORDS = {
    "cpu_op": "CPU op",
    "runtime": "CUDA runtime call",
    "launch_delay": "kernel launch delay",
    "kernel": "GPU kernel (compute)",
    "communication": "GPU kernel (communication)",
    "memory": "memcpy / memset",
    "kernel_gap": "gap between kernels on a stream",
    "sync": "host waits on the GPU (0: the path runs through the work waited for)",
}
# HTA's `bound_by` classes of the same edges (its summary), for the comparison
HTA_CLASS = {
    "cpu_op": "cpu_bound",
    "runtime": "cpu_bound",
    "launch_delay": "gpu_kernel_launch_overhead",
    "kernel": "gpu_compute_bound",
    "memory": "gpu_compute_bound",
    "communication": "gpu_communication_bound",
    "kernel_gap": "gpu_kernel_kernel_overhead",
}
OPERATOR, DEPENDENCY, LAUNCH, GAP, SYNC = range(5)
NO_STREAM = -1
UNSET_STREAM = 4294967295  # what CUPTI writes as the stream of a Context Sync


class _Args(msgspec.Struct):
    correlation: int | str | None = None
    stream: int | str | None = None
    wait_on_stream: int | None = None
    wait_on_cuda_event_record_corr_id: int | None = None


class _Event(msgspec.Struct):
    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: int | float | None = None
    dur: int | float = 0
    pid: int | str | None = None
    tid: int | str | None = None
    args: _Args | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]
    distributedInfo: Any = None


class _RankOnly(msgspec.Struct):
    distributedInfo: Any = None


_DECODER = msgspec.json.Decoder(_Trace)
_RANK_DECODER = msgspec.json.Decoder(_RankOnly)


@dataclass(slots=True)
class _Ev:
    """One complete event, times relative to the trace's origin (µs)."""

    ts: float
    end: float
    kind: str  # cpu_op, runtime, device, sync, other (annotations and the rest of the host's events)
    category: str  # for device events: kernel, memcpy or memset
    name: str
    thread: tuple[str, str]
    correlation: int | str | None
    stream: int | str | None
    wait_stream: int | None = None
    wait_record: int | None = None


@dataclass
class PathEdge:
    """One edge of the critical path: what it is spent on, the event it belongs to, its time."""

    kind: str  # one of KINDS, or dependency
    name: str  # the event the time is attributed to ("" for 0-weight links)
    start_s: float  # from the step's start
    end_s: float
    duration_s: float
    lane: str  # the CPU thread or GPU stream it lies on


@dataclass
class PathEntry:
    """Time of the path spent in one op or kernel name."""

    kind: str
    name: str
    short: str
    edges: int
    time_s: float
    share: float


@dataclass
class CriticalPath:
    """The critical path of one step of one rank's trace."""

    path: str
    rank: int
    step: str  # ProfilerStep#K, or "whole trace"
    span_s: float  # the step's host span
    length_s: float
    by_kind: dict[str, float]
    edges_by_kind: dict[str, int]
    top: list[PathEntry]
    edges: list[PathEdge] = field(default_factory=list)
    comm: str = ""
    # every op, runtime call and device event of the step: (lane, start_s, end_s), for the chart only
    spans: list[tuple[str, float, float]] = field(default_factory=list, repr=False)

    @property
    def hta_classes(self) -> dict[str, float]:
        """The path's time in HTA's `bound_by` classes (seconds)."""
        out: dict[str, float] = defaultdict(float)
        for kind, value in self.by_kind.items():
            if kind in HTA_CLASS:
                out[HTA_CLASS[kind]] += value
        return dict(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with every edge of the path in time order."""
        raw = asdict(self)
        del raw["spans"]
        raw["hta_classes_s"] = self.hta_classes
        return raw

    def to_json(self) -> str:
        """Strict JSON text."""
        return jsonio.dumps(self.to_dict(), indent=1)


def _category(cat: str) -> str:
    cat = cat.lower()
    if cat in DEVICE_CATEGORIES:
        return "device"
    if cat in RUNTIME_CATEGORIES:
        return "runtime"
    if cat in CPU_OP_CATEGORIES:
        return "cpu_op"
    if cat in SYNC_CATEGORIES:
        return "sync"
    return "other"


def _events(raw: bytes, path: Path) -> tuple[int, list[_Ev]]:
    """The rank and the complete events of a trace's JSON text."""
    try:
        trace = _DECODER.decode(raw)
        info, events = trace.distributedInfo, trace.traceEvents
    except (msgspec.MsgspecError, ValueError):  # an odd shape: read as plain JSON, event by event
        data = load_trace(path)
        info, events = data.get("distributedInfo"), []
        for item in data["traceEvents"]:
            try:
                events.append(msgspec.convert(item, _Event, strict=False))
            except msgspec.MsgspecError:
                continue  # no event of the trace-event format: nothing the path can use
    rank = _rank({"distributedInfo": info} if info is not None else {}, path)
    out: list[_Ev] = []
    origin: float | None = None
    kinds: dict[str, str] = {}
    for e in events:
        start, dur = e.ts, e.dur
        if e.ph != "X" or start is None or not _usable(start, dur):
            continue
        if origin is None:
            origin = math.floor(start)
        start -= origin
        kind = kinds.get(e.cat) or kinds.setdefault(e.cat, _category(e.cat))
        args = e.args or _NO_ARGS
        stream = args.stream if kind in ("device", "sync") else None
        out.append(
            _Ev(
                start,
                start + dur,
                kind,
                DEVICE_CATEGORIES.get(e.cat.lower(), ""),
                e.name,
                (str(e.pid), str(e.tid)),
                args.correlation,
                stream,
                args.wait_on_stream,
                args.wait_on_cuda_event_record_corr_id,
            )
        )
    return rank, out


_NO_ARGS = _Args()


def trace_of_rank(paths: Sequence[Path], rank: int | None) -> Path:
    """The trace of `rank` among the files and folders `paths` name (the only one when rank is None)."""
    traces = find_traces(paths)
    if rank is None:
        if len(traces) > 1:
            raise UserError(f"{len(traces)} traces given ({traces[0].name}, ...); pick one with --rank N")
        return traces[0]
    ranks: dict[int, Path] = {}
    for trace in traces:
        try:
            info = _RANK_DECODER.decode(_read_bytes(trace)).distributedInfo
        except (msgspec.MsgspecError, ValueError):
            info = load_trace(trace).get("distributedInfo")
        found = _rank({"distributedInfo": info} if info is not None else {}, trace)
        if found == rank and rank in ranks:  # two unrelated jobs' traces: which one is meant is not ours to guess
            raise UserError(
                f"traces {ranks[rank]} and {trace} are both rank {rank}: pass the one meant, or a folder of one run"
            )
        ranks.setdefault(found, trace)
    if rank not in ranks:
        raise UserError(f"rank {rank} is not among the traces given; their ranks: {', '.join(map(str, sorted(ranks)))}")
    return ranks[rank]


class _Graph:
    """HTA's critical-path graph: node 2i is event i's start, 2i+1 its end."""

    def __init__(self, events: list[_Ev]) -> None:
        self.events = events
        self.src: list[int] = []
        self.dst: list[int] = []
        self.weight: list[float] = []
        self.type: list[int] = []
        self.owner: list[int] = []  # the event an edge's time belongs to; -1: none

    def time(self, node: int) -> float:
        e = self.events[node >> 1]
        return e.end if node & 1 else e.ts

    def add(self, src: int, dst: int, kind: int, owner: int = -1, zero: bool = False) -> None:
        weight = 0.0 if zero or kind in (DEPENDENCY, SYNC) else self.time(dst) - self.time(src)
        self.src.append(src)
        self.dst.append(dst)
        self.weight.append(max(weight, 0.0))  # HTA sets negative weights (child ends past parent) to 0
        self.type.append(kind)
        self.owner.append(owner)

    def longest(self) -> list[int]:
        """The edges of the longest path (networkx's dag_longest_path, with Kahn's order)."""
        count = 2 * len(self.events)
        out_edges: list[list[int]] = [[] for _ in range(count)]
        indegree = [0] * count
        for index, (u, v) in enumerate(zip(self.src, self.dst, strict=True)):
            out_edges[u].append(index)
            indegree[v] += 1
        dist = [0.0] * count
        best: list[int] = [-1] * count  # the edge into each node on its longest path
        ready = [n for n in range(count) if indegree[n] == 0]
        seen = 0
        while ready:
            u = ready.pop()
            seen += 1
            for index in out_edges[u]:
                v = self.dst[index]
                if best[v] < 0 or dist[u] + self.weight[index] > dist[v]:
                    dist[v] = dist[u] + self.weight[index]
                    best[v] = index
                indegree[v] -= 1
                if indegree[v] == 0:
                    ready.append(v)
        if seen < count:  # a cycle: times that contradict each other (HTA refuses the graph too)
            raise UserError("the trace's events form a cycle (times that contradict each other); no critical path")
        # of equally long ends, the latest: a path into a host's wait ends at the wait, not the kernel before it
        node = max(range(count), key=lambda n: (dist[n], self.time(n)))
        path: list[int] = []
        while best[node] >= 0:
            path.append(best[node])
            node = self.src[best[node]]
        path.reverse()
        return path


def _host_edges(graph: _Graph, host: list[int], has_node: set[int]) -> None:
    """Per CPU thread, HTA's call-stack walk: nesting edges, dependency edges between top-level ops."""
    events = graph.events
    threads: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in host:
        threads[events[i].thread].append(i)
    for members in threads.values():
        members.sort(key=lambda i: (events[i].ts, -(events[i].end - events[i].ts)))
        stack: list[int] = []  # open events (any host event: annotations nest too)
        state = _Walk()
        for i in members:
            while stack and events[stack[-1]].end <= events[i].ts:
                state.exit(graph, stack.pop(), stack, has_node)
            state.enter(graph, i, stack, has_node)
            stack.append(i)
        while stack:
            state.exit(graph, stack.pop(), stack, has_node)


@dataclass
class _Walk:
    """What HTA's depth-first walk of one thread's call stack keeps between events."""

    last: int = -1  # the last node linked
    last_top: int = -1  # the end node of the last top-level op
    depth: int = 0
    last_parent: int = -1  # the parent event of the last node's event

    def enter(self, graph: _Graph, i: int, stack: list[int], has_node: set[int]) -> None:
        if i not in has_node:
            return
        start = 2 * i
        if self.depth == 0 and self.last_top >= 0:
            graph.add(self.last_top, start, DEPENDENCY)
        self.depth += 1
        if self.last >= 0:
            graph.add(self.last, start, OPERATOR, self._owner(self.last, start))
        self.last = start
        self.last_parent = stack[-1] if stack else -1

    def exit(self, graph: _Graph, i: int, stack: list[int], has_node: set[int]) -> None:
        if i not in has_node:
            return
        end = 2 * i + 1
        self.depth -= 1
        if self.last >= 0:
            blocking = graph.events[i].name in BLOCKING_CALLS
            graph.add(self.last, end, OPERATOR, self._owner(self.last, end), zero=blocking)
        if self.depth == 0:
            self.last = -1
            self.last_top = end
        else:
            self.last = end
            self.last_parent = stack[-1] if stack else -1

    def _owner(self, src: int, dst: int) -> int:
        """HTA's attribution: start->x to src's event, x->end to dst's, end->start to src's parent."""
        if not src & 1:
            return src >> 1
        if dst & 1:
            return dst >> 1
        return self.last_parent


def _queue_lengths(events: list[_Ev], launch_of: dict[int, int]) -> tuple[dict[int, int], dict[int, int]]:
    """HTA's queue length per stream at each launch (after its +1) and each kernel start (after its -1),
    keyed by the device event; over the whole trace."""
    series: dict[Any, list[tuple[float, int, int]]] = defaultdict(list)
    for device, launch in launch_of.items():
        if events[launch].name in LAUNCH_CALLS:
            stream = events[device].stream
            series[stream].append((events[launch].ts, 0, device))
            series[stream].append((events[device].ts, 1, device))
    at_launch: dict[int, int] = {}
    at_start: dict[int, int] = {}
    for items in series.values():
        items.sort(key=lambda item: (item[0], item[1]))
        length = 0
        for _, is_start, device in items:
            length += -1 if is_start else 1
            (at_start if is_start else at_launch)[device] = length
    return at_launch, at_start


def _launches_by_stream(events: list[_Ev], launch_of: dict[int, int]) -> dict[Any, list[tuple[float, int]]]:
    """Per stream, (launch start, device event) of the events launched by HTA's launch calls, in time order."""
    launches_on: dict[Any, list[tuple[float, int]]] = defaultdict(list)
    for device, launch in launch_of.items():
        if events[launch].name in LAUNCH_CALLS:
            launches_on[events[device].stream].append((events[launch].ts, device))
    for items in launches_on.values():
        items.sort()
    return launches_on


def _event_syncs(
    events: list[_Ev], launch_of: dict[int, int], by_correlation: dict[Any, int]
) -> tuple[dict[Any, int], dict[int, int]]:
    """For cudaEventRecord calls, the device event each recorded event follows (keyed by the record's
    correlation id); for cudaStreamWaitEvent, the device event that must wait (keyed by the waiting
    device event, HTA's `kernel_sync`) -> the device event it waits for."""
    record_stream: dict[Any, Any] = {}  # record correlation -> the stream it was recorded on
    for e in events:
        if e.kind == "sync" and e.wait_stream is not None and e.wait_stream > -1 and e.wait_record is not None:
            record_stream.setdefault(e.wait_record, e.wait_stream)
    if not record_stream:
        return {}, {}
    launches_on = _launches_by_stream(events, launch_of)
    followed: dict[Any, int] = {}
    for e in events:
        if e.kind == "runtime" and e.name == "cudaEventRecord" and e.correlation in record_stream:
            launches = launches_on.get(record_stream[e.correlation], [])
            at = bisect.bisect_right(launches, (e.ts, math.inf))
            if at:
                followed[e.correlation] = launches[at - 1][1]
    return followed, _stream_waits(events, launch_of, by_correlation, followed, launches_on)


def _stream_waits(
    events: list[_Ev],
    launch_of: dict[int, int],
    by_correlation: dict[Any, int],
    followed: dict[Any, int],
    launches_on: dict[Any, list[tuple[float, int]]],
) -> dict[int, int]:
    """Each cudaStreamWaitEvent: the next launch on the waiting stream from the same thread -> the
    device event the recorded event follows."""
    waits: dict[int, int] = {}
    for e in events:
        if e.kind != "sync" or e.name != "Stream Wait Event" or e.wait_record not in followed:
            continue
        call = by_correlation.get(e.correlation)
        if call is None:
            continue
        caller = events[call]
        launches = launches_on.get(e.stream, [])
        at = bisect.bisect_left(launches, (caller.ts, -1))
        first = next((d for _, d in launches[at:] if events[launch_of[d]].thread == caller.thread), None)
        if first is not None:
            waits[first] = followed[e.wait_record]
    return waits


def _sync_edges(
    graph: _Graph, e: _Ev, call: int, followed: dict[Any, int], has_node: set[int], last: dict[Any, int]
) -> None:
    """A host wait: 0-weight edges from the device work it waited for to the end of its call."""
    if e.name == "Event Sync":
        src = followed.get(e.wait_record)
        if src is not None and src in has_node:
            graph.add(2 * src + 1, 2 * call + 1, SYNC)
    elif e.name == "Context Sync":
        for node in list(last.values()):
            graph.add(node, 2 * call + 1, SYNC)
    elif e.name == "Stream Sync" and e.stream in last:
        graph.add(last[e.stream], 2 * call + 1, SYNC)


def _device_edges(
    graph: _Graph,
    device: list[int],
    launch_of: dict[int, int],
    has_node: set[int],
    queues: tuple[dict[int, int], dict[int, int]],
    syncs: tuple[dict[Any, int], dict[int, int]],
) -> None:
    """Kernel spans, launch-delay or kernel-gap edges, and sync edges, in HTA's order of the events."""
    events = graph.events
    at_launch, at_start = queues
    followed, waits = syncs
    order = sorted(device, key=lambda i: events[i].end if events[i].kind == "sync" else events[i].ts)
    last: dict[Any, int] = {}  # stream -> end node of its last device event
    for i in order:
        e = events[i]
        call = launch_of.get(i)
        if e.kind == "sync":
            if call is not None and call in has_node:
                _sync_edges(graph, e, call, followed, has_node, last)
            continue
        start, end = 2 * i, 2 * i + 1
        graph.add(start, end, OPERATOR, i)
        prior = waits.get(i)
        if prior is not None and prior not in has_node:
            prior = None
        if prior is not None:
            graph.add(2 * prior + 1, start, SYNC)
        previous = last.get(e.stream)
        launch_ts = events[call].ts if call is not None else math.inf
        if (
            call is not None
            and at_launch.get(i) == 1
            and at_start.get(i) == 0
            and (previous is None or graph.time(previous) < launch_ts)
            and (prior is None or events[prior].end < launch_ts)
        ):
            graph.add(2 * call, start, LAUNCH)
        elif previous is not None and (prior is None or events[prior].end < graph.time(previous)):
            graph.add(previous, start, GAP, previous >> 1)
        last[e.stream] = end


def _step_window(events: list[_Ev], step: int | None, path: Path) -> tuple[str, float, float]:
    """The step's name and host span; the whole trace when it has no ProfilerSteps and none was asked."""
    steps: dict[int, tuple[str, float, float]] = {}
    for e in events:
        match = STEP_PATTERN.fullmatch(e.name) if e.kind == "other" else None
        if match is not None:
            steps.setdefault(int(match.group(1)), (e.name, e.ts, e.end))
    if step is None and not steps:
        return "whole trace", min(e.ts for e in events), max(e.end for e in events)
    if step is None:
        step = min(steps, key=lambda k: steps[k][1])
    if step not in steps:
        known = ", ".join(str(k) for k in sorted(steps)) or "none"
        raise UserError(f"step {step} (ProfilerStep#{step}) is not in trace {path}; its steps: {known}")
    return steps[step]


def critical_path(path: Path, step: int | None = None, rules: CommRules | None = None) -> CriticalPath:
    """The critical path of `step` (ProfilerStep#step; default: the first) of one trace.

    Raises UserError when the trace cannot be read, has no such step, or links no kernel to its launch.
    """
    rules = rules or CommRules()
    rank, events = _events(_read_bytes(path), path)
    if not events:
        raise UserError(f"trace {path} holds no complete events (ph 'X'); expected a PyTorch profiler trace")
    by_correlation: dict[Any, int] = {}
    for i, e in enumerate(events):
        if e.kind == "runtime" and e.correlation is not None:
            by_correlation.setdefault(e.correlation, i)
    launch_of = {
        i: by_correlation[e.correlation]
        for i, e in enumerate(events)
        if e.kind in ("device", "sync") and e.correlation in by_correlation
    }
    if not any(events[i].kind == "device" for i in launch_of):
        raise UserError(
            f"trace {path} links no kernel to its launch (no ac2g flow events, no correlation ids shared by a "
            "runtime call and a kernel): a critical path needs them; record with CUDA activities on"
        )
    name, start, stop = _step_window(events, step, path)
    host = [i for i, e in enumerate(events) if e.kind in ("cpu_op", "runtime", "other") and start <= e.ts <= stop]
    host = [i for i in host if events[i].end > events[i].ts]
    device = [
        i for i, call in launch_of.items() if start <= events[call].ts <= stop and events[call].end > events[call].ts
    ]
    has_node = {i for i in host if events[i].kind != "other"} | {i for i in device}
    graph = _Graph(events)
    _host_edges(graph, host, has_node)
    linked = {i: c for i, c in launch_of.items() if events[i].kind == "device"}
    _device_edges(
        graph,
        device,
        launch_of,
        has_node,
        _queue_lengths(events, linked),
        _event_syncs(events, linked, by_correlation),
    )
    result = _summarise(_lanes(graph, graph.longest()), path, rank, name, (start, stop), rules)
    result.spans = [(_lane(events[i]), (events[i].ts - start) * US, (events[i].end - start) * US) for i in has_node]
    return result


def _lane(e: _Ev) -> str:
    return f"stream {e.stream}" if e.kind in ("device", "sync") else f"thread {e.thread[1]}"


def _lanes(graph: _Graph, path: list[int]) -> list[PathEdge]:
    """The path's edges as records, times in µs from the trace origin for now."""
    out = []
    for index in path:
        kind_code, owner = graph.type[index], graph.owner[index]
        src, dst = graph.src[index], graph.dst[index]
        lane_event = graph.events[dst >> 1] if kind_code != GAP else graph.events[src >> 1]
        lane = _lane(lane_event)
        name = graph.events[owner].name if owner >= 0 else (graph.events[dst >> 1].name if kind_code == LAUNCH else "")
        out.append(
            PathEdge(
                _edge_kind(graph, index),
                name,
                graph.time(src),
                graph.time(dst),
                graph.weight[index],
                lane,
            )
        )
    return out


def _edge_kind(graph: _Graph, index: int) -> str:
    code = graph.type[index]
    if code == LAUNCH:
        return "launch_delay"
    if code == GAP:
        return "kernel_gap"
    if code == SYNC:
        return "sync"
    if code == DEPENDENCY:
        return "dependency"
    owner = graph.owner[index]
    if owner < 0:
        return "cpu_op"
    e = graph.events[owner]
    if e.kind == "runtime":
        return "runtime"
    if e.kind == "device":
        return "memory" if e.category != "kernel" else "kernel"
    return "cpu_op"


def _summarise(
    edges: list[PathEdge], path: Path, rank: int, step: str, window: tuple[float, float], rules: CommRules
) -> CriticalPath:
    """Times in seconds from the step's start; the path's time by kind and by name."""
    by_kind = dict.fromkeys(KINDS, 0.0)
    counts = dict.fromkeys(KINDS, 0)
    names: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    origin = window[0]
    for edge in edges:
        if edge.kind == "kernel" and rules.kernel_rule(edge.name) is not None:
            edge.kind = "communication"
        edge.start_s, edge.end_s = (edge.start_s - origin) * US, (edge.end_s - origin) * US
        edge.duration_s *= US
        if edge.kind == "dependency":
            continue
        by_kind[edge.kind] += edge.duration_s
        counts[edge.kind] += 1
        if edge.duration_s > 0:
            tally = names[(edge.kind, edge.name)]
            tally[0] += 1
            tally[1] += edge.duration_s
    length = sum(by_kind.values())
    top = [
        PathEntry(kind, name, short_name(name), int(n), t, t / length if length else 0.0)
        for (kind, name), (n, t) in sorted(names.items(), key=lambda item: -item[1][1])
    ]
    shorts: dict[str, set[str]] = defaultdict(set)
    for row in top:
        shorts[row.short].add(row.name)
    for row in top:
        if len(shorts[row.short]) > 1:
            row.short = label(row.name)
    return CriticalPath(
        path=str(path),
        rank=rank,
        step=step,
        span_s=(window[1] - window[0]) * US,
        length_s=length,
        by_kind=by_kind,
        edges_by_kind=counts,
        top=top,
        edges=edges,
        comm=rules.description,
    )
