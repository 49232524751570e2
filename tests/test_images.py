"""The container images for real: a local base made offline, cold builds of the cpu images, the
trainer (2 gloo ranks via torchrun), the edge runner (lavapipe) and `edge llm` (llama.cpp, MLX) in their images with results
mounted back and metrics in real Pushgateway/Prometheus containers, image inspection, a rebuild
after a one-line change, save/load, and build failures as one line.

Needs a Docker engine (started by scripts/dockerd.sh, as `make test` does); about 6-8 minutes on
2 cores, most of it the cold builds.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway
from rich.console import Console

from conftest import REPO, gateway_groups, run_cli
from docker_support import (
    SESSION_NAMESPACE,
    Monitoring,
    SessionImages,
    start_monitoring,
    stop_monitoring,
)
from fleetbench.results.store import read_records
from fleetbench.services.prometheus_api import PrometheusClient

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]
NS = ["--namespace", SESSION_NAMESPACE]


@pytest.fixture(scope="module")
def monitoring(images: SessionImages) -> Iterator[Monitoring]:
    started = start_monitoring(images)
    yield started
    stop_monitoring(started.containers)


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run_cli("images", *args, cwd=REPO, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("fleetbench: error:") and "Traceback" not in done.stderr, done.stderr
    return last


# ---- build failures: only the base is needed -------------------------------------------------


def write_context(root: Path, dockerfile: str) -> Path:
    target = root / "containers/monitoring/pushgateway/Dockerfile"
    target.parent.mkdir(parents=True)
    target.write_text(dockerfile)
    (root / "present.txt").write_text("here\n")
    return root


@pytest.mark.slow
def test_failed_step_is_one_line_with_its_output_shown(base_seconds: float, tmp_path: Path) -> None:
    context = write_context(
        tmp_path,
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo preparing\nRUN echo boom-marker-output >&2 && exit 3\n",
    )
    done = cli("build", "pushgateway", "--variant", "cpu", "--context", str(context), *NS)
    line = one_line_error(done)
    assert "failed at step 4/4 `RUN echo boom-marker-output >&2 && exit 3`" in line
    assert "returned a non-zero code: 3" in line and "build/logs/pushgateway-cpu.log" in line
    assert "boom-marker-output" in done.stderr  # the failing step's output, shown above the line


@pytest.mark.slow
def test_build_context_error_names_the_missing_file(base_seconds: float, tmp_path: Path) -> None:
    context = write_context(
        tmp_path, "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY present.txt /x/\nCOPY not-in-context.txt /x/\n"
    )
    line = one_line_error(cli("build", "pushgateway", "--variant", "cpu", "--context", str(context), *NS))
    assert "failed at step 4/4 `COPY not-in-context.txt /x/`" in line
    assert "not-in-context.txt" in line and "file not found in build context" in line


@pytest.mark.slow
def test_unknown_tag_and_bad_archive_are_one_line(engine: Any, tmp_path: Path) -> None:
    line = one_line_error(cli("run", "trainer", "--tag", "no-such-tag", *NS))
    assert f"image {SESSION_NAMESPACE}/trainer:no-such-tag is not on this engine" in line
    assert "fleetbench images build trainer" in line
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"this is not an image archive\n" * 100)
    line = one_line_error(cli("load", "-i", str(junk)))
    assert f"loading {junk} failed" in line


# ---- cold builds and what is in the images ---------------------------------------------------


@pytest.mark.slow
def test_cold_builds_from_a_fresh_base(images: SessionImages, capsys: pytest.CaptureFixture[str]) -> None:
    from fleetbench.cli.views.images import results_table

    trainer = images.results["trainer"]
    # A base made this session: nothing above it can come from a cache of earlier builds.
    assert trainer.cached_steps <= 1, trainer
    # The edge image reuses the trainer's dependency stages (identical text, same base): the runtime
    # stage's SHELL, RUN and ENV, the deps stage's ARG, COPY of the pins and RUN of pip; the image
    # stage then builds FROM deps, a step that is never reported as cached.
    edge = images.results["edge-vulkan"]
    assert edge.cached_steps >= 6 and edge.seconds < trainer.seconds, edge
    trainer_layers = images.client.images.get(trainer.image_id).attrs["RootFS"]["Layers"]
    edge_layers = images.client.images.get(edge.image_id).attrs["RootFS"]["Layers"]
    assert edge_layers[:4] == trainer_layers[:4]  # base, Python and user, the pins, the venv
    with capsys.disabled():
        print(
            f"\nlocal base (debootstrap + import): {images.base_seconds:.0f} s; cold builds: {images.cold_seconds:.0f} s"
        )
        Console(width=120).print(results_table(list(images.results.values())))


@pytest.mark.slow
def test_images_are_non_root_labelled_and_within_budget(images: SessionImages) -> None:
    revision = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    version = tomllib.loads((images.context / "pyproject.toml").read_text())["project"]["version"]
    for name, result in images.results.items():
        attrs = images.client.images.get(result.tags[0]).attrs
        config = attrs["Config"]
        assert config["User"] == "10001:10001", name
        labels = config["Labels"]
        assert labels["org.opencontainers.image.source"].startswith("https://")
        assert labels["org.opencontainers.image.version"] == version
        if revision.returncode == 0:
            assert labels["org.opencontainers.image.revision"] == revision.stdout.strip()
        created = datetime.fromisoformat(labels["org.opencontainers.image.created"])
        assert datetime.now(UTC) - created < timedelta(hours=2)
        assert set(result.tags) == {
            f"{SESSION_NAMESPACE}/{name}:{version}-{result.tags[0].split(':')[1].removeprefix(version + '-')}",
            f"{SESSION_NAMESPACE}/{name}:latest-cpu",
        }
        assert result.budget_mb and result.size_bytes / 1e6 <= result.budget_mb, (name, result.size_bytes)
        if name in {"prometheus", "pushgateway"}:
            assert config["Healthcheck"]["Test"] == ["CMD", "fleetbench-healthcheck"]


@pytest.mark.slow
def test_no_sources_of_secrets_or_build_inputs_in_the_python_images(images: SessionImages) -> None:
    for name in ("trainer", "edge-vulkan"):
        out = images.client.containers.run(
            images.ref(name),
            ["bash", "-c", "id -u; ls -A /workspace; ls /tmp; test -w /opt/fleetbench && echo writable || true"],
            remove=True,
            network_mode="host",
        ).decode()
        uid, *rest = out.split()
        assert uid == "10001"
        assert "wheelhouse" not in out and "writable" not in out  # no build inputs, code not writable
        assert set(rest) <= {"README.md", "pyproject.toml", "benchmarks", "mobile"}, out
        history = " ".join(h.get("CreatedBy", "") for h in images.client.images.get(images.ref(name)).history())
        assert "SECRET" not in history.upper() and "TOKEN=" not in history.upper()


# ---- the benchmarks in their images ----------------------------------------------------------


@pytest.mark.slow
def test_trainer_image_two_gloo_ranks_metrics_and_record(
    images: SessionImages, monitoring: Monitoring, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    run_id = "img-train"
    # The entrypoint runs the trainer's launcher, which starts 2 ranks through torchrun (gloo).
    done = cli(
        "run", "trainer", "--variant", "cpu", "--results-dir", str(results), "--pushgateway",
        monitoring.pushgateway_url, *NS, "--",
        "--nproc", "2", "--preset", "tiny", "--steps", "3", "--run-id", run_id,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = read_records(results / run_id)
    assert sorted(r.rank for r in records) == [0, 1]
    assert {r.benchmark for r in records} == {"train"} and all(r.status == "ok" for r in records)
    assert all(r.backend == "cpu" for r in records)
    assert "2 rank(s)" in done.stderr + done.stdout and "gloo" in done.stderr + done.stdout  # process group
    label = images.client.images.get(images.ref("trainer")).labels["org.opencontainers.image.revision"]
    assert records[0].git_revision == label  # the image says which commit it ran
    series = PrometheusClient(monitoring.prometheus_url).wait_for(
        f'group by (rank) ({{run_id="{run_id}"}})', timeout_s=45, min_series=2
    )
    assert sorted(s.labels["rank"] for s in series) == ["0", "1"]
    with capsys.disabled():
        print(f"\ntrainer image run: {len(records)} rank records, {len(series)} ranks in Prometheus")


@pytest.mark.slow
def test_edge_image_runs_kernels_on_lavapipe(
    images: SessionImages, monitoring: Monitoring, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    run_id = "img-edge"
    done = cli(
        "run", "edge-vulkan", "--variant", "cpu", "--results-dir", str(results),
        "--pushgateway", monitoring.pushgateway_url, *NS, "--", "edge", "run", "--quick", "--run-id", run_id,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = read_records(results / run_id)
    assert record.status == "ok" and record.backend == "vulkan"
    assert "llvmpipe" in record.device  # lavapipe: Mesa's software Vulkan
    kernels = record.summary["kernels"]
    assert kernels and all(k["correct"] for k in kernels), kernels
    assert not record.summary["failures"]
    series = PrometheusClient(monitoring.prometheus_url).wait_for(f'{{run_id="{run_id}"}}', timeout_s=45)
    assert series
    with capsys.disabled():
        print(f"\nedge image ran `fleetbench edge run`: {len(kernels)} kernels correct on {record.device}")


@pytest.mark.slow
def test_edge_image_runs_llama_cpp_and_mlx_side_by_side(
    images: SessionImages, monitoring: Monitoring, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`edge llm` in the edge image: llama.cpp from the wheel built on the image's base, MLX, both
    agreeing with eager PyTorch inside the container."""
    results = tmp_path / "results"
    run_id = "img-llm"
    done = cli(
        "run", "edge-vulkan", "--variant", "cpu", "--results-dir", str(results),
        "--pushgateway", monitoring.pushgateway_url, *NS, "--", "edge", "llm", "--quick", "--runtimes", "llama.cpp,mlx", "--dtypes", "f32", "--threads", "1",
        "--run-id", run_id, "--set", "edge.llm.min_tries=1", "--set", "edge.llm.max_tries=2",
        "--set", "edge.cooldown_s=0",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = read_records(results / run_id)
    rows = record.summary["rows"]
    assert {(r["runtime"], r["mmap"]) for r in rows} == {(n, m) for n in ("llama.cpp", "mlx") for m in (True, False)}
    assert all(r["ok"] and r["agrees"] and r["tg"]["p50"] > 0 for r in rows), rows
    with capsys.disabled():
        print(
            "\nedge image ran `fleetbench edge llm`: "
            + ", ".join(
                f"{r['runtime']} pp {r['pp']['p50']:.0f} tg {r['tg']['p50']:.0f} tok/s" for r in rows if r["mmap"]
            )
        )


@pytest.mark.slow
def test_pushgateway_container_keeps_pushed_groups_across_a_restart(monitoring: Monitoring) -> None:
    # The entrypoint points the gateway at PERSISTENCE_FILE, writable by the image's user; Debian's
    # default (/var/lib/prometheus) is not, and its groups would be gone after a restart.
    registry = CollectorRegistry()
    Gauge("persistence_probe", "a group that must survive the restart", registry=registry).set(3)
    push_to_gateway(monitoring.pushgateway_url, job="fleetbench", registry=registry, grouping_key={"run_id": "kept"})
    gateway = monitoring.containers[0]
    gateway.restart(timeout=10)
    deadline = time.monotonic() + 60
    while True:
        try:
            groups = gateway_groups(monitoring.pushgateway_url)
            break
        except OSError:
            assert time.monotonic() < deadline, gateway.logs(tail=20).decode(errors="replace")
            time.sleep(0.5)
    assert {"job": "fleetbench", "run_id": "kept"} in [
        {k: v for k, v in labels.items() if k in {"job", "run_id"}} for labels in groups
    ], groups


@pytest.mark.slow
def test_profiler_gets_sys_admin_and_never_privileged(images: SessionImages) -> None:
    probe = (
        "import ncu_report, os\n"
        "caps = int(next(l for l in open('/proc/self/status') if l.startswith('CapBnd')).split()[1], 16)\n"
        "print('SYS_ADMIN', (caps >> 21) & 1, 'uid', os.getuid())"
    )
    done = cli("run", "profiler", "--variant", "cpu", *NS, "--", "python", "-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "SYS_ADMIN 1" in done.stdout and "cap-add SYS_ADMIN" in done.stderr
    done = cli(
        "run",
        "trainer",
        "--variant",
        "cpu",
        *NS,
        "--",
        "python",
        "-c",
        probe.replace("import ncu_report, os", "import os"),
    )
    assert done.returncode == 0 and "SYS_ADMIN 0" in done.stdout, done.stderr[-2000:]
    for container in images.client.containers.list(all=True, filters={"label": "io.fleetbench.image"}):
        assert not container.attrs["HostConfig"]["Privileged"]


@pytest.mark.slow
def test_save_and_load_round_trip(images: SessionImages, monitoring: Monitoring, tmp_path: Path) -> None:
    # The image must really be gone before the load: its containers (the runs above are done) go first.
    stop_monitoring(monitoring.containers)
    done = cli("list", *NS)
    assert f"{SESSION_NAMESPACE}/pushgateway:latest-cpu" in done.stdout + done.stderr, done.stderr
    archive = tmp_path / "pushgateway.tar"
    result = images.results["pushgateway"]
    done = cli("save", "pushgateway", "--variant", "cpu", "-o", str(archive), *NS)
    assert done.returncode == 0, done.stderr
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
    assert sorted(manifest[0]["RepoTags"]) == sorted(result.tags)
    for tag in result.tags:
        images.client.images.remove(tag)
    assert not [t for i in images.client.images.list() for t in i.tags if t in result.tags]
    done = cli("load", "-i", str(archive))
    assert done.returncode == 0, done.stderr
    assert images.client.images.get(result.tags[0]).id == result.image_id
    assert images.client.images.get(result.tags[1]).id == result.image_id


# ---- last: it retags trainer:latest-cpu ------------------------------------------------------


@pytest.mark.slow
def test_rebuild_after_a_one_line_change_reuses_the_dependency_layers(
    images: SessionImages, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.images.build import build_images

    cold = images.results["trainer"]
    source = (images.context / "benchmarks/fleetbench/__init__.py").read_text()
    (rebuilt,) = build_images(
        ["trainer"], "cpu", context=images.context, namespace=SESSION_NAMESPACE,
        client=images.client, source=images.source,
        extra_files={"benchmarks/fleetbench/__init__.py": source + "# a one-line change\n"},
    )  # fmt: skip
    assert rebuilt.image_id != cold.image_id
    before = images.client.images.get(cold.image_id).attrs["RootFS"]["Layers"]
    after = images.client.images.get(rebuilt.image_id).attrs["RootFS"]["Layers"]
    shared = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), len(before))
    # Only the code layers differ (sources copied, editable install); base, Python and the venv are reused.
    assert shared >= len(after) - 2, (shared, len(after))
    assert rebuilt.seconds < 0.5 * cold.seconds, (rebuilt.seconds, cold.seconds)
    with capsys.disabled():
        print(
            f"\ntrainer (cpu): cold build {cold.seconds:.1f} s, rebuild after a one-line change {rebuilt.seconds:.1f} s "
            f"(ratio {rebuilt.seconds / cold.seconds:.3f}; {shared}/{len(after)} layers reused)"
        )
