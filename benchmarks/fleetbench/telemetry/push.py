"""Pushgateway pushes that never fail or stall a benchmark.

A push is retried a bounded number of times with exponential backoff and a short timeout; what
still fails is spooled to disk for `fleetbench metrics flush`. During a run, pushes happen on a
background thread that always sends the newest snapshot, so a hung Pushgateway costs a step nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetbench.envvars import PUSHGATEWAY_ENV as PUSHGATEWAY_ENV  # named in envvars; images read it here
from fleetbench.telemetry.exposition import registry_from_exposition
from fleetbench.telemetry.spool import Spool, SpoolEntry
from fleetbench.urls import url_problem

if TYPE_CHECKING:  # prometheus_client loads with the first push: `fleetbench --help` and readers need none
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

JOB = "fleetbench"


@dataclass(frozen=True)
class PushPolicy:
    """How hard to try a push: socket timeout, retries with doubling backoff, and background pacing."""

    timeout_s: float = 2.0
    retries: int = 3
    backoff_s: float = 0.2
    # Least time between two background pushes. Prometheus scrapes every few seconds at best, so
    # pushing every step of a fast loop only burns CPU; the newest state always goes next.
    interval_s: float = 1.0


def push_with_retries(
    gateway: str,
    registry: CollectorRegistry,
    grouping_key: dict[str, str],
    policy: PushPolicy,
    should_stop: Callable[[], bool] = lambda: False,
) -> str | None:
    """Push once plus `policy.retries` retries. Returns None on success, else the last error text."""
    from prometheus_client.exposition import push_to_gateway

    problem = url_problem(gateway)
    if problem is not None:  # e.g. a damaged spool entry: the same URL would fail every retry the same way
        return f"Pushgateway URL {gateway!r} {problem}"
    error = "not attempted"
    for attempt in range(policy.retries + 1):
        if attempt:
            time.sleep(policy.backoff_s * 2 ** (attempt - 1))
            if should_stop():
                break
        try:
            push_to_gateway(gateway, job=JOB, registry=registry, grouping_key=grouping_key, timeout=policy.timeout_s)
            return None
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code} {exc.reason}"
            if 400 <= exc.code < 500:
                log.debug("push to %s refused, not retried: %s", gateway, error)
                break  # the gateway refused the content; retrying sends the same content again
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections are OSErrors
            error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        log.debug("push to %s, attempt %d of %d: %s", gateway, attempt + 1, policy.retries + 1, error)
    return error


@dataclass
class PushOutcome:
    """What a run's pushes came to: counts, whether the final state was spooled, and the last error."""

    pushes_ok: int = 0
    pushes_failed: int = 0
    spooled: bool = False
    last_error: str | None = None


class BackgroundPusher:
    """Pushes a live registry from a worker thread; `close()` makes the final push or spools it."""

    # After a failed push, wait this long before trying the gateway again (spooling meanwhile).
    RETRY_AFTER_S = 10.0

    def __init__(
        self,
        gateway: str,
        registry: CollectorRegistry,
        grouping_key: dict[str, str],
        spool: Spool,
        policy: PushPolicy,
    ) -> None:
        self.gateway = gateway
        self.registry = registry
        self.grouping_key = grouping_key
        self.spool = spool
        self.policy = policy
        self.outcome = PushOutcome()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._down_until = 0.0
        self._last_push = -float("inf")
        self._thread = threading.Thread(target=self._work, name="fleetbench-pusher", daemon=True)
        self._thread.start()

    def submit(self) -> None:
        """Ask for a push of the registry's current state. Never blocks."""
        self._wake.set()

    def _work(self) -> None:
        while not self._closing.is_set():
            self._wake.wait()
            # Closing interrupts the wait; submits that arrive meanwhile fold into this push.
            if self._closing.wait(self._last_push + self.policy.interval_s - time.monotonic()):
                return
            self._wake.clear()
            if time.monotonic() < self._down_until:
                continue  # the final push (or the spool) will carry this state
            self._last_push = time.monotonic()
            self._push_once(should_stop=self._closing.is_set)

    def _push_once(self, should_stop: Callable[[], bool] = lambda: False) -> bool:
        error = push_with_retries(self.gateway, self.registry, self.grouping_key, self.policy, should_stop)
        if error is None:
            self.outcome.pushes_ok += 1
            self._down_until = 0.0
            return True
        self.outcome.pushes_failed += 1
        self.outcome.last_error = error
        self._down_until = time.monotonic() + self.RETRY_AFTER_S
        return False

    def close(self) -> PushOutcome:
        """Final push of the complete state; on failure the state goes to the spool. Bounded in time."""
        self._closing.set()
        self._wake.set()
        # An in-flight push ends within its socket timeout; wait for it so it cannot land after ours.
        self._thread.join(timeout=self.policy.timeout_s + 1.0)
        if self._thread.is_alive() or time.monotonic() < self._down_until:
            # The gateway just failed us: one quick attempt, not the full retry budget again.
            policy = PushPolicy(timeout_s=self.policy.timeout_s, retries=0, backoff_s=0.0)
            error = push_with_retries(self.gateway, self.registry, self.grouping_key, policy)
        else:
            error = push_with_retries(self.gateway, self.registry, self.grouping_key, self.policy)
        if error is None:
            self.outcome.pushes_ok += 1
            return self.outcome
        self.outcome.pushes_failed += 1
        self.outcome.last_error = error
        from prometheus_client.exposition import generate_latest

        entry = SpoolEntry(
            gateway=self.gateway,
            job=JOB,
            grouping_key=self.grouping_key,
            exposition=generate_latest(self.registry).decode(),
            spooled_at=time.time(),
            reason=error,
        )
        # A spool that cannot be written is logged there; the run's .prom file still holds the metrics.
        self.outcome.spooled = self.spool.put(entry) is not None
        return self.outcome


@dataclass
class FlushReport:
    """What `flush_spool` delivered, what stays spooled, and why each of those failed."""

    delivered: int = 0
    failed: int = 0
    errors: list[str] | None = None


def flush_spool(spool: Spool, policy: PushPolicy, gateway: str | None = None) -> FlushReport:
    """Push every spooled entry (to its own gateway, or `gateway`); remove only those accepted."""
    report = FlushReport(errors=[])
    for path, entry in spool.entries():
        target = gateway or entry.gateway
        error = push_with_retries(target, registry_from_exposition(entry.exposition), entry.grouping_key, policy)
        if error is None:
            spool.remove(path)
            report.delivered += 1
        else:
            report.failed += 1
            assert report.errors is not None
            report.errors.append(f"{path.name} -> {target}: {error}")
    return report
