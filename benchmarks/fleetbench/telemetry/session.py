"""One benchmark run's telemetry from start to end: metrics, pushes, .prom files, the result record."""

from __future__ import annotations

import logging
import resource
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.exposition import write_to_textfile
from pydantic import BaseModel

from fleetbench import __version__
from fleetbench.config.schema import FleetbenchConfig, TelemetryConfig
from fleetbench.fsutil import ensure_writable_dir
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import append_record, default_spool_dir, prepare_run_dir
from fleetbench.runinfo import git_revision, host_name, new_run_id, package_versions, utc_now
from fleetbench.telemetry.catalogue import HEADLINES, spec
from fleetbench.telemetry.push import JOB, BackgroundPusher, PushOutcome, PushPolicy
from fleetbench.telemetry.recorder import MetricRecorder, RunIdentity
from fleetbench.telemetry.spool import Spool

log = logging.getLogger(__name__)


def peak_rss_bytes() -> int:
    """This process's peak resident set size in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB, macOS bytes


def grouping_key(identity: RunIdentity) -> dict[str, str]:
    """The Pushgateway group of one run's rank: each rank's push replaces only its own series."""
    return {
        "benchmark": identity.benchmark,
        "run_id": identity.run_id,
        "instance": identity.host,
        "rank": str(identity.rank),
    }


def open_run(  # noqa: PLR0913 - the jobs of other packages pass device and backend positionally; rank and run_id are keyword-only, for torchrun ranks
    config: FleetbenchConfig,
    benchmark: str,
    settings: BaseModel,
    device: str,
    backend: str,
    *,
    rank: int = 0,
    run_id: str | None = None,
) -> BenchmarkRun:
    """The one way a job opens its run: identity, run id, folder and telemetry from the config.

    `settings` is the job's own config section (recorded with the result); `run_id` overrides the
    config's only where the ranks of one job agreed on it first. Use as `with open_run(...) as run:`,
    then `run.result()` is the record.
    """
    identity = RunIdentity(
        benchmark=benchmark,
        run_id=run_id or config.run.run_id or new_run_id(),
        host=host_name(),
        device=device,
        backend=backend,
        rank=rank,
    )
    return BenchmarkRun(identity, config.run.results_dir, config.telemetry, settings.model_dump(mode="json"))


class BenchmarkRun:
    """Context manager around a benchmark: `with open_run(...) as run: run.metrics.set(...)`."""

    def __init__(
        self,
        identity: RunIdentity,
        results_root: Path,
        telemetry: TelemetryConfig,
        config: dict[str, Any],
    ) -> None:
        self.identity = identity
        self.results_root = results_root
        self.telemetry = telemetry
        self.config = config
        self.run_dir = prepare_run_dir(results_root, identity.run_id)
        if telemetry.textfile_dir is not None:
            ensure_writable_dir(telemetry.textfile_dir, "textfile dir", "--set telemetry.textfile_dir=DIR")
        self.metrics = MetricRecorder(identity)
        self.summary: dict[str, Any] = {}
        self.headline: list[HeadlineFigure] = []
        self.artifacts: list[str] = []
        self.spool = Spool(telemetry.spool_dir or default_spool_dir(results_root))
        self.push_outcome: PushOutcome | None = None
        self.record: ResultRecord | None = None
        self._pusher: BackgroundPusher | None = None
        self._http: Any = None
        self._start = utc_now()
        self._start_monotonic = time.monotonic()

    # --- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> BenchmarkRun:
        self.metrics.set("fleetbench_run_info", 1, version=__version__, git_revision=git_revision())
        self.metrics.set("fleetbench_run_start_timestamp_seconds", self._start.timestamp())
        if self.telemetry.pushgateway:
            self._pusher = BackgroundPusher(
                self.telemetry.pushgateway,
                self.metrics.registry,
                grouping_key(self.identity),
                self.spool,
                PushPolicy(
                    self.telemetry.push_timeout_s,
                    self.telemetry.push_retries,
                    self.telemetry.push_backoff_s,
                    self.telemetry.push_interval_s,
                ),
            )
            self._pusher.submit()
        if self.telemetry.http_port is not None:
            self._http = start_http_server(
                self.telemetry.http_port, self.telemetry.http_addr, registry=self.metrics.registry
            )
        return self

    def step_done(self) -> None:
        """Call after each step (or at any moment worth showing live): pushes in the background."""
        self.metrics.set("fleetbench_run_duration_seconds", time.monotonic() - self._start_monotonic)
        if self._pusher is not None:
            self._pusher.submit()

    def add_artifact(self, path: Path) -> None:
        """List a file the run wrote (inside its run folder) in the record's artifacts."""
        self.artifacts.append(str(path.relative_to(self.run_dir)))

    def add_headline(self, metric: str, value: float, samples: list[float] | None = None, **labels: object) -> None:
        """One headline figure; the metric must be one of this benchmark's HEADLINES, with its own labels."""
        if metric not in HEADLINES.get(self.identity.benchmark, ()):
            raise ValueError(f"{metric} is not a headline metric of {self.identity.benchmark}")
        wanted = set(spec(metric).labels)
        if set(labels) != wanted:
            raise ValueError(f"headline {metric} takes labels {sorted(wanted)}, got {sorted(labels)}")
        self.headline.append(
            HeadlineFigure(
                metric=metric,
                labels={key: str(v) for key, v in labels.items()},
                value=float(value),
                samples=[float(s) for s in samples or []],
            )
        )

    def result(self) -> ResultRecord:
        """The record this run wrote; only once the `with` block has ended."""
        if self.record is None:
            raise RuntimeError(f"run {self.identity.run_id} ({self.identity.benchmark}) has not finished yet")
        return self.record

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.finish(error=None if exc is None else (str(exc) or type(exc).__name__))

    def finish(self, error: str | None = None) -> ResultRecord:
        """End the run once: final metrics, last push (or spool), .prom files, the record appended.

        `error` is the one-line reason of a failed run (None: it succeeded). Later calls return the
        same record.
        """
        if self.record is not None:
            return self.record
        end = utc_now()
        ok = error is None
        duration = time.monotonic() - self._start_monotonic
        self.metrics.set("fleetbench_process_peak_rss_bytes", peak_rss_bytes())
        self.metrics.set("fleetbench_run_end_timestamp_seconds", end.timestamp())
        self.metrics.set("fleetbench_run_duration_seconds", duration)
        self.metrics.set("fleetbench_run_success", 1 if ok else 0)
        if ok:
            self.metrics.set("fleetbench_run_last_success_timestamp_seconds", end.timestamp())
        if self._pusher is not None:
            self.push_outcome = self._pusher.close()
            if self.push_outcome.spooled:
                log.warning(
                    "%s: the final push to %s failed (%s); spooled in %s for `fleetbench metrics flush`",
                    self.identity.benchmark,
                    self._pusher.gateway,
                    self.push_outcome.last_error,
                    self.spool.directory,
                )
        if self._http is not None:
            server, _thread = self._http
            server.shutdown()
        self._write_textfiles()
        self.record = ResultRecord(
            run_id=self.identity.run_id,
            benchmark=self.identity.benchmark,
            host=self.identity.host,
            device=self.identity.device,
            backend=self.identity.backend,
            rank=self.identity.rank,
            status="ok" if ok else "failed",
            error=error,
            config=self.config,
            metrics=self.metrics.samples(),
            headline=self.headline,
            summary=self.summary,
            artifacts=self.artifacts,
            start=self._start,
            end=end,
            duration_s=duration,
            git_revision=git_revision(),
            packages=package_versions(),
        )
        append_record(self.run_dir, self.record)
        return self.record

    def _write_textfiles(self) -> None:
        name = f"{JOB}_{self.identity.benchmark}_rank{self.identity.rank}.prom"
        target = self.run_dir / name
        write_to_textfile(str(target), self.metrics.registry)
        self.add_artifact(target)
        if self.telemetry.textfile_dir is not None:
            # One file per benchmark and rank: node_exporter shows the host's latest run of each.
            write_to_textfile(str(self.telemetry.textfile_dir / name), self.metrics.registry)
