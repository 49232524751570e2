"""Distributed checkpoints (torch.distributed.checkpoint): model, optimizer, data position, RNG.

Layout: <checkpoint_dir>/step_00000012/ holds a DCP checkpoint taken after 12 completed steps. A
save goes to `step_N.partial/` and rank 0 renames it once every rank has written its shards (DCP
writes `.metadata` last), so a rank killed mid-save never leaves a folder that looks complete, and
a save that fails (a full disk, a file-size limit) is one line, its partial folder removed, the
previous checkpoint still the newest. Resume loads the newest complete folder after checking that
its metadata reads and every shard file it names is there and long enough (`check_checkpoint`),
so a damaged checkpoint is refused in one line instead of half-loaded; DCP reshards it, so a
checkpoint from N ranks loads on M. On a shared file system (needed for multi-node) every rank
reads and writes the same folder.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint import state_dict_loader as dcp_loader
from torch.distributed.checkpoint import state_dict_saver as dcp_saver
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from fleetbench import jsonio
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError

STEP_DIR = re.compile(r"^step_(\d{8})$")
METADATA = ".metadata"


def step_dir_name(step: int) -> str:
    """The folder name of the checkpoint taken after `step` completed steps."""
    return f"step_{step:08d}"


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(steps done, folder) of every complete checkpoint, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = STEP_DIR.match(path.name)
        if match and (path / METADATA).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def check_checkpoint(path: Path) -> None:
    """Refuse a checkpoint whose `.metadata` does not read, or whose shard files are missing or shorter
    than the metadata says (cut short by a full disk, a copy or a crash), in one line."""
    older = [p for _, p in complete_checkpoints(path.parent) if p != path]
    fix = (
        f"move it aside to resume from {older[-1].name}, or run without --resume"
        if older
        else "move it aside, or run without --resume"
    )
    try:
        metadata = FileSystemReader(str(path)).read_metadata()
    except Exception as exc:  # unpickling garbage raises anything
        raise UserError(
            f"checkpoint {path} is damaged: its {METADATA} does not read ({type(exc).__name__}: {_first_line(exc)}); {fix}"
        ) from None
    needed: dict[str, int] = {}
    for info in (getattr(metadata, "storage_data", None) or {}).values():
        relative = getattr(info, "relative_path", None)
        if relative is not None:
            needed[relative] = max(needed.get(relative, 0), int(info.offset) + int(info.length))
    for relative, end in sorted(needed.items()):
        shard = path / relative
        size = shard.stat().st_size if shard.is_file() else None
        if size is None or size < end:
            state = "is missing" if size is None else f"has {size} bytes, its metadata needs {end}"
            raise UserError(f"checkpoint {path} is damaged: shard {relative} {state}; {fix}")


def check_resume(config: FleetbenchConfig, run_id: str | None) -> None:
    """Before any rank starts: for --resume, the newest complete checkpoint exists and is intact."""
    cfg = config.train
    if not cfg.resume:
        return
    root = cfg.checkpoint_dir or config.run.results_dir / str(run_id) / "checkpoints"
    found = complete_checkpoints(root)
    if not found:
        raise UserError(
            f"--resume: no complete checkpoint under {root}; accepted: a run that saved one "
            "(train.checkpoint_every or checkpoint_final), or no --resume"
        )
    check_checkpoint(found[-1][1])


class _Writer(FileSystemWriter):
    """DCP's file-system writer that keeps this rank's own write error: DCP hands every rank the
    failures of all of them, pickled, which drops the OS error (ENOSPC, EFBIG) behind them."""

    failure: BaseException | None = None

    def write_data(self, plan: Any, planner: Any) -> Any:
        """Write this rank's shards as DCP does; remember what failed."""
        try:
            return super().write_data(plan, planner)
        except BaseException as exc:
            self.failure = exc
            raise

    def finish(self, metadata: Any, results: Any) -> None:
        """Write `.metadata` (the coordinator) as DCP does; remember what failed."""
        try:
            super().finish(metadata, results)
        except BaseException as exc:
            self.failure = exc
            raise


def save_failure_reason(exc: BaseException) -> str:
    """What made a save fail, from the first rank's first OS error (DCP wraps each rank's failure)."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        if isinstance(current, CheckpointException):
            pending.extend(failure for failure, _stack in current.failures.values())
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return _first_line(exc)


def _rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


class Checkpointer:
    """This rank's side of the checkpoints under `root`, keeping the newest `keep` (0: all)."""

    def __init__(self, root: Path, keep: int, rank: int, device: torch.device) -> None:
        self.root = root
        self.keep = keep
        self.rank = rank
        self.device = device

    def latest(self) -> tuple[int, Path] | None:
        """(steps done, folder) of the newest complete checkpoint, or None."""
        found = complete_checkpoints(self.root)
        return found[-1] if found else None

    def save(
        self, steps_done: int, model: nn.Module, optimizer: torch.optim.Optimizer, train_state: dict[str, Any]
    ) -> float:
        """Write a checkpoint after `steps_done` steps; returns the seconds it took (all ranks).

        A save that fails leaves no partial folder and the previous checkpoint the newest; the
        UserError names the cause and that checkpoint.
        """
        start = time.perf_counter()
        final = self.root / step_dir_name(steps_done)
        partial = final.with_name(final.name + ".partial")
        if self.rank == 0:
            self._clear(partial)
        dist.barrier()
        state = {
            "model": get_model_state_dict(model),
            "optim": get_optimizer_state_dict(model, optimizer),
            "train": jsonio.dumps(train_state, sort_keys=True),
            "rng": {f"rank{self.rank}": _rng_state(self.device)},
        }
        writer = _Writer(str(partial))
        try:
            dcp_saver.save(state, storage_writer=writer)
        except (Exception, CheckpointException) as exc:
            raise self._save_failed(steps_done, partial, writer.failure or exc) from None
        dist.barrier()
        if self.rank == 0:
            shutil.rmtree(final, ignore_errors=True)
            partial.rename(final)
            self._prune()
        dist.barrier()
        return time.perf_counter() - start

    def _clear(self, partial: Path) -> None:
        """Rank 0, before a save: the root exists, and no partial folder of a killed save is left."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"checkpoint folder {self.root} cannot be made ({exc.strerror or exc}); pass a writable "
                "train.checkpoint_dir"
            ) from None
        shutil.rmtree(partial, ignore_errors=True)  # left by a rank killed while saving

    def _save_failed(self, steps_done: int, partial: Path, exc: BaseException) -> UserError:
        """Remove what the failed save wrote; the one line names the cause and the checkpoint that stands."""
        if self.rank == 0:
            shutil.rmtree(partial, ignore_errors=True)
        latest = self.latest()
        standing = (
            f"{latest[1].name} (after step {latest[0]}) is still the newest complete checkpoint; --resume continues from it"
            if latest
            else "no complete checkpoint exists yet"
        )
        return UserError(
            f"checkpoint after step {steps_done} could not be written to {self.root} ({save_failure_reason(exc)}); "
            f"nothing of it was kept and {standing}; free space there or pass another train.checkpoint_dir"
        )

    def _prune(self) -> None:
        if self.keep <= 0:
            return
        for _step, path in complete_checkpoints(self.root)[: -self.keep]:
            shutil.rmtree(path, ignore_errors=True)

    def load(self, path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Restore model, optimizer and this rank's RNG in place; returns the saved train state.

        A damaged checkpoint (`check_checkpoint`) is a UserError before anything is restored.
        """
        check_checkpoint(path)
        saved_keys = set(FileSystemReader(str(path)).read_metadata().state_dict_metadata)
        rng_key = f"rank{self.rank}"
        state: dict[str, Any] = {
            "model": get_model_state_dict(model),
            "optim": get_optimizer_state_dict(model, optimizer),
            "train": "",
        }
        has_rng = any(key.startswith(f"rng.{rng_key}.") for key in saved_keys)
        if has_rng:
            state["rng"] = {rng_key: _rng_state(self.device)}
        try:
            dcp_loader.load(state, checkpoint_id=str(path))
        except (Exception, CheckpointException) as exc:  # DCP wraps per-rank failures; the first line says which
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(
                f"checkpoint {path} does not fit this model/optimizer ({first[:200]}); resume "
                "with the preset and model fields it was written with"
            ) from None
        set_model_state_dict(model, state["model"])
        set_optimizer_state_dict(model, optimizer, optim_state_dict=state["optim"])
        if has_rng:
            torch.set_rng_state(state["rng"][rng_key]["cpu"])
            if "cuda" in state["rng"][rng_key]:
                torch.cuda.set_rng_state(state["rng"][rng_key]["cuda"], self.device)
        train_state: dict[str, Any] = json.loads(state["train"])
        train_state["rng_restored"] = has_rng
        return train_state


def resume_run_id(config: FleetbenchConfig) -> str | None:
    """The run a job continues: the named one, else for --resume the newest with a checkpoint, else None.

    The launcher asks once before the ranks start; ranks started by torchrun directly ask on rank 0.
    """
    cfg = config.train
    if config.run.run_id is None and cfg.resume and cfg.checkpoint_dir is None:
        return find_resumable_run(config.run.results_dir)
    return config.run.run_id


def find_resumable_run(results_root: Path) -> str:
    """The run folder under `results_root` whose newest complete training checkpoint is the most recent."""
    best: tuple[float, str] | None = None
    for run_dir in results_root.iterdir() if results_root.is_dir() else []:
        found = complete_checkpoints(run_dir / "checkpoints")
        if found:
            written = found[-1][1].stat().st_mtime
            if best is None or written > best[0]:
                best = (written, run_dir.name)
    if best is None:
        raise UserError(
            f"--resume: no run under {results_root} has a complete checkpoint; accepted: --run-id of "
            "a run that saved one (train.checkpoint_every), or train.checkpoint_dir"
        )
    return best[1]
