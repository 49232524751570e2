"""A minimal client of Prometheus' HTTP API (instant queries), used by the demo, the report and tests."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from fleetbench.errors import UserError
from fleetbench.urls import url_from


@dataclass(frozen=True)
class Series:
    """One series of an instant query: its labels and value."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class RangeSeries:
    """One series of a range query: its labels and (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


class PromQLError(UserError):
    """Prometheus answered, and rejected the query."""


class PrometheusClient:
    """Queries one Prometheus server; unreachable servers and failed queries raise UserError."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        self.base_url = url_from(base_url, "Prometheus URL", "http://127.0.0.1:9090")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: dict[str, str]) -> Any:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                body = json.load(exc)
            except ValueError:
                raise UserError(f"Prometheus at {self.base_url} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"Prometheus at {self.base_url} is not reachable: {exc}") from None
        if body.get("status") != "success":
            raise PromQLError(f"{params.get('query', path)}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[Series]:
        """Evaluate `expr` now (or at unix time `at`); a scalar result comes back as one unlabelled series."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = self._get("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [Series({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise PromQLError(f"{expr}: expected an instant vector, got {data['resultType']}")
        return [Series(item["metric"], float(item["value"][1])) for item in data["result"]]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[RangeSeries]:
        """Evaluate `expr` every `step_s` seconds from `start` to `end` (unix times)."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        data = self._get("/api/v1/query_range", params)
        if data["resultType"] != "matrix":
            raise PromQLError(f"{expr}: expected a range vector, got {data['resultType']}")
        return [
            RangeSeries(item["metric"], [(float(t), float(v)) for t, v in item["values"]]) for item in data["result"]
        ]

    def wait_for(self, expr: str, timeout_s: float = 30.0, min_series: int = 1) -> list[Series]:
        """Poll until `expr` returns at least `min_series` series (scrapes happen on an interval)."""
        deadline = time.monotonic() + timeout_s
        while True:
            series = self.query(expr)
            if len(series) >= min_series or time.monotonic() > deadline:
                return series
            time.sleep(0.25)

    def ready(self) -> bool:
        """Whether the server answers its readiness endpoint."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/-/ready", timeout=self.timeout_s) as response:
                return bool(response.status == 200)
        except OSError:
            return False
