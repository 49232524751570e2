"""The demo's train stage: the tiny preset on 2 gloo ranks, launched like `make train`, in a subprocess."""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.config.train import PRESETS
from fleetbench.errors import UserError
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.results.store import read_records
from fleetbench.train.loop import TrainOutcome

STAGE_RANKS = 2
STAGE_PROFILE_STEPS = (3, 4)

log = logging.getLogger(__name__)


def stage_steps(config: FleetbenchConfig) -> int:
    """The steps the stage trains: the configured count, else the tiny preset's."""
    return config.train.steps or PRESETS["tiny"].steps


def run_train_stage(config: FleetbenchConfig, context: RunContext) -> JobResult[TrainOutcome]:
    """Train the `tiny` preset on 2 CPU ranks (gloo, torchrun) into the run folder; rank 0's record.

    The ranks show their steps and closing lines on the inherited stdout and stderr as they happen.
    """
    train = config.train.model_copy(
        update={
            "preset": "tiny",
            "device": "cpu",
            "backend": "auto",
            "nproc": STAGE_RANKS,
            "nnodes": 1,
            "node_rank": 0,
            "rdzv_endpoint": None,
            # The demo shows a distributed checkpoint too (save time on the training dashboard).
            "checkpoint_final": True,
            "log_every": 10,  # a readable display; every step still feeds the metrics and the plot
            # Two profiled steps show where FSDP2's step goes on each rank (the demo's trace stage).
            "profile_steps": STAGE_PROFILE_STEPS if stage_steps(config) > STAGE_PROFILE_STEPS[1] else None,
        }
    )
    staged = context.pinned(config.model_copy(update={"train": train}))
    log.info("train: tiny preset, %d gloo ranks (torchrun), run %s", STAGE_RANKS, context.run_id)
    with tempfile.TemporaryDirectory(prefix="fleetbench-train-stage-") as scratch:
        config_path = Path(scratch) / "config.yaml"
        config_path.write_text(yaml.safe_dump(staged.model_dump(mode="json"), sort_keys=False))
        # stdout/stderr are inherited: the ranks' progress shows as it happens.
        done = subprocess.run([sys.executable, "-m", "fleetbench", "train", "--config", str(config_path)], check=False)
    if done.returncode != 0:
        raise UserError(f"train stage failed (exit status {done.returncode}); its error is the line above")
    records = [r for r in read_records(context.run_dir) if r.benchmark == "train" and r.rank == 0 and r.status == "ok"]
    if not records:
        raise UserError(f"train stage wrote no successful rank-0 record under {context.run_dir}")
    return JobResult([records[-1]], TrainOutcome([]))


JOB: Job[TrainOutcome] = run_train_stage
