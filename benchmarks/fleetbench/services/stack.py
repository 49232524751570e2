"""A local Prometheus and Pushgateway on loopback: real binaries, started and stopped by the suite.

The demo leaves them running for a person to look at; tests start their own on free ports.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from fleetbench.envvars import PROMETHEUS_PORT_ENV, PUSHGATEWAY_PORT_ENV, STATE_DIR_ENV
from fleetbench.errors import UserError
from fleetbench.fsutil import ensure_writable_dir

LOOPBACK = "127.0.0.1"
DEFAULT_PROMETHEUS_PORT = 19090
DEFAULT_PUSHGATEWAY_PORT = 19091
BINARIES = {"prometheus": ("prometheus",), "pushgateway": ("prometheus-pushgateway", "pushgateway")}
PORT_ENVS = {"prometheus": PROMETHEUS_PORT_ENV, "pushgateway": PUSHGATEWAY_PORT_ENV}
DEFAULT_STATE_DIR = Path(".fleetbench")

log = logging.getLogger(__name__)


def find_binary(service: str) -> str:
    """The path of the service's binary (on PATH or in /usr/bin); UserError when not installed."""
    for name in BINARIES[service]:
        path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if path:
            return path
    raise UserError(
        f"{service} binary not found (looked for {', '.join(BINARIES[service])}); "
        "run `make setup` (installs Debian packages prometheus and prometheus-pushgateway)"
    )


def free_port() -> int:
    """A loopback port nothing listens on right now (tests start their own services there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Whether something accepts connections on the loopback `port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((LOOPBACK, port)) == 0


def http_ready(url: str) -> bool:
    """Whether `url` answers HTTP 200 within a second."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return bool(response.status == 200)
    except OSError:
        return False


STATUS_PATHS = {"prometheus": "/api/v1/status/buildinfo", "pushgateway": "/api/v1/status"}


def speaks_like(service: str, url: str) -> bool:
    """Whether what listens at `url` answers the status API of `service`."""
    try:
        with urllib.request.urlopen(f"{url}{STATUS_PATHS[service]}", timeout=1.0) as response:
            return bool(json.load(response).get("status") == "success")
    except (OSError, ValueError, AttributeError):
        return False


ALERT_RULES = "alert_rules.yml"


def alert_rules_text() -> str:
    """The suite's alert rules (fleetbench/services/alert_rules.yml), as the deploy installs them too."""
    return resources.files("fleetbench.services").joinpath(ALERT_RULES).read_text(encoding="utf-8")


def prometheus_config(
    prometheus_port: int, pushgateway_port: int, scrape_interval_s: float, rule_files: tuple[str, ...] = ()
) -> dict[str, object]:
    """prometheus.yml of the local stack: scrape the Pushgateway (keeping pushed labels) and Prometheus itself,
    and evaluate `rule_files` (the suite's alert rules)."""
    interval = f"{round(scrape_interval_s * 1000)}ms"  # Prometheus durations take whole units
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": list(rule_files),
        "scrape_configs": [
            # honor_labels keeps the pushed job/instance/run labels instead of the gateway's own.
            {
                "job_name": "pushgateway",
                "honor_labels": True,
                "static_configs": [{"targets": [f"{LOOPBACK}:{pushgateway_port}"]}],
            },
            {"job_name": "prometheus", "static_configs": [{"targets": [f"{LOOPBACK}:{prometheus_port}"]}]},
        ],
    }


@dataclass
class LocalStack:
    """Prometheus and Pushgateway on loopback ports, with pid files, config and logs in `state_dir`.

    `adopted` names the services found already running on the agreed ports and reused, not started.
    """

    state_dir: Path
    prometheus_port: int = DEFAULT_PROMETHEUS_PORT
    pushgateway_port: int = DEFAULT_PUSHGATEWAY_PORT
    scrape_interval_s: float = 1.0
    adopted: set[str] = field(default_factory=set)

    @property
    def prometheus_url(self) -> str:
        """Base URL of this stack's Prometheus."""
        return f"http://{LOOPBACK}:{self.prometheus_port}"

    @property
    def pushgateway_url(self) -> str:
        """Base URL of this stack's Pushgateway."""
        return f"http://{LOOPBACK}:{self.pushgateway_port}"

    def _pid_file(self, service: str) -> Path:
        return self.state_dir / f"{service}.pid"

    def _pid(self, service: str) -> int | None:
        try:
            pid = int(self._pid_file(service).read_text())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def running(self, service: str) -> bool:
        """Whether this stack started `service` and it answers as ready."""
        url = self.prometheus_url if service == "prometheus" else self.pushgateway_url
        return self._pid(service) is not None and http_ready(f"{url}/-/ready")

    def up(self, timeout_s: float = 30.0) -> LocalStack:
        """Start whichever service is not running (each within `timeout_s`); UserError when one cannot start."""
        remedy = f"point {STATE_DIR_ENV} at a writable folder (default {DEFAULT_STATE_DIR})"
        ensure_writable_dir(self.state_dir, "the stack's state folder", STATE_DIR_ENV, remedy=remedy)
        self.check_ports()  # both ports before either service starts: no stack left half up
        self._start(
            "pushgateway",
            [
                find_binary("pushgateway"),
                f"--web.listen-address={LOOPBACK}:{self.pushgateway_port}",
                # Debian's build persists to /var/lib/prometheus/pushgateway.data by default, which every
                # gateway on the machine would share (and reload at start): each stack keeps its own.
                f"--persistence.file={self.state_dir / 'pushgateway.data'}",
            ],
            self.pushgateway_url,
            timeout_s,
        )
        config_path = self.state_dir / "prometheus.yml"
        rules_path = self.state_dir / ALERT_RULES
        rules_path.write_text(alert_rules_text(), encoding="utf-8")
        config = prometheus_config(
            self.prometheus_port, self.pushgateway_port, self.scrape_interval_s, rule_files=(str(rules_path),)
        )
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self._start(
            "prometheus",
            [
                find_binary("prometheus"),
                f"--config.file={config_path}",
                f"--storage.tsdb.path={self.state_dir / 'prometheus-data'}",
                f"--web.listen-address={LOOPBACK}:{self.prometheus_port}",
                "--web.enable-lifecycle",
            ],
            self.prometheus_url,
            timeout_s,
        )
        return self

    def check_ports(self) -> None:
        """A UserError when a port of the stack is held by a program that is not the service meant for it."""
        for service in ("pushgateway", "prometheus"):
            self._refuse_taken(service)

    def _refuse_taken(self, service: str) -> None:
        """A UserError when `service`'s port is held by a program that is not that service."""
        url = self.prometheus_url if service == "prometheus" else self.pushgateway_url
        port = self.prometheus_port if service == "prometheus" else self.pushgateway_port
        if self.running(service) or not port_in_use(port) or speaks_like(service, url):
            return
        raise UserError(
            f"port {port} on {LOOPBACK} is taken by another program, so {service} cannot start there; "
            f"free it or choose another port ({PORT_ENVS[service]})"
        )

    def _start(self, service: str, argv: list[str], url: str, timeout_s: float) -> None:
        if self.running(service):
            log.debug("%s already running at %s", service, url)
            return
        port = self.prometheus_port if service == "prometheus" else self.pushgateway_port
        if port_in_use(port) and speaks_like(service, url):
            # Started by another checkout or by hand: the same service on the agreed port serves as well.
            self.adopted.add(service)
            log.info("reusing the %s already running at %s", service, url)
            return
        if port_in_use(port):
            raise UserError(
                f"port {port} on {LOOPBACK} is taken by another program, so {service} cannot start there; "
                f"free it or choose another port ({PORT_ENVS[service]})"
            )
        log_path = self.state_dir / f"{service}.log"
        with log_path.open("ab") as log_file:
            # A session of its own: the service outlives the command that started it (the demo).
            process = subprocess.Popen(
                argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self._pid_file(service).write_text(str(process.pid))
        log.debug("started %s (pid %d) for %s; its log: %s", service, process.pid, url, log_path)
        deadline = time.monotonic() + timeout_s
        while not http_ready(f"{url}/-/ready"):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
                raise UserError(f"{service} did not start on {url}: {' '.join(tail) or 'no output'}")
            time.sleep(0.1)

    def stop_service(self, service: str, timeout_s: float = 10.0) -> bool:
        """SIGTERM the service this stack started (SIGKILL after `timeout_s`); False when none was running."""
        pid = self._pid(service)
        with contextlib.suppress(OSError):  # a read-only folder: the pid check above keeps a stale file harmless
            self._pid_file(service).unlink(missing_ok=True)
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return True
            if _reap(pid):
                return True
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        _reap(pid)
        return True

    def down(self) -> list[str]:
        """Stop both services; return the names of those that were running. UserError when a file is in
        the way of the state folder (a mistyped FLEETBENCH_STATE_DIR: nothing of this stack is there)."""
        state_folder(self.state_dir)
        return [service for service in ("prometheus", "pushgateway") if self.stop_service(service)]


def _reap(pid: int) -> bool:
    """Collect our own child's exit status so it does not linger as a zombie."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def _port_from_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 65535:
        raise UserError(f"{name}={raw!r} is not accepted; use a port number in 1-65535")
    return int(raw)


def state_folder(path: Path) -> Path:
    """`path` when nothing on the way to it is a file (it need not exist yet); else a UserError."""
    for candidate in [*reversed(path.parents), path]:
        if candidate.exists() and not candidate.is_dir():
            raise UserError(
                f"the stack's state folder {path} cannot be used: {candidate} is a file, not a folder; "
                f"point {STATE_DIR_ENV} at a folder (default {DEFAULT_STATE_DIR})"
            )
    return path


def default_stack(state_dir: Path | None = None) -> LocalStack:
    """The stack `make demo` and `fleetbench stack up` use; ports and folder come from the environment."""
    prometheus = _port_from_env(PROMETHEUS_PORT_ENV, DEFAULT_PROMETHEUS_PORT)
    pushgateway = _port_from_env(PUSHGATEWAY_PORT_ENV, DEFAULT_PUSHGATEWAY_PORT)
    if prometheus == pushgateway:
        raise UserError(
            f"{PROMETHEUS_PORT_ENV} and {PUSHGATEWAY_PORT_ENV} are both {prometheus}; "
            "Prometheus and the Pushgateway need a port each"
        )
    root = Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)
    return LocalStack(state_dir=state_dir or root / "stack", prometheus_port=prometheus, pushgateway_port=pushgateway)
