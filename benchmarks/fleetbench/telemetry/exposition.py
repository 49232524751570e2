"""A Prometheus text exposition read back into a registry, to push or check what was spooled as text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # prometheus_client loads with the first use: `fleetbench --help` and readers need none
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric


class _FamiliesCollector:
    """Serves already-parsed metric families (a spooled exposition) to push_to_gateway."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


def registry_from_exposition(text: str) -> CollectorRegistry:
    """A registry that serves the families of a text exposition as they are (to push a spooled entry)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_FamiliesCollector(text_string_to_metric_families(text)))
    return registry
