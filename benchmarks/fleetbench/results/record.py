"""The result record: one JSON object per line in results/<run_id>/records.jsonl.

Schema (version 1), documented in README.md:
  schema_version  1
  run_id, benchmark, host, device, backend, rank
  status          "ok" | "failed"; error holds the one-line reason when failed
  config          the validated configuration of the benchmark (its own section)
  metrics         every sample the run exported: {name, labels (without the common ones), value}
  headline        the figures a person and `compare` look at first: {metric, labels, value,
                  samples}; each metric is one of the benchmark's HEADLINES in the catalogue,
                  which gives its unit and better direction (absent in older records: empty)
  summary         benchmark-specific details (free-form, JSON values)
  artifacts       files the run wrote, relative to the run folder
  start, end      ISO 8601 UTC; duration_s
  git_revision    commit of the code that ran (+dirty when modified)
  packages        versions of python, fleetbench, torch, numpy, prometheus-client, pydantic
  machine         the machine fingerprint (results/fingerprint.py): CPU and GPU model, driver, torch
                  build, commit, numeric env; empty in records written before it existed
  load            what the machine was doing during the process (results/load.py): load1 at its end,
                  steal_pct during it (null without a steal column), cores; null in older records
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from fleetbench.catalogue import Better, MetricSpec, spec
from fleetbench.results.load import Load


def _null_is_nan(value: Any) -> Any:
    """A figure written as null (jsonio writes NaN and infinities so) reads back as NaN, "not a number"."""
    return math.nan if value is None else value


# A figure as a record holds it: a JSON number (text, true/false are refused: no reader guesses), or
# null for a value that was no number when it was measured, read back as NaN for the readers to refuse.
Figure = Annotated[float, Field(strict=True), BeforeValidator(_null_is_nan)]
# How long a run took: a JSON number, finite and not negative (a writer measures it on a monotonic clock).
Seconds = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]


class MetricSample(BaseModel):
    """One exported sample: series name, its labels besides the common ones, and its value."""

    model_config = ConfigDict(extra="forbid")
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: Figure


class HeadlineFigure(BaseModel):
    """One headline figure: a catalogue metric, the labels that say which (kernel, size, ...), its value,
    and the samples the value summarises (step times, tries' medians) for tests of significance."""

    model_config = ConfigDict(extra="forbid")
    metric: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: Figure
    samples: list[Figure] = Field(default_factory=list)

    @property
    def spec(self) -> MetricSpec:
        """The catalogue entry of the figure's metric."""
        return spec(self.metric)

    @property
    def unit(self) -> str:
        """The figure's unit, from the catalogue."""
        return self.spec.unit

    @property
    def better(self) -> Better | None:
        """Which way the figure improves, from the catalogue; None for figures that only describe."""
        return self.spec.better

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """What makes two figures comparable: the metric and its labels."""
        return self.metric, tuple(sorted(self.labels.items()))


class ResultRecord(BaseModel):
    """One line of records.jsonl: what ran where, how it ended, and what it measured (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    run_id: str
    benchmark: str
    host: str
    device: str
    backend: str
    rank: Annotated[int, Field(strict=True, ge=0)] = 0  # "0", 0.0 and true are no rank
    status: Literal["ok", "failed"]
    error: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: list[MetricSample] = Field(default_factory=list)
    headline: list[HeadlineFigure] = Field(default_factory=list)
    summary: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    start: datetime
    end: datetime
    duration_s: Seconds
    git_revision: str
    packages: dict[str, str]
    machine: dict[str, str] = Field(default_factory=dict)
    load: Load | None = None

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one sample, or None when the run did not export it."""
        for sample in self.metrics:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        return None
