"""Run-to-run noise of a machine class, measured once (`fleetbench noise`), and the minimum change it implies.

`fleetbench noise` runs the same configuration in 2 x N separate processes, interleaved like an A/A
comparison, and keeps, for each headline figure, the spread of the per-process figures as a factor:
1.4826 x MAD of their logs, in percent (the MAD ignores the odd process that a neighbour slowed
down, as a standard deviation would not), of the per-process medians and of the per-process best
samples. It is filed per **machine class**, not per host: the CPU model and the cores a process may
use, the GPU model, count and driver (`results/calibration/noise-<class key>.json`), so ephemeral CI
runners of one kind share it; a baseline set on that class keeps it.

The gate's minimum change of a figure follows from it (the documented rule, `bar_pct`; `noise`
prints exactly this bar, from the same function):

    min change = (exp(max(ln(1 + compare.min_change_pct/100), k x noise/100 x sqrt(2/n))) - 1) x 100

noise being the figure's noise for the process summary compare uses (compare.process_summary: the
best sample's by default), k compare.noise_factor (2: near a 95 % band of the difference of two
means of n processes' logs), n the processes per side (1 for a single pair of runs, whose steps
cannot see this noise at all). Changes are factors: the bar is the same for a rate and for a time.
Without a calibration the minimum is compare.min_change_pct (1 %) and compare says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleetbench import jsonio
from fleetbench.compare.statistics import Summary, TestSettings, summarise
from fleetbench.errors import UserError
from fleetbench.fsutil import write_text_atomic
from fleetbench.results.record import ResultRecord
from fleetbench.runinfo import utc_now

CALIBRATION_FOLDER = "calibration"
MAD_TO_SIGMA = 1.4826  # MAD x this estimates the standard deviation of normal data
MAX_NOISE_PCT = 1000  # a noise beyond this (% of the figure) is no calibration's: it would hide every change

FigureKey = tuple[str, str, tuple[tuple[str, str], ...]]  # benchmark, metric, sorted labels


@dataclass(frozen=True)
class NoiseFigure:
    """One headline figure's run-to-run noise: per-process medians' robust CV, in percent."""

    benchmark: str
    metric: str
    labels: dict[str, str]
    noise_pct: float
    processes: int
    median: float
    best_noise_pct: float | None = None  # the same of each process's best sample (compare.process_summary=best)

    def key(self) -> FigureKey:
        """What a figure of a comparison is looked up by."""
        return self.benchmark, self.metric, tuple(sorted(self.labels.items()))


@dataclass(frozen=True)
class Calibration:
    """The noise of one machine: its fingerprint, when and how it was measured, each figure's noise."""

    machine: dict[str, str]
    set_at: str
    command: list[str]
    processes: int
    figures: list[NoiseFigure] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The machine class key the calibration is filed under."""
        return class_key(self.machine)

    def lookup(self) -> dict[FigureKey, NoiseFigure]:
        """The figures by key."""
        return {f.key(): f for f in self.figures}

    def to_json(self) -> dict[str, Any]:
        """The calibration as plain data (for its file and for a baseline)."""
        return asdict(self)


def robust_cv_pct(values: Sequence[float]) -> float:
    """The spread of positive values as a factor: 1.4826 x MAD of their logs, in percent (inf with a zero)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if len(data) == 0 or float(np.max(data)) <= 0:
        return 0.0
    if float(np.min(data)) <= 0:
        return math.inf
    logs = np.log(data)  # each value's own log: a ratio of a denormal to 1e308 would underflow to 0
    return MAD_TO_SIGMA * float(np.median(np.abs(logs - np.median(logs)))) * 100.0


# What makes machines alike for their noise: a CI runner of the same kind has the same class.
CLASS_KEYS = ("cpu_model", "cpu_count", "gpu_model", "gpu_count", "gpu_driver")


def class_key(fingerprint: Mapping[str, str]) -> str:
    """A short stable id of the machine class (CLASS_KEYS of the fingerprint, never the host name)."""
    import hashlib

    text = "\n".join(f"{key}={fingerprint.get(key, '')}" for key in CLASS_KEYS)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def describe_class(fingerprint: Mapping[str, str]) -> str:
    """The machine class in words: CPU model and cores, GPU, count and driver where present."""
    text = f"{fingerprint.get('cpu_model', '?')} x{fingerprint.get('cpu_count', '?')}"
    if fingerprint.get("gpu_model"):
        text += f", {fingerprint.get('gpu_count', '1')} x {fingerprint['gpu_model']} (driver {fingerprint.get('gpu_driver', '?')})"
    return text


def process_summaries(processes: Iterable[Sequence[ResultRecord]], how: Summary) -> dict[FigureKey, list[float]]:
    """Each figure's per-process summaries: the median (or best) of each process's samples."""
    out: dict[FigureKey, list[float]] = {}
    for records in processes:
        for record in records:
            if record.status != "ok" or record.rank != 0:
                continue
            for figure in record.headline:
                key = (record.benchmark, figure.metric, tuple(sorted(figure.labels.items())))
                out.setdefault(key, []).append(summarise(figure.samples or [figure.value], figure.better, how))
    return out


def estimate(processes: Sequence[Sequence[ResultRecord]], machine: dict[str, str], command: list[str]) -> Calibration:
    """The calibration of figures measured in `processes` (each a process's records) of one machine."""
    best = process_summaries(processes, "best")
    figures = []
    for (benchmark, metric, labels), medians in process_summaries(processes, "median").items():
        if len(medians) < 3:
            continue  # a spread of two is no estimate
        median = summarise(medians, None, "median")
        figures.append(NoiseFigure(benchmark, metric, dict(labels), robust_cv_pct(medians), len(medians), median,
                                   robust_cv_pct(best[(benchmark, metric, labels)])))  # fmt: skip
    return Calibration(machine, utc_now().isoformat(), command, len(processes), figures)


def calibration_path(results_root: Path, key: str) -> Path:
    """The file of machine `key`'s calibration."""
    return results_root / CALIBRATION_FOLDER / f"noise-{key}.json"


def parse(data: Mapping[str, Any]) -> Calibration:
    """A calibration from its plain data; KeyError, TypeError or ValueError when it is not one.

    The one rule for a calibration: `store` applies it to what it is about to write, `read` to what
    it finds, so nothing is filed that compare would refuse later."""
    if not isinstance(data, Mapping) or not isinstance(data.get("figures"), list):
        raise ValueError("not an object with a list of figures")
    figures = [NoiseFigure(**figure) for figure in data["figures"]]
    for figure in figures:
        _check_figure(figure)
    processes = data["processes"]
    if type(processes) is not int or processes < 1:
        raise ValueError(f"processes {processes!r}; accepted: a whole number >= 1")
    machine = data["machine"]
    if not isinstance(machine, Mapping) or not all(isinstance(v, str) for v in machine.values()):
        raise ValueError(f"machine {str(machine)[:60]!r}; accepted: an object of texts (the machine fingerprint)")
    return Calibration(dict(machine), str(data["set_at"]), list(data["command"]), processes, figures)


def _check_figure(figure: NoiseFigure) -> None:
    """ValueError naming the first field of `figure` no calibration of `estimate` holds."""
    if not isinstance(figure.labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in figure.labels.items()
    ):
        raise ValueError(f"labels {str(figure.labels)[:60]!r} of {figure.metric}; accepted: an object of texts")
    for name in ("noise_pct", "best_noise_pct"):
        pct = getattr(figure, name)
        if name == "best_noise_pct" and pct is None:
            continue
        if type(pct) not in (int, float) or not 0 <= pct <= MAX_NOISE_PCT:
            raise ValueError(f"{name} {pct!r} of {figure.metric}; accepted: a number in 0-{MAX_NOISE_PCT}")
    if type(figure.processes) is not int or figure.processes < 3:
        raise ValueError(f"processes {figure.processes!r} of {figure.metric}; accepted: a whole number >= 3")
    median = figure.median
    if type(median) not in (int, float) or not 0 <= median < math.inf:
        raise ValueError(f"median {median!r} of {figure.metric}; accepted: a finite number, 0 or above")


def merged(old: Calibration | None, new: Calibration) -> Calibration:
    """`new`, keeping the figures of `old` that `new` did not measure (another benchmark or size)."""
    if old is None:
        return new
    kept = [f for key, f in old.lookup().items() if key not in new.lookup()]
    return Calibration(new.machine, new.set_at, new.command, new.processes, kept + new.figures)


def store(results_root: Path, calibration: Calibration) -> Path:
    """File the calibration under its machine key (atomically), merged with what is there."""
    path = calibration_path(results_root, calibration.key)
    try:
        old = read(path)
    except UserError:
        old = None  # a damaged file is replaced, not merged
    text = jsonio.dumps(merged(old, calibration).to_json(), indent=1) + "\n"
    try:  # what compare would read back: a figure it would refuse is refused here, and nothing is filed
        parse(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"noise: the calibration of {describe_class(calibration.machine)} is not filed: {str(exc)[:160]} "
            "(compare could not read it); run fleetbench noise again on a quiet machine, with figures above 0"
        ) from None
    write_text_atomic(path, text, "noise calibration")
    return path


def read(path: Path) -> Calibration | None:
    """The calibration in `path`, None when there is none; a damaged file is a UserError naming it."""
    if not path.is_file():
        return None
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except RecursionError:
        raise UserError(f"{path}: not a noise calibration (nested too deeply); run fleetbench noise again") from None
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as exc:
        raise UserError(f"{path}: not a noise calibration ({str(exc)[:160]}); run fleetbench noise again") from None


def for_machine(results_root: Path, fingerprint: Mapping[str, str]) -> Calibration | None:
    """The calibration of this machine's class under `results_root`, if one was made."""
    if not fingerprint:
        return None
    return read(calibration_path(results_root, class_key(fingerprint)))


def min_change_pct(floor_pct: float, factor: float, noise_pct: float | None, processes: int) -> float:
    """The documented rule on the log scale: the larger of the floor and k x noise x sqrt(2 / n), as factors."""
    floor = math.log1p(floor_pct / 100.0)
    if noise_pct is None:
        return floor_pct
    bar = max(floor, factor * noise_pct / 100.0 * math.sqrt(2.0 / max(1, processes)))
    return math.expm1(min(bar, 700.0)) * 100.0


def figure_noise(entry: NoiseFigure | None, summary: Summary, between_processes: bool) -> float | None:
    """The noise a comparison uses for a figure: the best sample's between processes summarised by their best."""
    if entry is None:
        return None
    if between_processes and summary == "best" and entry.best_noise_pct is not None:
        return entry.best_noise_pct
    return entry.noise_pct


def bar_pct(entry: NoiseFigure | None, settings: TestSettings, factor: float, processes: int) -> float:
    """The minimum change compare applies to a figure: `noise` prints it from this same function."""
    noise = figure_noise(entry, settings.process_summary, settings.scope == "between processes")
    return min_change_pct(settings.min_change_pct, factor, noise, processes)
