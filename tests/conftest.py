"""Shared fixtures: the repository paths, real Prometheus + Pushgateway servers on loopback, and the
`realdata` gate (third-party test data found through `testdata.get_test_data_dir()`)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleetbench.services.prometheus_api import PrometheusClient
from fleetbench.services.stack import LocalStack, free_port

REPO = Path(__file__).resolve().parents[1]


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's, installed by make setup
# As the browser checks here run Chromium: no sandbox as root, and nothing that reaches for the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch_chromium(playwright: Any) -> Any:
    """Debian's headless Chromium through Playwright (no browser download)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def pytest_configure(config: pytest.Config) -> None:
    """Under CI the third-party data must be there: a green CI means the `realdata` tests ran."""
    from testdata import missing_reason

    reason = missing_reason()
    if reason and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise pytest.UsageError(f"CI is set and {reason}")


# Session fixtures that start something costly once per process: a test that uses one runs in the
# worker that has it (pytest-xdist, `make pytest`), so each starts once per session, not per worker.
COLD_BUILD_FIXTURES = frozenset({"base_seconds", "images"})
SERVICE_FIXTURES = frozenset({"stack", "prometheus", "demo", "demo_run"})


def worker_group(module: list[pytest.Item]) -> tuple[int, str]:
    """Where a test module's tests run under `--dist loadgroup`, and how early it is sent out.

    A whole module goes to one worker (its module fixtures, a training run several tests read, are
    made once): all modules on the session's cold image builds to one, all modules on the Prometheus
    stack to one, any other module on its own. The longest work goes first, so that the other workers
    takes the many short modules meanwhile: the cold-build group, other Docker modules (the CUDA
    images build their own), the stack's group, then modules with `slow` tests, then the rest.
    """
    names = {name for item in module for name in item.fixturenames}
    path = module[0].nodeid.split("::", 1)[0]
    if names & COLD_BUILD_FIXTURES:
        return 0, "docker"
    if any(item.get_closest_marker("docker") for item in module):
        return 1, path
    if names & SERVICE_FIXTURES:
        return 2, "services"
    return (3 if any(item.get_closest_marker("slow") for item in module) else 4), path


def schedule_for_workers(items: list[pytest.Item]) -> None:
    """Mark each module's tests with its worker group and order the items longest group first."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered: list[tuple[int, bool, int, pytest.Item]] = []
    for position, module in enumerate(modules.values()):
        rank, group = worker_group(module)
        # Within a group, the modules on the session's local cluster go last: the cluster stays up from
        # its first use to the end, running containers of the images the image tests remove and load.
        on_cluster = any("local_cluster" in item.fixturenames for item in module)
        for item in module:
            item.add_marker(pytest.mark.xdist_group(group))
            ordered.append((rank, on_cluster, position, item))
    ordered.sort(key=lambda entry: entry[:3])  # stable: collection order within a module
    items[:] = [entry[3] for entry in ordered]


@pytest.hookimpl(wrapper=True)  # runs before every plugin's own: pytest-xdist reads the groups in its
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Worker groups and order (`schedule_for_workers`); `realdata` tests skip, saying where the data
    was looked for, when it is absent (a plain clone)."""
    from testdata import missing_reason

    schedule_for_workers(items)
    reason = missing_reason()
    if reason is not None:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if item.get_closest_marker("realdata"):
                item.add_marker(skip)
    yield


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under `--dist loadgroup` every test id must carry its group: where pytest-xdist's grouping did not
    take (a pytest it does not support), the groups would split and each worker start Docker."""
    grouped = getattr(session.config.option, "loadgroup", False)  # set in pytest-xdist workers only
    if grouped and session.items and "@" not in session.items[0].nodeid:
        raise pytest.UsageError(
            f"pytest-xdist did not group the tests ({session.items[0].nodeid} has no @group): "
            "use the pytest version pyproject.toml pins (make setup)"
        )


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A real Prometheus scraping a real Pushgateway, on free 127.0.0.1 ports, for the whole session."""
    local = LocalStack(
        state_dir=tmp_path_factory.mktemp("stack"),
        prometheus_port=free_port(),
        pushgateway_port=free_port(),
        scrape_interval_s=0.5,
    ).up()
    yield local
    local.down()


@pytest.fixture(scope="session")
def prometheus(stack: LocalStack) -> PrometheusClient:
    return PrometheusClient(stack.prometheus_url)


def gateway_groups(url: str) -> list[dict[str, str]]:
    """The label sets of every group a Pushgateway holds (its HTTP API)."""
    with urllib.request.urlopen(f"{url}/api/v1/metrics", timeout=5) as response:
        return [group["labels"] for group in json.load(response)["data"]]


@contextlib.contextmanager
def fleetbench_logger_kept() -> Iterator[None]:
    """main() installs its handler and level on the `fleetbench` logger: put the logger back afterwards."""
    logger = logging.getLogger("fleetbench")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def in_process_cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """The fleetbench command's `main()` in this process (its exit status), nothing pushed to a Pushgateway."""
    from fleetbench.cli import main as cli_main

    monkeypatch.setenv("FLEETBENCH_PUSHGATEWAY", "")
    return lambda *args: cli_main.main([str(a) for a in args])


@pytest.fixture
def fleetbench(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """The fleetbench command in this process (`in_process_cli`), for one test."""
    return in_process_cli(monkeypatch)


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    unset: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point as a user would, in a subprocess (without the `unset` variables)."""
    full_env = {**os.environ, "FLEETBENCH_PUSHGATEWAY": "", **(env or {})}
    for name in unset:
        full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "fleetbench", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass(frozen=True)
class DemoRun:
    """The session's one `fleetbench demo` (the `make demo` command) and what it printed."""

    run_dir: Path
    done: subprocess.CompletedProcess[str]


DEMO_RUN_ID = "demo-session"


@pytest.fixture(scope="session")
def demo(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`fleetbench demo` as a user runs it, once per session, into the session's real Prometheus: its ports
    are the demo's, so the demo finds both services up and uses them (as it uses any it finds there)."""
    where = tmp_path_factory.mktemp("demo")
    env = {
        "FLEETBENCH_PROMETHEUS_PORT": str(stack.prometheus_port),
        "FLEETBENCH_PUSHGATEWAY_PORT": str(stack.pushgateway_port),
        "FLEETBENCH_STATE_DIR": str(where / "state"),
    }
    args = ["--results-dir", str(where / "results"), "--run-id", DEMO_RUN_ID]
    # the tiny preset's 100 steps show the same panels, slower
    for setting in (
        "probe.matmul_sizes=[128,256]",
        "probe.copy_mib=[4]",
        "probe.min_run_time_s=0.05",
        "train.steps=30",
    ):
        args += ["--set", setting]
    done = run_cli("demo", *args, env=env, cwd=where, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return DemoRun(where / "results" / DEMO_RUN_ID, done)


@pytest.fixture(scope="session")
def demo_run(demo: DemoRun) -> Path:
    """The run folder of the session's demo."""
    return demo.run_dir


# --- Docker: one engine, one cold build of the cpu images per session (tests/docker_support.py) ---
@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    from docker_support import SESSION_NAMESPACE, remove_dead_sessions, remove_namespace, start_engine

    client = start_engine()
    remove_dead_sessions(client)
    yield client
    remove_namespace(client, SESSION_NAMESPACE)


@pytest.fixture(scope="session")
def base_seconds(engine: Any) -> float:
    """The local base, made from scratch (debootstrap + import) for this session's namespace."""
    from docker_support import make_base

    return make_base(engine)


@pytest.fixture(scope="session")
def images(engine: Any, base_seconds: float, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Cold builds of the cpu images in the session's namespace; the image and deploy tests share them."""
    from docker_support import build_cold, snapshot_context

    return build_cold(engine, base_seconds, snapshot_context(tmp_path_factory.mktemp("context")))


@pytest.fixture(scope="session")
def local_cluster(images: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's local cluster (3 SSH nodes, Slurm groups in the inventory), brought up on first use by
    the deploy, ncu-deploy and Slurm modules; removed at the end of the session."""
    from docker_support import LocalCluster

    cluster = LocalCluster(images, tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def vulkan() -> None:
    """A Vulkan adapter (lavapipe on machines without a GPU), or the test skips with the reason."""
    from fleetbench.edge import gpu
    from fleetbench.errors import UserError

    try:
        gpu.select_adapter("vulkan", None, "high-performance")
    except UserError as exc:
        pytest.skip(f"no Vulkan adapter here ({exc}); CI installs mesa-vulkan-drivers (lavapipe)")
