"""The trainer: one process per rank, FSDP2 over the device mesh, metrics every `log_every` steps.

Step N: batch (data time) -> forward, cross-entropy -> backward -> grad norm (clip) -> AdamW. At a
log step rank 0 shows the row, every rank records its metrics through BenchmarkRun (pushed in the
background), and rank 0 appends the row to the run's step history. Checkpoints are written every
`checkpoint_every` steps; a restarted or `--resume`d run continues from the newest. With
`profile_steps` every rank traces those steps with torch.profiler (`train/profiling.py`), and the
steps the profiler slows are left out of the run's tokens/s, MFU and step-time samples.
"""

from __future__ import annotations

import functools
import logging
import math
import signal
import statistics
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.config.train import TrainConfig
from fleetbench.devices import DeviceInfo
from fleetbench.errors import UserError
from fleetbench.job import JobResult, Progress, RunContext
from fleetbench.telemetry.recorder import MetricRecorder
from fleetbench.telemetry.session import BenchmarkRun, open_run
from fleetbench.train import energy, step_rows
from fleetbench.train.checkpoint import Checkpointer, resume_run_id
from fleetbench.train.data import TokenBatches
from fleetbench.train.decoder import TrainModel, param_counts
from fleetbench.train.float8 import float8_linears
from fleetbench.train.flops import (
    Peak,
    cpu_peak_file,
    flops_per_token,
    measured_cpu_peak,
    mfu,
    resolve_peak,
    store_cpu_peak,
    stored_cpu_peak,
)
from fleetbench.train.handoff import report_run_id
from fleetbench.train.history import HISTORY_FILE, HistoryWriter, StepRow, read_history
from fleetbench.train.knobs import BuildMeter, StepProbe, compile_report, probe_step
from fleetbench.train.memory import (
    MemoryKnobs,
    MemorySnapshot,
    apply_memory_cap,
    check_fits,
    out_of_memory_as,
    out_of_memory_message,
    snapshot,
)
from fleetbench.train.parallel import (
    DistEnv,
    agree,
    broadcast_object,
    build_mesh,
    build_model,
    build_optimizer,
    compute_dtype,
    init_process_group,
    pick_device,
    threads_per_rank,
    watch_dtypes,
)
from fleetbench.train.plan import TrainPlan, check_launch, check_profile_device, resolve_plan
from fleetbench.train.plots import plot_history
from fleetbench.train.profiling import CpuTimes, ProfileWindow, StepProfiler, sched_sample

BENCHMARK = "train"

log = logging.getLogger(__name__)


class Terminated(Exception):
    """SIGTERM arrived: torchrun stops the surviving ranks this way when another rank failed."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated("terminated by SIGTERM (torchrun stops every rank when one fails)")


@dataclass
class Interval:
    """Accumulates the steps between two log rows."""

    steps: int = 0
    wall_s: float = 0.0
    data_s: float = 0.0
    step_times_s: list[float] = field(default_factory=list)  # of the steps not excluded
    excluded_steps: int = 0  # steps the profiler slowed: in the row, not in the run's throughput
    excluded_wall_s: float = 0.0
    cpu: CpuTimes = field(default_factory=CpuTimes)  # of the steps not excluded

    def add(self, wall_s: float, data_s: float, excluded: bool = False, cpu: CpuTimes | None = None) -> None:
        """Count one step that took `wall_s`, `data_s` of it producing the batch; `excluded`: profiled or
        probed; `cpu`: the step's time as the scheduler saw it."""
        self.steps += 1
        self.wall_s += wall_s
        self.data_s += data_s
        if excluded:
            self.excluded_steps += 1
            self.excluded_wall_s += wall_s
        else:
            self.step_times_s.append(wall_s)
            if cpu is not None:
                self.cpu.add(cpu)


@dataclass
class Totals:
    """The whole run's step counts and times, what telemetry, the progress display and checkpoints cost, and its rows."""

    steps: int = 0
    wall_s: float = 0.0
    steady_steps: int = 0  # logged intervals after the first (warm-up) one, less the profiled steps
    steady_wall_s: float = 0.0
    steady_step_times_s: list[float] = field(default_factory=list)  # the samples behind the headline
    excluded_steps: int = 0  # steps the profiler slowed (warm-up and recorded)
    steady_cpu: CpuTimes = field(default_factory=CpuTimes)  # the steady steps' time, as the scheduler saw it
    telemetry_s: float = 0.0
    display_s: float = 0.0
    checkpoint_s: float = 0.0
    checkpoints: int = 0
    rows: list[StepRow] = field(default_factory=list)

    def close_interval(self, interval: Interval, row: StepRow, logging_s: float) -> None:
        """Add a logged interval and its row; every interval but the first (the warm-up step's) is steady,
        and of a steady interval the steps the profiler slowed are left out."""
        self.rows.append(row)
        if self.steps:
            self.steady_steps += interval.steps - interval.excluded_steps
            self.steady_wall_s += interval.wall_s - interval.excluded_wall_s
            self.steady_step_times_s += interval.step_times_s
            self.steady_cpu.add(interval.cpu)
        self.excluded_steps += interval.excluded_steps
        self.steps += interval.steps
        self.wall_s += interval.wall_s + logging_s


@dataclass(frozen=True)
class RankSetup:
    """Where and how this rank runs: its torchrun environment, device, collective backend and CPU threads."""

    env: DistEnv
    device: DeviceInfo
    comm_backend: str
    threads: int


@dataclass(frozen=True)
class Parts:
    """What a rank trains with: the (sharded) model, its optimizer, the batches and the checkpointer."""

    model: TrainModel
    optimizer: torch.optim.Optimizer
    data: TokenBatches
    checkpointer: Checkpointer


def describe_mesh(mesh: Any) -> str:
    """The device mesh as the first log line shows it: (2, 2) replicate x shard, or - without FSDP."""
    if mesh is None:
        return "-"
    return f"{tuple(mesh.shape)} {' x '.join(mesh.mesh_dim_names or ())}".rstrip()


def lr_at(plan: TrainPlan, step: int) -> float:
    """Linear warm-up over `warmup_steps`, then the plan's learning rate: constant, or a cosine from lr down to
    lr_min_ratio x lr at the last step (torchtitan's warmup + cosine)."""
    if plan.warmup_steps and step < plan.warmup_steps:
        return plan.lr * (step + 1) / plan.warmup_steps
    if plan.lr_schedule == "cosine":
        decay_steps = max(1, plan.steps - plan.warmup_steps - 1)
        progress = min(1.0, (step - plan.warmup_steps) / decay_steps)
        floor = plan.lr * plan.lr_min_ratio
        return floor + (plan.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return plan.lr


def mean_across_ranks(value: torch.Tensor) -> float:
    """The mean of a scalar over every rank (a collective: every rank must call it)."""
    reduced = value.detach().float().clone()
    dist.all_reduce(reduced)
    return float(reduced) / dist.get_world_size()


def grad_norm(model: TrainModel, clip: float | None) -> torch.Tensor:
    """The global gradient norm, after clipping to `clip` when one is set (full tensor under FSDP)."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, clip if clip is not None else float("inf"), foreach=True)
    full = getattr(norm, "full_tensor", None)
    return full() if full is not None else norm


def agreed_cpu_peak(dtype_name: str, threads: int, stored_at: Path, local_rank: int) -> Peak:
    """The CPU peak every rank divides by, so that MFU does not differ by rank (a collective call).

    Where every rank's machine has one stored, the best stored one. Where any has none, every rank
    measures at once (sharing the cores as they will train), all take the best, and each machine
    keeps it for later runs. Deciding together matters: ranks on two machines, one with a stored
    peak and one without, would otherwise wait on different collectives for ever.
    """
    stored = stored_cpu_peak(stored_at, dtype_name, threads)
    found = torch.tensor(
        [1.0 if stored is None else 0.0, 0.0 if stored is None else stored.flop_per_second], dtype=torch.float64
    )
    dist.all_reduce(found, op=dist.ReduceOp.MAX)  # [any rank without one, the best stored]
    if stored is not None and float(found[0]) == 0.0:
        return Peak(float(found[1]), stored.source)
    measured = measured_cpu_peak(dtype_name, threads)
    best = torch.tensor([measured.flop_per_second], dtype=torch.float64)
    dist.all_reduce(best, op=dist.ReduceOp.MAX)
    peak = Peak(float(best), measured.source + f", best of {dist.get_world_size()} rank(s)")
    if local_rank == 0:  # one writer per machine: later runs there divide by the same peak
        store_cpu_peak(stored_at, dtype_name, threads, peak)
    return peak


class Trainer:
    """One rank's training run: builds the model, resumes, steps, records, checkpoints and summarises."""

    def __init__(self, config: FleetbenchConfig, plan: TrainPlan, setup: RankSetup, progress: Progress) -> None:
        self.cfg: TrainConfig = config.train
        self.plan = plan
        self.env = setup.env
        self.device = setup.device
        self.comm_backend = setup.comm_backend
        self.threads = setup.threads
        self.progress = progress
        self.closing: list[str] = []  # what rank 0 shows once the run is over
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.precision = plan.precision
        self.dtype = compute_dtype(plan)
        self.knobs = MemoryKnobs(
            plan.batch_size,
            plan.seq_len,
            self.cfg.activation_checkpointing,
            self.cfg.reshard_after_forward,
            self.dtype != torch.float32,
            self.world,
            self.cfg.max_memory_gb,
        )
        self.flop_per_token = flops_per_token(plan.shape, plan.seq_len)
        self.total_params, self.non_embedding_params = param_counts(plan.shape)
        self.last_memory: MemorySnapshot | None = None
        self._memory_deltas = (0, 0)  # allocator retries and OOMs since the previous log row
        self.profiler: StepProfiler | None = None  # set by run() once the start step is known
        self.dtypes_seen: dict[str, dict[str, Any]] = {}  # set by run(): what the first forward's layers received
        self.build = BuildMeter(self.cfg.meta_init)  # what building the model cost this rank
        self.probe_at: int | None = None  # the step whose memory and FLOPs `summary.knobs` reports
        self.probe: dict[str, Any] | None = None
        self.compiled: dict[str, Any] | None = None  # dynamo's counters after the loop, with compile
        self.float8_linears = 0  # linears torchao swapped for Float8Linear (train.float8)

    # --- helpers -----------------------------------------------------------------------------
    def oom_error(self, exc: BaseException, where: str, metrics: MetricRecorder) -> UserError:
        """Count the OOM and name every knob that lowers memory use, in one line."""
        metrics.inc("fleetbench_train_ooms_total", 1)
        return UserError(out_of_memory_message(exc, where, self.rank, self.device.name, self.knobs))

    def out_of_memory_as_user_error(self, where: str, metrics: MetricRecorder) -> AbstractContextManager[None]:
        """Turn running out of memory inside the block into `oom_error`; other failures pass unchanged."""
        return out_of_memory_as(lambda exc: self.oom_error(exc, where, metrics))

    def note(self, text: str, level: int = logging.INFO) -> None:
        """Log `text` once for the job: from rank 0 (the other ranks would repeat it)."""
        if self.rank == 0:
            log.log(level, text)

    # --- the run -------------------------------------------------------------------------------
    def run(self, run: BenchmarkRun) -> None:
        """Train `plan.steps` steps into `run` (from a checkpoint when resuming), then summarise."""
        cap = apply_memory_cap(self.cfg.max_memory_gb, self.device.torch_device)
        # Under a cap, memory can run out outside a step too (the data, a record, a checkpoint).
        with self.out_of_memory_as_user_error("outside a step (setup, records or a checkpoint)", run.metrics):
            self.run_capped(run, cap)

    def run_capped(self, run: BenchmarkRun, cap: str | None) -> None:
        """`run` once the memory cap is in place."""
        cfg, plan, metrics = self.cfg, self.plan, run.metrics
        mesh = build_mesh(cfg, self.env, self.device) if cfg.fsdp else None
        with self.out_of_memory_as_user_error("while building the model", metrics), self.build.measure():
            model = build_model(cfg, plan, mesh, self.device)
        self.float8_linears = float8_linears(model)
        self.build.built(model)
        self.dtypes_seen = watch_dtypes(model, cfg.compile).seen
        optimizer = build_optimizer(model, plan.lr, cfg.weight_decay)
        data = TokenBatches(
            plan.data,
            plan.shape.vocab_size,
            plan.seq_len,
            plan.batch_size,
            cfg.seed,
            self.rank,
            self.device.torch_device,
        )
        if data.corpus is not None:
            agree("text corpus (Python version)", data.corpus.fingerprint)
        checkpoint_root = cfg.checkpoint_dir or run.run_dir / "checkpoints"
        checkpointer = Checkpointer(checkpoint_root, cfg.keep_checkpoints, self.rank, self.device.torch_device)
        parts = Parts(model, optimizer, data, checkpointer)
        start_step = self.resume(parts, run)

        dist.barrier()  # ranks measure the CPU peak together, as they will train: sharing the cores
        dtype_name = str(self.dtype).removeprefix("torch.")
        if self.device.backend == "cpu" and cfg.peak_flops is None:
            peak: Peak | None = agreed_cpu_peak(
                dtype_name, self.threads, cpu_peak_file(run.results_root, run.identity.host), self.env.local_rank
            )
        else:
            peak, warning = resolve_peak(
                self.device.backend, self.device.name, dtype_name, self.threads, cfg.peak_flops
            )
            if warning:
                self.note(warning, logging.WARNING)
        if peak is not None:
            metrics.set("fleetbench_train_peak_flop_per_second", peak.flop_per_second)
        self.note(
            f"train: preset {plan.preset} ({plan.preset_why}), {self.total_params / 1e6:.2f}M params "
            f"({self.non_embedding_params / 1e6:.2f}M non-embedding), {self.world} rank(s) on {self.device.name} "
            f"({self.comm_backend}, {self.threads} thread(s)/rank), mesh {describe_mesh(mesh)}, "
            f"{plan.global_batch} x {plan.seq_len} tokens/step, data {plan.data}, "
            f"{self.precision.label} ({self.precision.why}), cap {cap or 'none'}, peak {peak.source if peak else 'none'}"
        )
        if cfg.max_restarts and not cfg.checkpoint_every:
            self.note("max_restarts without train.checkpoint_every: a restart starts over at step 0", logging.WARNING)
        window = ProfileWindow.for_run(cfg.profile_steps, start_step)
        self.profiler = StepProfiler(
            window, run.run_dir, self.rank, self.device, cfg.profile_memory_snapshot, start_step
        )
        if cfg.profile_steps is not None and window is None:
            first, last = cfg.profile_steps
            self.note(
                f"train.profile_steps={first}:{last}: done before this attempt's step {start_step + 1}; not profiled"
            )
        self.probe_at = probe_step(start_step, plan.steps, window is not None)
        meter = energy.meter_for(self.device, self.env)
        if meter is not None:
            meter.start()
        totals = self.loop(run, parts, start_step, peak)
        tokens = totals.steps * plan.tokens_per_step // self.world * energy.covered_ranks(self.device, self.env)
        energy.record_energy(run, meter.stop() if meter is not None else None, totals.steps, tokens)
        self.compiled = compile_report(model) if cfg.compile else None
        saved_at_end = bool(cfg.checkpoint_every) and plan.steps % cfg.checkpoint_every == 0
        if cfg.checkpoint_final and not saved_at_end and start_step < plan.steps:
            self.save(parts, plan.steps, totals, metrics)
        self.summarise(run, totals, start_step, peak, checkpoint_root, mesh)

    def resume(self, parts: Parts, run: BenchmarkRun) -> int:
        """The step to start at: 0, or after the newest checkpoint when resuming or restarted (restored in place).

        Raises UserError for --resume without a checkpoint, for a checkpoint of other data, or one
        that is already at train.steps.
        """
        cfg, checkpointer = self.cfg, parts.checkpointer
        if not (cfg.resume or self.env.restart_count > 0):
            return 0
        found = checkpointer.latest() if self.rank == 0 else None
        latest = broadcast_object(None if found is None else (found[0], str(found[1])))
        if latest is None:
            if cfg.resume and self.env.restart_count == 0:
                raise UserError(
                    f"--resume: no complete checkpoint under {checkpointer.root}; accepted: a run "
                    "that saved one (train.checkpoint_every or checkpoint_final), or no --resume"
                )
            self.note(f"restart {self.env.restart_count}: no checkpoint yet, starting at step 0")
            return 0
        steps_done, path = latest
        state = checkpointer.load(Path(path), parts.model, parts.optimizer)
        saved = state["data"]
        now = parts.data.state(steps_done, self.plan.global_batch)
        for key in ("kind", "seed", "seq_len", "corpus"):
            if saved.get(key) != now[key]:
                raise UserError(
                    f"checkpoint {path} was written with data {key}={saved.get(key)!r}, this run has "
                    f"{now[key]!r}; accepted: resume with the same train.data/seed/seq_len, or a new run"
                )
        if saved.get("global_batch") != now["global_batch"]:
            self.note(
                f"resuming with a global batch of {now['global_batch']} sequences; the checkpoint "
                f"used {saved.get('global_batch')} (the data stream continues, but not sample for sample)",
                logging.WARNING,
            )
        next_step = int(state["next_step"])
        self.note(
            f"resumed from {path} at step {next_step} (attempt {self.env.restart_count}, "
            f"rng {'restored' if state['rng_restored'] else 'not in checkpoint for this rank'})"
        )
        run.summary["resumed_from_step"] = next_step
        if next_step >= self.plan.steps and cfg.resume and self.env.restart_count == 0:
            raise UserError(
                f"checkpoint {path} is at step {next_step}, already at train.steps={self.plan.steps}; "
                "accepted: a larger train.steps to train further"
            )
        return next_step

    def save(self, parts: Parts, steps_done: int, totals: Totals, metrics: MetricRecorder) -> None:
        """Checkpoint after `steps_done` steps (every rank takes part) and count its time."""
        state = {
            "next_step": steps_done,
            "data": parts.data.state(steps_done, self.plan.global_batch),
            "preset": self.plan.preset,
            "world_size": self.world,
        }
        seconds = parts.checkpointer.save(steps_done, parts.model, parts.optimizer, state)
        totals.checkpoint_s += seconds
        totals.checkpoints += 1
        metrics.set("fleetbench_train_checkpoint_seconds", seconds)
        metrics.inc("fleetbench_train_checkpoints_total", 1)

    def loop(self, run: BenchmarkRun, parts: Parts, start_step: int, peak: Peak | None) -> Totals:
        """Steps `start_step` .. `plan.steps`: display, metrics and history at log steps, checkpoints on schedule."""
        cfg, plan, metrics = self.cfg, self.plan, run.metrics
        totals = Totals()
        interval = Interval()
        history = HistoryWriter(run.run_dir) if self.rank == 0 else None
        title = f"train {plan.preset} on {self.world} x {self.device.name}"
        if self.device.backend == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device.torch_device)
        display = self.progress.table("train", title, step_rows.COLUMNS, plan.steps, start_step)
        profiler = self.profiler
        assert profiler is not None, "run() makes the profiler (a no-op without train.profile_steps)"
        try:
            with display as shown, profiler:
                for step in range(start_step, plan.steps):
                    steps_done = step + 1
                    started = time.perf_counter()
                    log_now = steps_done % cfg.log_every == 0 or steps_done == plan.steps
                    probe = self.step_probe(steps_done)
                    before = sched_sample()
                    with self.out_of_memory_as_user_error(f"in step {steps_done}", metrics):
                        loss, norm, data_s = self.train_step(parts, step, log_now, probe)
                    if log_now:
                        self.device.synchronize()
                    if probe is not None:
                        self.probe = probe.summary(steps_done)
                    slowed = profiler.slows(steps_done) or probe is not None
                    cpu = CpuTimes.between(before, sched_sample())
                    interval.add(time.perf_counter() - started, data_s, slowed, cpu)
                    display_started = time.perf_counter()
                    shown.advance()
                    totals.display_s += time.perf_counter() - display_started
                    if log_now:
                        assert norm is not None
                        # The global loss is a collective: its time is mostly waiting for the slowest
                        # rank, which the next step would wait for anyway, so it is not telemetry.
                        loss_value, norm_value = mean_across_ranks(loss), float(norm)
                        logged = time.perf_counter()
                        row = self.row(steps_done, loss_value, norm_value, interval, peak, parts.optimizer)
                        self.record(metrics, row, interval)
                        run.step_done()
                        if history is not None:
                            history.append(row)
                        totals.telemetry_s += time.perf_counter() - logged
                        display_started = time.perf_counter()
                        shown.row(step_rows.cells(row), step_rows.line(row, plan.steps))
                        totals.display_s += time.perf_counter() - display_started
                        totals.close_interval(interval, row, time.perf_counter() - logged)
                        interval = Interval()
                    if cfg.checkpoint_every and steps_done % cfg.checkpoint_every == 0:
                        self.save(parts, steps_done, totals, metrics)
                    profiler.step_done(steps_done)  # after everything the step did: its trace ends here
        finally:
            if history is not None:
                history.close()
        return totals

    @staticmethod
    def loss(model: TrainModel, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The forward and its cross-entropy (in fp32) over every token."""
        logits = model(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))

    def step_probe(self, steps_done: int) -> StepProbe | None:
        """The probe that measures step `steps_done`, when it is the probe step (`train/knobs.py`)."""
        if steps_done != self.probe_at:
            return None
        return StepProbe(self.device.torch_device)

    def train_step(
        self, parts: Parts, step: int, log_now: bool, probe: StepProbe | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None, float]:
        """One optimiser step; returns the local loss, the grad norm (when clipping or logging), data time.

        With a `probe`, forward and backward are measured (`train/knobs.py`); what they compute is the same.
        """
        model, optimizer = parts.model, parts.optimizer
        started = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(self.plan, step)
        accum = self.plan.grad_accum_steps
        losses: list[torch.Tensor] = []
        data_s = 0.0
        for micro in range(accum):
            fetched = time.perf_counter()
            inputs, targets = parts.data.batch(step, micro, self.world)
            data_s += time.perf_counter() - (started if micro == 0 else fetched)
            if accum > 1 and self.cfg.fsdp:  # reduce-scatter the gradients once, after the last micro-batch
                model.set_requires_gradient_sync(micro == accum - 1)  # type: ignore[operator]
            measured = probe if micro == 0 else None  # the probe measures the first micro-batch
            if measured is not None:
                measured.count_flops(model, functools.partial(self.loss, model, inputs, targets))
            with measured.forward() if measured is not None else nullcontext():
                micro_loss = self.loss(model, inputs, targets)
            if measured is not None:
                measured.forward_done(model)
            # what loss.backward() calls, with type annotations; the mean over micro-batches
            torch.autograd.backward(micro_loss / accum if accum > 1 else micro_loss)
            losses.append(micro_loss.detach())
        loss = torch.stack(losses).mean() if accum > 1 else losses[0]
        norm = grad_norm(model, self.cfg.grad_clip) if (self.cfg.grad_clip or log_now) else None
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss, norm, data_s

    def row(
        self,
        steps_done: int,
        loss: float,
        norm: float,
        interval: Interval,
        peak: Peak | None,
        optimizer: torch.optim.Optimizer,
    ) -> StepRow:
        """The log row of the interval just ended; also takes the memory snapshot `record` reports."""
        step_s = interval.wall_s / interval.steps
        tokens_per_s = self.plan.tokens_per_step / step_s
        device_tokens_per_s = tokens_per_s / self.world
        memory = snapshot(self.device.torch_device)
        self.last_memory, previous = memory, self.last_memory
        self._memory_deltas = (
            memory.alloc_retries - (previous.alloc_retries if previous else 0),
            memory.ooms - (previous.ooms if previous else 0),
        )
        return StepRow(
            step=steps_done,
            loss=loss,
            grad_norm=norm,
            step_s=step_s,
            data_s=interval.data_s / interval.steps,
            tokens_per_s=tokens_per_s,
            device_tokens_per_s=device_tokens_per_s,
            tflops_per_device=self.flop_per_token * device_tokens_per_s / 1e12,
            mfu=mfu(self.flop_per_token, device_tokens_per_s, peak),
            peak_memory_bytes=memory.headline,
            lr=float(optimizer.param_groups[0]["lr"]),
            attempt=self.env.restart_count,
        )

    def record(self, metrics: MetricRecorder, row: StepRow, interval: Interval) -> None:
        """This rank's metrics at a log step: loss, throughput, MFU, memory and the interval's counters."""
        metrics.set("fleetbench_train_loss", row.loss)
        metrics.set("fleetbench_train_grad_norm", row.grad_norm)
        metrics.set("fleetbench_step_seconds", row.step_s)
        metrics.inc("fleetbench_steps_total", interval.steps)
        metrics.set("fleetbench_train_step", row.step)
        metrics.set("fleetbench_train_data_seconds", row.data_s)
        metrics.set("fleetbench_train_tokens_per_second", row.tokens_per_s)
        metrics.set("fleetbench_train_device_tokens_per_second", row.device_tokens_per_s)
        metrics.inc("fleetbench_train_tokens_total", interval.steps * self.plan.batch_size * self.plan.seq_len)
        metrics.set("fleetbench_train_achieved_flop_per_second", row.tflops_per_device * 1e12)
        if row.mfu is not None:
            metrics.set("fleetbench_train_mfu_ratio", row.mfu)
        memory = self.last_memory
        assert memory is not None
        if memory.peak_allocated is not None and memory.peak_reserved is not None:
            metrics.set("fleetbench_memory_peak_allocated_bytes", memory.peak_allocated)
            metrics.set("fleetbench_memory_peak_reserved_bytes", memory.peak_reserved)
            retries, ooms = self._memory_deltas
            metrics.inc("fleetbench_train_alloc_retries_total", retries)
            metrics.inc("fleetbench_train_ooms_total", ooms)
        metrics.set("fleetbench_process_peak_rss_bytes", memory.peak_rss)

    def add_headline(
        self,
        run: BenchmarkRun,
        totals: Totals,
        device_tokens_per_s: float | None,
        peak: Peak | None,
        memory: MemorySnapshot,
    ) -> None:
        """Throughput, MFU and step time with the steady steps' times as samples; peak memory; final loss."""
        times = totals.steady_step_times_s or [r.step_s for r in totals.rows]
        device_tokens_per_step = self.plan.tokens_per_step / self.world
        rates = [device_tokens_per_step / t for t in times if t > 0]
        if times:
            run.add_headline("fleetbench_step_seconds", statistics.median(times), times)
        if device_tokens_per_s:
            run.add_headline("fleetbench_train_device_tokens_per_second", device_tokens_per_s, rates)
            ratio = mfu(self.flop_per_token, device_tokens_per_s, peak)
            if ratio is not None:
                per_step = [mfu(self.flop_per_token, rate, peak) for rate in rates]
                run.add_headline("fleetbench_train_mfu_ratio", ratio, [m for m in per_step if m is not None])
        if memory.peak_allocated is not None:
            run.add_headline("fleetbench_memory_peak_allocated_bytes", memory.peak_allocated)
        else:
            run.add_headline("fleetbench_process_peak_rss_bytes", memory.peak_rss)
        if totals.rows:
            run.add_headline("fleetbench_train_loss", totals.rows[-1].loss)

    def summarise(
        self, run: BenchmarkRun, totals: Totals, start_step: int, peak: Peak | None, checkpoint_root: Path, mesh: Any
    ) -> None:
        """The record's summary and headline; on rank 0 also the history and plot artifacts and the closing line."""
        plan = self.plan
        steady_steps = totals.steady_steps or totals.steps
        steady_wall = totals.steady_wall_s or totals.wall_s
        tokens_per_s = plan.tokens_per_step * steady_steps / steady_wall if steady_wall else None
        device_tokens_per_s = tokens_per_s / self.world if tokens_per_s else None
        memory = self.last_memory or snapshot(self.device.torch_device)
        rows = totals.rows
        run.summary.update(
            {
                "preset": plan.preset,
                "preset_why": plan.preset_why,
                # the plan's precision is the summary's own "precision" entry, with what was observed
                "plan": {key: value for key, value in asdict(plan).items() if key != "precision"},
                "world_size": self.world,
                "mesh": list(mesh.shape) if mesh is not None else None,
                "mesh_dim_names": list(mesh.mesh_dim_names or ()) if mesh is not None else None,
                "mesh_coordinate": mesh.get_coordinate() if mesh is not None else None,  # this rank's place
                "comm_backend": self.comm_backend,
                "compute_dtype": str(self.dtype).removeprefix("torch."),
                "precision": {**asdict(self.precision), "observed": self.dtypes_seen},
                "threads_per_rank": self.threads,
                "parameters": self.total_params,
                "non_embedding_parameters": self.non_embedding_params,
                "flop_per_token": self.flop_per_token,
                "start_step": start_step,
                "steps_run": totals.steps,
                "final_step": rows[-1].step if rows else start_step,
                "first_loss": rows[0].loss if rows else None,
                "final_loss": rows[-1].loss if rows else None,
                "tokens_per_s": tokens_per_s,
                "device_tokens_per_s": device_tokens_per_s,
                "steady_state_steps": steady_steps,
                "tflops_per_device": (self.flop_per_token * device_tokens_per_s / 1e12)
                if device_tokens_per_s
                else None,
                "mfu": mfu(self.flop_per_token, device_tokens_per_s, peak) if device_tokens_per_s else None,
                "peak_flop_per_second": peak.flop_per_second if peak else None,
                "peak_source": peak.source if peak else None,
                "peak_memory_bytes": memory.headline,
                "peak_reserved_bytes": memory.peak_reserved,
                "peak_rss_bytes": memory.peak_rss,
                "cpu_time": totals.steady_cpu.summary(),
                "telemetry_overhead_ratio": totals.telemetry_s / totals.wall_s if totals.wall_s else None,
                "display_overhead_ratio": totals.display_s / totals.wall_s if totals.wall_s else None,
                "checkpoints_written": totals.checkpoints,
                "checkpoint_seconds": totals.checkpoint_s,
                "checkpoint_dir": str(checkpoint_root),
                "attempt": self.env.restart_count,
            }
        )
        run.summary.setdefault("resumed_from_step", None)
        run.summary["knobs"] = self.knobs_summary()
        self.add_headline(run, totals, device_tokens_per_s, peak, memory)
        self.add_profile(run, totals)
        if self.rank != 0:
            return
        run.add_artifact(run.run_dir / HISTORY_FILE)
        if self.cfg.plot:
            history = read_history(run.run_dir)
            if history:
                run.add_artifact(
                    plot_history(history, run.run_dir, f"{plan.preset}: {self.world} rank(s), {self.device.name}")
                )
        summary_line = (
            f"done: {totals.steps} steps, loss {run.summary['first_loss']} -> {run.summary['final_loss']}, "
            f"{(tokens_per_s or 0):,.0f} tok/s, telemetry {run.summary['telemetry_overhead_ratio'] or 0:.2%} "
            f"of step time"
        )
        self.closing.append(summary_line)

    def knobs_summary(self) -> dict[str, Any]:
        """`summary.knobs`: each FSDP2 knob's setting and what it did, as this rank measured it (`train/knobs.py`)."""
        cfg = self.cfg
        return {
            "activation_checkpointing": cfg.activation_checkpointing,
            "ac_policy": cfg.ac_policy if cfg.activation_checkpointing else None,
            "reshard_after_forward": cfg.reshard_after_forward,
            "compile": cfg.compile,
            "float8": cfg.float8,
            "float8_linears": self.float8_linears,
            "grad_accum_steps": self.plan.grad_accum_steps,
            "lr_schedule": self.plan.lr_schedule,
            "lr_min_ratio": self.plan.lr_min_ratio if self.plan.lr_schedule == "cosine" else None,
            "meta_init": cfg.meta_init,
            "build": self.build.summary(),
            "probe": self.probe,
            "compiled": self.compiled,
        }

    def add_profile(self, run: BenchmarkRun, totals: Totals) -> None:
        """The profiled steps in the summary (and whether the throughput left them out), the traces as artifacts."""
        profiler = self.profiler
        if profiler is None:
            return
        # Left out only when steady steps remained; otherwise the figures fell back to every step.
        run.summary.update(profiler.summary(totals.excluded_steps > 0 and totals.steady_steps > 0, run.run_dir))
        for path in profiler.files:
            run.add_artifact(path)
        window = profiler.window
        if self.rank == 0 and window is not None and profiler.files:
            low, high = window.excluded
            self.closing.append(
                f"profile: steps {window.first}..{window.last} of every rank in {profiler.out_dir} "
                f"(rank-N.*.pt.trace.json.gz, rank-N.key_averages.txt); steps {low}..{high} left out of "
                "tok/s, MFU and step time"
            )


@dataclass(frozen=True)
class TrainOutcome:
    """What a training process shows once it is over: rank 0's closing lines (none elsewhere)."""

    closing: list[str]


def run_worker(config: FleetbenchConfig, context: RunContext) -> JobResult[TrainOutcome]:
    """Train as this process's rank (torchrun env) or as a world of one; returns this rank's record."""
    cfg = config.train
    env = DistEnv.from_environ()
    device, comm_backend = pick_device(cfg, env)
    plan = resolve_plan(cfg, env.world_size, device)
    check_launch(cfg, plan)
    check_profile_device(cfg, device.backend == "cuda")
    check_fits(plan, cfg, device.torch_device, env.local_world_size)
    setup = RankSetup(env, device, comm_backend, threads_per_rank(cfg, env))
    torch.set_num_threads(setup.threads)
    previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    init_process_group(env, comm_backend, device, cfg.collective_timeout_s)
    try:
        return _run(config, plan, setup, context)
    finally:
        dist.destroy_process_group()
        signal.signal(signal.SIGTERM, previous_handler)


def _run(config: FleetbenchConfig, plan: TrainPlan, setup: RankSetup, context: RunContext) -> JobResult[TrainOutcome]:
    cfg = config.train
    # Rank 0's run (its launcher's choice, or the one to resume) is every rank's: ranks that torchrun
    # started without a launcher each made up an id of their own.
    run_id = broadcast_object((resume_run_id(config) or context.run_id) if dist.get_rank() == 0 else None)
    context = replace(context, run_id=run_id)
    if setup.env.local_rank == 0:
        report_run_id(run_id)
    comparable = cfg.model_dump(mode="json")
    comparable.pop("node_rank")  # the one train field that differs between nodes
    agree("train config", comparable)
    trainer = Trainer(config, plan, setup, context.progress)
    device = setup.device
    with open_run(config, context, BENCHMARK, cfg, device.name, device.backend, rank=dist.get_rank()) as bench:
        trainer.run(bench)
    return JobResult([bench.result()], TrainOutcome(trainer.closing))
