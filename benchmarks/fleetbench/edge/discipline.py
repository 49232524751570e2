"""Device-farm discipline around each measurement: a cooldown back to the idle temperature, the thermal
state just before and just after the tries, and whether anything throttled in between.

The idle baseline is read once, before the first kernel (`Watch.start`); every kernel and model then
gets `Watch.around`, which cools down, reads, runs the measurement, and reads again. Readings sit
outside the timed tries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fleetbench.config.schema import EdgeConfig
from fleetbench.edge.thermal import (
    Cooldown,
    CooldownRule,
    ThermalState,
    clock_drops,
    cool_down,
    read_state,
    throttling_between,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class ThermalRecord:
    """One measurement's thermal story: the cooldown before it, the states around it, throttling seen."""

    cooldown: Cooldown
    before: ThermalState
    after: ThermalState
    throttle_reasons: list[str]
    moving: frozenset[str] | None = None  # sensor keys that changed over the run's readings so far

    @property
    def throttled(self) -> bool | None:
        """True: an indicator said "slowed down" before or after; False: indicators said not; None: none read."""
        if not self.before.throttles and not self.after.throttles:
            return None
        return bool(self.throttle_reasons)

    @property
    def warnings(self) -> list[str]:
        """The cooldown's timeout warning and the throttling, each one line."""
        out = [self.cooldown.warning] if self.cooldown.warning else []
        if self.throttle_reasons:
            out.append("throttled during the measurement: " + "; ".join(self.throttle_reasons))
        return out

    def summary(self) -> dict[str, Any]:
        """The compact figures beside a result: hottest sensor before and after, throttling, the cooldown."""
        hot_before, hot_after = self.before.hottest(self.moving), self.after.hottest(self.moving)
        hottest = hot_after or hot_before
        return {
            "celsius_before": hot_before.celsius if hot_before else None,
            "celsius_after": hot_after.celsius if hot_after else None,
            "hottest_sensor": hottest.key if hottest else None,
            "hottest_moves": bool(hottest and self.moving and hottest.key in self.moving),
            "throttled": self.throttled,
            "throttle_reasons": self.throttle_reasons,
            "cooldown": self.cooldown.as_dict(),
        }

    def as_dict(self) -> dict[str, Any]:
        """The summary plus both full states (every sensor and indicator, and the absent sources)."""
        return {**self.summary(), "before": self.before.as_dict(), "after": self.after.as_dict()}


@dataclass
class Watch:
    """The thermal sources of a run, its idle baseline and the cooldown rule."""

    sources: tuple[str, ...]
    root: Path
    rule: CooldownRule
    baseline: ThermalState
    records: list[ThermalRecord] = field(default_factory=list)
    # the highest each clock read right after a measurement, to see a later one fall (thermal.clock_drops)
    clock_peaks: dict[str, float] = field(default_factory=dict)
    # every sensor's lowest and highest reading in the run: one that never changed is not heating up
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)

    def _seen(self, state: ThermalState) -> None:
        for s in state.sensors:
            low, high = self.ranges.get(s.key, (s.celsius, s.celsius))
            self.ranges[s.key] = (min(low, s.celsius), max(high, s.celsius))

    @property
    def moving(self) -> frozenset[str]:
        """The sensors whose reading changed over the run so far (Jetson's constant PMIC@50C never does)."""
        return frozenset(key for key, (low, high) in self.ranges.items() if high > low)

    @classmethod
    def start(cls, cfg: EdgeConfig) -> Watch:
        """Read the idle baseline now; log the sources that are absent, once."""
        sources = tuple(cfg.thermal_sources)
        baseline = read_state(sources, cfg.thermal_root)
        for source, why in baseline.absent.items():
            log.debug("thermal source %s absent: %s", source, why)
        rule = CooldownRule(
            cfg.cooldown_s, cfg.cooldown_margin_c, cfg.cooldown_timeout_s, cfg.cooldown_poll_s, cfg.cooldown_target_c
        )
        watch = cls(sources, cfg.thermal_root, rule, baseline)
        watch._seen(baseline)
        return watch

    def read(self) -> ThermalState:
        """One reading of the run's sources (remembered, to tell the sensors that move)."""
        state = read_state(self.sources, self.root)
        self._seen(state)
        return state

    def around(
        self, measure: Callable[[], T], on_cooldown: Callable[[], None] | None = None
    ) -> tuple[T, ThermalRecord]:
        """Cool down, read, measure, read again; the measurement's value and its thermal record."""
        if on_cooldown is not None:
            on_cooldown()
        cooled = cool_down(self.baseline, self.read, self.rule, moving=self.moving or None)
        before = self.read()
        value = measure()
        after = self.read()
        reasons = throttling_between(before, after) + clock_drops(after, self.clock_peaks)
        record = ThermalRecord(cooled, before, after, reasons, self.moving)
        for warning in record.warnings:
            log.warning(warning)
        self.records.append(record)
        return value, record

    def summary(self, end: ThermalState) -> dict[str, Any]:
        """The run's thermal section: sources, the absent ones with why, baseline and end states, timeouts."""
        return {
            "sources": list(self.sources),
            "root": str(self.root),
            "absent": dict(self.baseline.absent),
            "baseline": self.baseline.as_dict(),
            "end": end.as_dict(),
            "cooldown_rule": vars(self.rule),
            "cooldown_timeouts": sum(1 for r in self.records if r.cooldown.warning),
        }
