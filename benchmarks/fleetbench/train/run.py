"""`fleetbench train`: launch the FSDP2 job from this process, or train as one of its ranks.

Started by a user (or Make, or Slurm's srun), this process is the launcher: it checks what can be
checked and runs torchrun's elastic agent (`train/launch.py`). Started by torchrun, it is one rank
(`train/loop.py`). Either way the answer is a result record: rank 0's, or on a node without rank 0
the record of this node's first rank.
"""

from __future__ import annotations

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.job import Job, JobResult, RunContext
from fleetbench.train.loop import TrainOutcome
from fleetbench.train.parallel import DistEnv


def run(config: FleetbenchConfig, context: RunContext) -> JobResult[TrainOutcome]:
    """Train as configured; returns this process's record (a rank) or the job's (the launcher)."""
    from fleetbench.train.launch import launch
    from fleetbench.train.loop import run_worker

    if DistEnv.from_environ().launched:
        return run_worker(config, context)
    return launch(config, context)


JOB: Job[TrainOutcome] = run
