"""One benchmark run's telemetry from start to end: metrics, pushes, .prom files, the result record."""

from __future__ import annotations

import atexit
import errno
import logging
import resource
import shlex
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.exposition import write_to_textfile
from pydantic import BaseModel

from fleetbench import __version__
from fleetbench.catalogue import HEADLINES, spec
from fleetbench.config.schema import FleetbenchConfig, TelemetryConfig
from fleetbench.errors import UserError
from fleetbench.fsutil import ensure_writable_dir
from fleetbench.job import RunContext
from fleetbench.results.fingerprint import machine_fingerprint
from fleetbench.results.load import cpu_times, load_between
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import DEFAULT_RESULTS_DIR, append_record, default_spool_dir, prepare_run_dir
from fleetbench.runinfo import git_revision, host_name, package_versions, utc_now
from fleetbench.telemetry.push import JOB, BackgroundPusher, PushOutcome, PushPolicy
from fleetbench.telemetry.recorder import MetricRecorder, RunIdentity
from fleetbench.telemetry.spool import Spool, check_spool_dir

log = logging.getLogger(__name__)


@dataclass
class _Spooled:
    """The groups this process spooled for one gateway into one spool folder, and the last push error."""

    groups: set[tuple[tuple[str, str], ...]] = field(default_factory=set)
    error: str = ""


# (spool folder, gateway) -> what this process spooled there, until it is announced (see _note_spooled).
_SPOOLED: dict[tuple[Path, str], _Spooled] = {}


def spooled_notices() -> list[str]:
    """One line per spool folder and gateway: how many groups wait there and the command that delivers them."""
    lines = []
    for (directory, gateway), spooled in _SPOOLED.items():
        count = len(spooled.groups)
        groups = "1 metric group" if count == 1 else f"{count} metric groups"
        words = ["fleetbench", "metrics", "flush", "--spool-dir", str(directory), "--pushgateway", gateway]
        command = f"`{shlex.join(words)}`"
        if directory == default_spool_dir(DEFAULT_RESULTS_DIR):
            command += " (or `make flush`)"
        lines.append(
            f"the Pushgateway {gateway} did not take {groups} ({spooled.error}); spooled in {directory}, "
            f"deliver with {command} once it is up"
        )
    return lines


def _announce_spooled() -> None:
    """The spool notices as warnings (under the CLI at exit, after everything else the process printed)."""
    for line in spooled_notices():
        log.warning("%s", line)
    _SPOOLED.clear()


def _note_spooled(directory: Path, gateway: str, group: dict[str, str], error: str) -> None:
    """Count a spooled group. Under the CLI (its logging is set up) one notice comes at exit, after the
    job's own output; a library caller (a test, a notebook) gets it now, at the end of the run."""
    cli = bool(logging.getLogger("fleetbench").handlers)
    if cli and not _SPOOLED:
        atexit.register(_announce_spooled)
    spooled = _SPOOLED.setdefault((directory, gateway), _Spooled())
    spooled.groups.add(tuple(sorted(group.items())))
    spooled.error = error
    if not cli:
        _announce_spooled()


def _bind_message(addr: str, port: int, exc: OSError) -> str:
    """What a failed bind of the /metrics server means, and what to set instead."""
    where = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
    other_port = "set another port with --set telemetry.http_port=PORT, or 0 for any free port"
    if exc.errno == errno.EADDRINUSE:
        return f"telemetry.http_port: {where} is already in use; {other_port}"
    if exc.errno == errno.EACCES:
        return f"telemetry.http_port: {where}: permission denied (ports below 1024 need root); {other_port}"
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"telemetry.http_addr: cannot listen on {addr!r} ({exc.strerror or exc}); "
            "use an address of this host, e.g. 127.0.0.1 (the default) or 0.0.0.0 (every interface)"
        )
    return f"telemetry: cannot serve /metrics on {where} ({exc.strerror or exc}); {other_port}"


def start_metrics_server(addr: str, port: int, registry: Any) -> tuple[Any, Any]:
    """Serve `registry` on http://addr:port/metrics (port 0: any free one); a bind failure is a UserError."""
    try:
        server, thread = start_http_server(port, addr, registry=registry)
    except OSError as exc:
        raise UserError(_bind_message(addr, port, exc)) from None
    bound = server.server_address[1]
    host = f"[{addr}]" if ":" in addr else addr
    log.info("metrics served on http://%s:%d/metrics while the run lasts", host, bound)
    return server, thread


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


def open_run(  # noqa: PLR0913 - the jobs of other packages pass device and backend positionally; rank is keyword-only, for torchrun ranks
    config: FleetbenchConfig,
    context: RunContext,
    benchmark: str,
    settings: BaseModel,
    device: str,
    backend: str,
    *,
    rank: int = 0,
) -> BenchmarkRun:
    """The one way a job opens its run: identity and folder from the run context, telemetry from the config.

    `settings` is the job's own config section (recorded with the result). Use as
    `with open_run(...) as run:`, then `run.result()` is the record.
    """
    identity = RunIdentity(
        benchmark=benchmark,
        run_id=context.run_id,
        host=host_name(),
        device=device,
        backend=backend,
        rank=rank,
    )
    return BenchmarkRun(identity, context.results_dir, config.telemetry, settings.model_dump(mode="json"))


FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}  # the disk (or the file size limit) is full


def _write_textfile(path: Path, metrics: MetricRecorder) -> None:
    """The metrics as a node_exporter textfile at `path`, written whole or not at all (prometheus_client
    writes a temporary file beside it and renames it); a failure is one line naming the folder."""
    try:
        write_to_textfile(str(path), metrics.registry)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in FULL_ERRNOS:
            raise UserError(
                f"{path.parent}: no space for the metrics file {path.name} ({reason}); any earlier copy of it "
                "is as it was: free space (or raise the file size limit) and run again"
            ) from None
        raise UserError(f"{path.parent}: cannot write the metrics file {path.name} ({reason})") from None


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
        # Made when the run starts, once /metrics is up: a run refused at the start leaves no folder.
        self.run_dir = results_root / identity.run_id
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
        self._cpu_times_at_start = cpu_times()

    # --- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> BenchmarkRun:
        """Check the telemetry targets, start /metrics, make the run folder, then start pushing."""
        if self.telemetry.pushgateway:
            check_spool_dir(self.spool.directory, "telemetry.spool_dir")
        if self.telemetry.http_port is not None:
            self._http = start_metrics_server(self.telemetry.http_addr, self.telemetry.http_port, self.metrics.registry)
        try:
            if self.telemetry.textfile_dir is not None:
                ensure_writable_dir(self.telemetry.textfile_dir, "textfile dir", "--set telemetry.textfile_dir=DIR")
            self.run_dir = prepare_run_dir(self.results_root, self.identity.run_id)
        except BaseException:
            self._stop_http()
            raise
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
        return self

    def _stop_http(self) -> None:
        if self._http is not None:
            server, _thread = self._http
            server.shutdown()
            server.server_close()  # frees the port now, for the next run of this process
            self._http = None

    def step_done(self) -> None:
        """Call after each step (or at any moment worth showing live): pushes in the background."""
        self.metrics.set("fleetbench_run_duration_seconds", time.monotonic() - self._start_monotonic)
        self.metrics.set("fleetbench_last_step_timestamp_seconds", time.time())
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
                # One warning for all of this process's runs comes at exit, after what the job prints.
                log.debug(
                    "%s: the final push to %s failed (%s); spooled in %s",
                    self.identity.benchmark,
                    self._pusher.gateway,
                    self.push_outcome.last_error,
                    self.spool.directory,
                )
                _note_spooled(
                    self.spool.directory,
                    self._pusher.gateway,
                    grouping_key(self.identity),
                    self.push_outcome.last_error or "not accepted",
                )
        self._stop_http()
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
            machine=machine_fingerprint(self.identity.host, git_revision()),
            load=load_between(self._cpu_times_at_start, cpu_times()),
        )
        append_record(self.run_dir, self.record)
        return self.record

    def _write_textfiles(self) -> None:
        name = f"{JOB}_{self.identity.benchmark}_rank{self.identity.rank}.prom"
        target = self.run_dir / name
        _write_textfile(target, self.metrics)
        self.add_artifact(target)
        if self.telemetry.textfile_dir is not None:
            # One file per benchmark and rank: node_exporter shows the host's latest run of each.
            _write_textfile(self.telemetry.textfile_dir / name, self.metrics)
