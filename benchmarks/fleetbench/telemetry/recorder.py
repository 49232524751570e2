"""Record metric values for one run and rank into a prometheus-client registry, by catalogue name."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.exposition import generate_latest

from fleetbench.catalogue import COMMON_LABELS, spec

# `_created` series double every counter and histogram and no dashboard reads them.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in prometheus_client


@dataclass(frozen=True)
class RunIdentity:
    """The common labels of every series a run writes."""

    benchmark: str
    run_id: str
    host: str
    device: str
    backend: str
    rank: int = 0

    def labels(self) -> dict[str, str]:
        """The common labels as Prometheus label values, in COMMON_LABELS order."""
        values = {
            "benchmark": self.benchmark,
            "run_id": self.run_id,
            "host": self.host,
            "device": self.device,
            "backend": self.backend,
            "rank": str(self.rank),
        }
        assert tuple(values) == COMMON_LABELS
        return values


_KINDS: dict[str, type[Any]] = {"gauge": Gauge, "counter": Counter, "histogram": Histogram, "summary": Summary}


class MetricRecorder:
    """One registry per run and rank. Only catalogue metrics, only their declared labels."""

    def __init__(self, identity: RunIdentity) -> None:
        self.identity = identity
        self.registry = CollectorRegistry(auto_describe=True)
        self._metrics: dict[str, Any] = {}
        self._children: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        self._lock = threading.Lock()

    def _child(self, name: str, labels: dict[str, object]) -> Any:
        key = (name, tuple(sorted((k, str(v)) for k, v in labels.items())))
        child = self._children.get(key)
        if child is None:  # first use of this series: validate against the catalogue once
            child = self._new_child(name, labels)
            self._children[key] = child
        return child

    def _new_child(self, name: str, labels: dict[str, object]) -> Any:
        metric_spec = spec(name)
        if set(labels) != set(metric_spec.labels):
            raise ValueError(f"metric {name} takes labels {sorted(metric_spec.labels)}, got {sorted(labels)}")
        with self._lock:
            metric = self._metrics.get(name)
            if metric is None:
                kwargs: dict[str, Any] = {"registry": self.registry, "labelnames": metric_spec.label_names}
                if metric_spec.kind == "histogram" and metric_spec.buckets:
                    kwargs["buckets"] = metric_spec.buckets
                metric = _KINDS[metric_spec.kind](name, metric_spec.help, **kwargs)
                self._metrics[name] = metric
        values = {**self.identity.labels(), **{key: str(value) for key, value in labels.items()}}
        return metric.labels(**values)

    def set(self, name: str, value: float, **labels: object) -> None:
        """Set a gauge of the catalogue; `labels` are its own labels (the common ones come from the identity)."""
        self._child(name, labels).set(value)

    def inc(self, name: str, amount: float = 1.0, **labels: object) -> None:
        """Add `amount` to a counter of the catalogue."""
        self._child(name, labels).inc(amount)

    def observe(self, name: str, value: float, **labels: object) -> None:
        """Record one observation in a histogram or summary of the catalogue."""
        self._child(name, labels).observe(value)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    def samples(self) -> list[dict[str, Any]]:
        """Every sample as {name, labels, value}, common labels left out (the record holds them once)."""
        common = set(self.identity.labels())
        out = []
        for family in self.registry.collect():
            for sample in family.samples:
                out.append(
                    {
                        "name": sample.name,
                        "labels": {k: v for k, v in sample.labels.items() if k not in common},
                        "value": sample.value,
                    }
                )
        return out
