"""From a run's verdicts to candidate trainer knob changes, each with the verdict that proposes it.

Read from the result records of the runs `fleetbench tune` is given (no torch):
  train     the base configuration (record.config, the `train` section), its knobs, the device, its
            memory peak and cap, the training thread's CPU time (`summary.cpu_time`)
  profile   the roofline classes of the top ops (`summary.top_ops`), the trace's device breakdown
  ncu       the classes and fixes of the top kernels (`summary.ncu.top_kernels`)

The rules (each candidate names the verdict behind it in `why`):
  compile                 eager run: fusion against memory- and latency-bound ops (the profile's or ncu's
                          classes where present, else the eager run itself)
  reshard_after_forward   FSDP over several ranks that reshard after forward: keep the parameters gathered
                          for backward, one all-gather less per block
  ac_policy               with full activation checkpointing: op-level selective (less recomputation);
                          without it, when the memory peak is near the cap: op-level selective to fit
  batch / accumulation    latency-bound kernels or ops (too little work per launch): twice the batch where the
                          memory peak leaves room, else two accumulated micro-batches
  float8                  compute-bound GEMMs on a GPU whose GPU-table entry has FP8: torchao tensorwise
  threads (CPU only)      the training thread waits for a CPU a large share of the time: fewer threads; else
                          every usable core over the ranks
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from fleetbench.gpus import datasheet_peak
from fleetbench.results.record import ResultRecord

TOKENS_METRIC = "fleetbench_train_device_tokens_per_second"
# The share of the step the training thread waits runnable for a CPU above which it has too many threads.
WAITING_SHARE = 0.20
# The memory peak over the cap (or the device's memory) above which a larger batch is not proposed.
MEMORY_ROOM = 0.5
MEMORY_TIGHT = 0.85


@dataclass(frozen=True)
class Candidate:
    """One knob change: a short name, the `train.*` overrides, and the verdict that proposes it."""

    name: str
    overrides: tuple[str, ...]
    why: str


@dataclass
class Verdicts:
    """What the given runs say, as the candidate rules read it."""

    train: dict[str, Any]  # the base run's `train` section
    backend: str
    device: str
    world: int
    memory_peak_bytes: float | None = None
    memory_cap_bytes: float | None = None
    waiting_share: float | None = None
    classes: dict[str, float] = field(default_factory=dict)  # class -> time share over the profiled ops/kernels
    compute_gemm: bool = False  # a compute-bound GEMM (matmul op, tensor-core kernel) among the top
    sources: list[str] = field(default_factory=list)  # which records the verdicts come from


def _headline(record: ResultRecord, metric: str) -> float | None:
    return next((float(h.value) for h in record.headline if h.metric == metric and h.value is not None), None)


def _add_classes(verdicts: Verdicts, rows: list[dict[str, Any]], time_key: str, cls_key: str) -> None:
    total = sum(float(r.get(time_key) or 0.0) for r in rows)
    for row in rows:
        cls, time_s = row.get(cls_key), float(row.get(time_key) or 0.0)
        if isinstance(cls, str) and total > 0:
            verdicts.classes[cls] = verdicts.classes.get(cls, 0.0) + time_s / total
        name = str(row.get("name") or "").lower()
        gemm = any(word in name for word in ("mm", "gemm", "linear", "matmul"))
        if cls == "compute_bound" and gemm:
            verdicts.compute_gemm = True


def read_verdicts(records: list[ResultRecord]) -> Verdicts:
    """The verdicts of a train run's records and of any profile or ncu records given with it (rank 0 each)."""
    train = [r for r in records if r.benchmark == "train" and r.rank == 0 and r.status == "ok"]
    if not train:
        raise ValueError("no finished train run among the records")
    base = train[0]
    knobs = base.summary.get("knobs") or {}
    cpu = base.summary.get("cpu_time") or {}
    verdicts = Verdicts(
        train=dict(base.config),
        backend=base.backend,
        device=base.device,
        world=int(base.summary.get("world_size") or base.summary.get("ranks") or 1),
        memory_peak_bytes=_headline(base, "fleetbench_memory_peak_allocated_bytes")
        or _headline(base, "fleetbench_process_peak_rss_bytes"),
        waiting_share=cpu.get("waiting_for_cpu_share") if isinstance(cpu, dict) else None,
        sources=[f"train {base.run_id}"],
    )
    plan = base.summary.get("plan") or {}
    if isinstance(plan, dict):  # the values the preset filled in, where the config left them unset
        for key in ("batch_size", "grad_accum_steps"):
            if verdicts.train.get(key) is None and plan.get(key) is not None:
                verdicts.train[key] = plan[key]
    cap = base.config.get("max_memory_gb")
    verdicts.memory_cap_bytes = float(cap) * 2**30 if cap else None
    if isinstance(knobs, dict) and knobs.get("compile") is not None:
        verdicts.train.setdefault("compile", knobs["compile"])
    for record in records:
        if record.rank != 0 or record.status != "ok":
            continue
        if record.benchmark == "profile" and isinstance(record.summary.get("top_ops"), list):
            _add_classes(verdicts, record.summary["top_ops"], "self_time_s", "class")
            verdicts.sources.append(f"profile {record.run_id}")
        ncu = record.summary.get("ncu")
        if isinstance(ncu, dict) and isinstance(ncu.get("top_kernels"), list):
            _add_classes(verdicts, ncu["top_kernels"], "duration_s", "cls")
            verdicts.sources.append(f"ncu {record.run_id}")
    return verdicts


def _share(verdicts: Verdicts, *classes: str) -> float:
    return sum(verdicts.classes.get(c, 0.0) for c in classes)


def _memory_use(verdicts: Verdicts) -> float | None:
    if verdicts.memory_peak_bytes is None or not verdicts.memory_cap_bytes:
        return None
    return verdicts.memory_peak_bytes / verdicts.memory_cap_bytes


def candidates(verdicts: Verdicts, usable_cores: int | None = None) -> list[Candidate]:
    """The knob changes the verdicts propose, in the order of the module docstring."""
    cfg, found = verdicts.train, []
    fused = _share(verdicts, "memory_bound", "latency_bound", "cache_resident")
    if not cfg.get("compile"):
        why = (
            f"{fused:.0%} of the profiled time is memory- or latency-bound: fusion cuts it"
            if verdicts.classes
            else "the run ran eager: torch.compile fuses its elementwise ops and cuts launches"
        )
        found.append(Candidate("compile", ("train.compile=true",), why))
    if cfg.get("fsdp", True) and verdicts.world > 1 and cfg.get("reshard_after_forward", True):
        found.append(
            Candidate(
                "no-reshard",
                ("train.reshard_after_forward=false",),
                f"FSDP2 over {verdicts.world} ranks reshards after forward: keeping the parameters gathered for "
                "backward saves one all-gather per block, for their memory",
            )
        )
    use = _memory_use(verdicts)
    if cfg.get("activation_checkpointing") and cfg.get("ac_policy", "full") == "full":
        found.append(
            Candidate(
                "selective-ac",
                ("train.ac_policy=selective_op",),
                "full activation checkpointing recomputes every block: op-level selective keeps the matmul outputs",
            )
        )
    elif not cfg.get("activation_checkpointing") and use is not None and use > MEMORY_TIGHT:
        found.append(
            Candidate(
                "selective-ac",
                ("train.activation_checkpointing=true", "train.ac_policy=selective_op"),
                f"the memory peak is {use:.0%} of the cap: op-level selective checkpointing frees activations",
            )
        )
    found.append(_batch_candidate(verdicts, use))
    sheet = datasheet_peak(verdicts.device) if verdicts.backend == "cuda" else None
    if sheet is not None and sheet.has_fp8 and cfg.get("float8", "off") == "off" and verdicts.compute_gemm:
        found.append(
            Candidate(
                "float8",
                ("train.float8=tensorwise",),
                f"compute-bound GEMMs on the {sheet.model}, which has FP8 tensor cores: torchao tensorwise float8",
            )
        )
    if verdicts.backend == "cpu":
        threads = _threads_candidate(verdicts, usable_cores or len(os.sched_getaffinity(0)))
        if threads is not None:
            found.append(threads)
    return found


def _batch_candidate(verdicts: Verdicts, use: float | None) -> Candidate:
    cfg = verdicts.train
    latency = _share(verdicts, "latency_bound")
    why = (
        f"{latency:.0%} of the profiled time is latency-bound: more work per launch"
        if latency
        else "more tokens per step amortise the per-step overhead (optimiser, launches, collectives)"
    )
    batch = cfg.get("batch_size")
    if batch and (use is None or use < MEMORY_ROOM) and not cfg.get("global_batch_size"):
        room = f" (memory peak {use:.0%} of the cap)" if use is not None else ""
        return Candidate("batch-x2", (f"train.batch_size={int(batch) * 2}",), why + room)
    accum = int(cfg.get("grad_accum_steps") or 1)
    return Candidate("accumulate-x2", (f"train.grad_accum_steps={accum * 2}",), why + ", in accumulated micro-batches")


def _threads_candidate(verdicts: Verdicts, cores: int) -> Candidate | None:
    ranks = max(1, verdicts.world)
    current = verdicts.train.get("threads")
    if verdicts.waiting_share is not None and verdicts.waiting_share > WAITING_SHARE:
        fewer = max(1, (current or max(1, cores // ranks)) // 2)
        if fewer == current:
            return None  # one thread already: nothing fewer to try
        return Candidate(
            "fewer-threads",
            (f"train.threads={fewer}",),
            f"the training thread waits for a CPU {verdicts.waiting_share:.0%} of the step: fewer threads per rank",
        )
    every = max(1, cores // ranks)
    if current is not None and current != every:
        return Candidate("threads", (f"train.threads={every}",), f"{cores} usable cores over {ranks} rank(s)")
    if current is None and every > 1:
        return Candidate(
            "one-thread",
            ("train.threads=1",),
            f"{ranks} rank(s) on {cores} cores: one thread per rank trades intra-op parallelism for less contention",
        )
    return None
