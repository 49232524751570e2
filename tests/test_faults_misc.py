"""Faults found around the edges: the stack's state folder and ports, a full disk under the metrics
textfile, the `images run` Pushgateway, the FLEETBENCH_* names every module takes from the registry,
and ansible's colours, which never reach a message.

Each is one `fleetbench: error: ...` line (exit 2) or a UserError in-process, never the safety net's
"a bug" line.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO
from fleetbench import envvars
from fleetbench.errors import UserError
from fleetbench.services.stack import default_stack

PACKAGE = REPO / "benchmarks" / "fleetbench"


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("fleetbench: error: ") and "a bug" not in line
    return line


@pytest.mark.parametrize("command", ["down", "up"])
def test_a_state_dir_under_a_file_is_one_line(
    command: str,
    fleetbench: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    (tmp_path / "afile").write_text("not a folder")
    monkeypatch.setenv(envvars.STATE_DIR_ENV, str(tmp_path / "afile" / "state"))
    assert fleetbench("stack", command) == 2
    line = one_error_line(capsys)
    assert f"{tmp_path / 'afile'} is a file, not a folder" in line and envvars.STATE_DIR_ENV in line
    assert (tmp_path / "afile").read_text() == "not a folder"


def test_stack_down_with_nothing_there_says_so(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(envvars.STATE_DIR_ENV, str(tmp_path / "never-made"))
    assert fleetbench("stack", "down") == 0
    assert "nothing was running" in capsys.readouterr().err  # the console writes to stderr
    assert not (tmp_path / "never-made").exists()


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({envvars.PROMETHEUS_PORT_ENV: "²"}, "FLEETBENCH_PROMETHEUS_PORT='²' is not accepted"),
        ({envvars.PUSHGATEWAY_PORT_ENV: "70000"}, "FLEETBENCH_PUSHGATEWAY_PORT='70000' is not accepted"),
        (
            {envvars.PROMETHEUS_PORT_ENV: "19555", envvars.PUSHGATEWAY_PORT_ENV: "19555"},
            "are both 19555; Prometheus and the Pushgateway need a port each",
        ),
    ],
    ids=["superscript-digit", "above-65535", "same-port-twice"],
)
def test_bad_stack_ports_are_refused(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], fragment: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace("?", r"\?")):
        default_stack()


# One run writes its .prom; a second run of the same benchmark, rank and run id then meets a file size
# limit below that file's size (as a full disk would stop it): SIGXFSZ is ignored, so the write fails
# with EFBIG instead of killing the process.
FULL_DISK_RUN = """
import resource, signal, sys
from pathlib import Path
from pydantic import BaseModel
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.errors import UserError
from fleetbench.job import RunContext
from fleetbench.telemetry.session import open_run

class Settings(BaseModel):
    n: int = 1

config = FleetbenchConfig.model_validate({"run": {"results_dir": sys.argv[1], "run_id": "full"}})
context = RunContext.start(config)
with open_run(config, context, "probe", Settings(), "cpu", "cpu") as run:
    run.metrics.set("fleetbench_run_success", 1)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
try:
    with open_run(config, context, "probe", Settings(), "cpu", "cpu") as run:
        resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))
except UserError as exc:
    print(exc)
"""


def test_a_full_disk_under_the_metrics_textfile_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, envvars.PUSHGATEWAY_ENV: "", "XDG_STATE_HOME": str(tmp_path / "state")},
        check=False,
    )
    run_dir = tmp_path / "full"
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"{run_dir}: no space for the metrics file fleetbench_probe_rank0.prom (File too large); any earlier "
        "copy of it is as it was: free space (or raise the file size limit) and run again"
    ), done.stderr
    # the first run's file is whole, no temporary file is left, and the record of the first run is the only one
    prom = (run_dir / "fleetbench_probe_rank0.prom").read_text()
    assert "fleetbench_run_success" in prom and prom.endswith("\n")
    assert sorted(p.name for p in run_dir.iterdir()) == ["fleetbench_probe_rank0.prom", "records.jsonl"]
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["--pushgateway", "ftp://127.0.0.1:9091"], {}, "--pushgateway 'ftp://127.0.0.1:9091' is not accepted"),
        (["--pushgateway", "http://h:99999"], {}, "--pushgateway 'http://h:99999' is not accepted: has an invalid"),
        ([], {envvars.PUSHGATEWAY_ENV: "gateway:9091"}, "$FLEETBENCH_PUSHGATEWAY 'gateway:9091' is not accepted"),
    ],
    ids=["flag-scheme", "flag-port", "environment"],
)
def test_images_run_checks_the_pushgateway_before_docker(
    fleetbench: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    fragment: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # it must not get that far
    assert fleetbench("images", "run", "trainer", *args, "--results-dir", tmp_path / "results", "--", "probe") == 2
    assert fragment in one_error_line(capsys)
    assert not (tmp_path / "results").exists()


# Modules that read FLEETBENCH_* variables take each name from fleetbench/envvars.py, never spell it out.
REGISTRY_USERS = [
    "edge/paths.py",
    "edge/spirv.py",
    "runinfo.py",
    "services/stack.py",
    "images/base.py",
    "deploy/launcher.py",
    "cli/images_cmd.py",
    "train/launch.py",
]


@pytest.mark.parametrize("module", REGISTRY_USERS)
def test_variable_names_come_from_the_registry(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    spelled = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in envvars.KNOWN
    ]
    assigned = [
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.endswith("_ENV")
    ]
    assert spelled == [] and assigned == [], (module, spelled, assigned)


def test_the_edge_names_are_the_registrys() -> None:
    from fleetbench.edge import paths, spirv

    assert paths.KERNELS_ENV == envvars.KERNELS_DIR_ENV and spirv.GLSLC_ENV == envvars.GLSLC_ENV


def test_ansible_runs_without_colour_and_its_escapes_never_reach_a_message() -> None:
    from fleetbench.deploy.inventory import plain
    from fleetbench.deploy.launcher import ansible_env, deploy_dir

    env = ansible_env(deploy_dir())
    assert env["ANSIBLE_NOCOLOR"] == "1" and env["ANSIBLE_FORCE_COLOR"] == "0"
    coloured = "\x1b[1;35m[WARNING]: Could not match supplied host pattern, ignoring: x\x1b[0m"
    assert plain(coloured) == "[WARNING]: Could not match supplied host pattern, ignoring: x"


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: tmp / ("a" * 300), "a name in it is 300 bytes long; the file system allows 255"),
        (lambda tmp: tmp.joinpath(*["b" * 200] * 25), "the path is "),
    ],
    ids=["name-too-long", "path-too-long"],
)
def test_names_the_file_system_refuses_are_one_line_before_any_work(
    tmp_path: Path, make: Callable[[Path], Path], fragment: str
) -> None:
    from fleetbench.errors import UserError
    from fleetbench.fsutil import check_writable_dir, ensure_writable_dir, name_problem

    target = make(tmp_path)
    assert fragment in (name_problem(target) or "")
    for guard in (check_writable_dir, ensure_writable_dir):
        with pytest.raises(
            UserError, match=r"results dir .* (is not a name this file system takes|is not writable)"
        ) as caught:
            guard(target, "results dir", "--results-dir")
        assert fragment in str(caught.value) and "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made on the way
    assert name_problem(tmp_path / "fine") is None
