"""Per-step history of a training run: rank 0 appends one JSON line per logged step.

`results/<run_id>/train_steps.jsonl` survives restarts (an attempt that resumes appends after the
one that died), so the plot and anyone comparing runs see the whole run. When a step was run twice
(after a resume from an earlier checkpoint) the latest attempt's row wins.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fleetbench import jsonio

HISTORY_FILE = "train_steps.jsonl"
NULLABLE = frozenset({"mfu"})  # None in memory too; any other null in the file is a NaN (a diverged loss)


@dataclass(frozen=True)
class StepRow:
    """One logged step: loss, throughput, MFU and memory, averaged over its log interval."""

    step: int  # steps completed, 1-based
    loss: float
    grad_norm: float
    step_s: float  # mean wall time per step over the log interval
    data_s: float  # mean time per step spent producing the batch
    tokens_per_s: float  # whole job
    device_tokens_per_s: float
    tflops_per_device: float
    mfu: float | None
    peak_memory_bytes: int
    lr: float
    attempt: int  # torchrun restart count


class HistoryWriter:
    """Appends rows to the run's history file; append mode, so a restarted attempt adds to the file."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / HISTORY_FILE
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, row: StepRow) -> None:
        """Write one row as one JSON line, in a single append (a NaN, a diverged loss, as null)."""
        os.write(self._fd, (jsonio.dumps(asdict(row)) + "\n").encode())

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def read_history(run_dir: Path) -> list[StepRow]:
    """The run's rows in step order, the latest attempt's row for a step run twice; [] without a history."""
    path = run_dir / HISTORY_FILE
    if not path.is_file():
        return []
    latest: dict[int, StepRow] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                data: dict[str, Any] = json.loads(line)
                values: dict[str, Any] = {
                    k: math.nan if v is None and k not in NULLABLE else v for k, v in data.items()
                }
                row = StepRow(**values)
                latest[row.step] = row
    return [latest[step] for step in sorted(latest)]
