"""Measure candidate knob changes against the base configuration, as `compare --rounds` measures two sides.

Every round runs the base and each candidate once, each a separate `fleetbench train` process (the
CLI, as compare's rounds run it) with its own run folder `<prefix>-<name>-NN`; the order rotates from
round to round so a drift of the machine falls on every side alike. Each process's device tokens/s
(its headline) is one independent sample; a candidate is judged against the base with compare's
between-process statistics (Mann-Whitney U, a bootstrap interval of the ratio of medians, at least
the minimum change): "better", "worse" or "no significant change". The best configuration is the
base with the overrides of the candidate whose significant gain is largest, or the base itself.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetbench.compare.rounds import RoundsPlan, Side, process_argv, run_process
from fleetbench.compare.statistics import Change, TestSettings, compare_samples
from fleetbench.errors import UserError
from fleetbench.results.store import RECORDS_FILE, read_records
from fleetbench.train.tune.candidates import TOKENS_METRIC, Candidate

BASE = "base"


@dataclass
class Measured:
    """One side's samples (device tokens/s per process) and its processes' run ids."""

    name: str
    overrides: tuple[str, ...]
    samples: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)


@dataclass
class Judged:
    """A candidate with its measurement and the verdict against the base."""

    candidate: Candidate
    measured: Measured
    change: Change | None  # None: the candidate failed to run
    failure: str | None = None


def write_base_config(train: dict[str, Any], path: Path) -> Path:
    """The base run's `train` section as a config file every process reads (`fleetbench train --config`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"train": _plain(train)}, sort_keys=False), encoding="utf-8")
    return path


def _plain(train: dict[str, Any]) -> dict[str, Any]:
    """The section without what belongs to one run (its checkpoint folder, resume) and without unset keys."""
    dropped = ("checkpoint_dir", "resume")
    return {k: v for k, v in train.items() if k not in dropped and v is not None}


def _sample(results_root: Path, run_id: str) -> float | None:
    folder = results_root / run_id
    if not (folder / RECORDS_FILE).is_file():
        return None
    for record in read_records(folder):
        if record.rank == 0 and record.status == "ok":
            for figure in record.headline:
                if figure.metric == TOKENS_METRIC and figure.value is not None:
                    return float(figure.value)
    return None


def measure(
    config_file: Path,
    found: list[Candidate],
    rounds: int,
    results_root: Path,
    prefix: str,
    report: Callable[[str], None],
) -> tuple[Measured, list[Judged]]:
    """Run `rounds` rounds of the base and every candidate; judge each candidate against the base."""
    sides = [Measured(BASE, ())] + [Measured(c.name, c.overrides) for c in found]
    failures: dict[str, str] = {}
    command = ("train", "--config", str(config_file))
    for index in range(rounds):
        shift = index % len(sides)
        for measured in sides[shift:] + sides[:shift]:
            if measured.name in failures:
                continue
            side = Side(measured.name, measured.overrides)
            plan = RoundsPlan(command, rounds, results_root, side, side, prefix)
            run_id = f"{prefix}-{measured.name}-{index + 1:02d}"
            started = time.monotonic()
            done = run_process(process_argv(plan, side, run_id), None)
            value = _sample(results_root, run_id) if done.returncode == 0 else None
            report(
                f"round {index + 1}/{rounds} {measured.name}: exit {done.returncode} ({time.monotonic() - started:.1f} s)"
            )
            measured.run_ids.append(run_id)
            if value is None:
                said = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
                if measured.name == BASE:
                    raise UserError(f"tune: the base configuration failed ({run_id}): {said}")
                failures[measured.name] = f"{run_id}: exit {done.returncode}: {said}"
                continue
            measured.samples.append(value)
    base = sides[0]
    settings = TestSettings(scope="between processes")
    judged = []
    for candidate, measured in zip(found, sides[1:], strict=True):
        if measured.name in failures:
            judged.append(Judged(candidate, measured, None, failures[measured.name]))
            continue
        change = compare_samples(
            statistics.median(base.samples),
            statistics.median(measured.samples),
            base.samples,
            measured.samples,
            "higher",
            settings,
        )
        judged.append(Judged(candidate, measured, change))
    return base, judged


def best(judged: list[Judged]) -> Judged | None:
    """The candidate with the largest significant gain, or None when none is significantly better."""
    better = [j for j in judged if j.change is not None and j.change.verdict == "better"]
    return max(better, key=lambda j: j.change.ratio if j.change else 0.0, default=None)


def write_best(train: dict[str, Any], winner: Judged | None, path: Path) -> Path:
    """The base `train` section with the winner's overrides applied, as a config file `train --config` reads."""
    section = _plain(train)
    if winner is not None:
        for override in winner.candidate.overrides:
            key, value = override.split("=", 1)
            section[key.removeprefix("train.")] = yaml.safe_load(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"train": section}, sort_keys=False), encoding="utf-8")
    return path
