"""ExecuTorch through `fleetbench edge export` / `edge run --pte`: export, load, time, agree with eager.

Needs the [mobile] extra (executorch==1.5.1); skips with that reason where it is missing. The tiny
model is exported once per module (XNNPACK partitioner) and shared by the tests.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest

from fleetbench.config.schema import EdgeConfig, FleetbenchConfig, RunConfig
from fleetbench.errors import UserError
from fleetbench.results.store import read_records


@pytest.fixture(scope="module")
def executorch() -> None:
    try:
        importlib.import_module("executorch.runtime")
    except ImportError as exc:
        pytest.skip(f"executorch not installed ({exc}); pip install 'fleetbench[mobile]'")


@pytest.fixture(scope="module")
def exported(executorch: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`fleetbench edge export` of the trainer's tiny model (seed 3) with XNNPACK, once for the module."""
    out = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as monkeypatch:
        code = edge_main(["edge", "export", "--out-dir", str(out), "--set", "edge.seed=3"], monkeypatch, out)
    assert code == 0
    return out / "tiny-xnnpack.pte"


def edge_main(args: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    from fleetbench.cli import main

    monkeypatch.setenv("FLEETBENCH_PUSHGATEWAY", "")
    monkeypatch.chdir(tmp_path)
    return main.main(args)


def test_export_writes_program_and_sidecar(exported: Path) -> None:
    data = exported.read_bytes()
    assert data[4:8] == b"ET12"  # ExecuTorch's flatbuffer file identifier
    sidecar = json.loads(exported.with_name(exported.name + ".json").read_text())
    assert sidecar["module"] == "fleetbench.edge.model_factory:tiny" and sidecar["seed"] == 3
    assert sidecar["inputs"] == [{"shape": [1, 128], "dtype": "int64", "high": 256}]
    assert sidecar["delegated_subgraphs"] > 0 and sidecar["partitioner"] == "xnnpack"


def test_run_pte_times_it_against_eager_and_they_agree(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = edge_main(
        [
            "edge",
            "run",
            "--pte",
            str(exported),
            "--results-dir",
            str(tmp_path / "r"),
            "--run-id",
            "pte",
            "--set",
            "edge.pte_warmup=2",
            "--set",
            "edge.pte_iterations=6",
        ],
        monkeypatch,
        tmp_path,
    )
    assert code == 0
    (record,) = read_records(tmp_path / "r" / "pte")
    assert record.status == "ok" and record.backend == "cpu"
    assert record.summary["kernels"] == []  # --pte alone: only the program
    et, eager = record.summary["models"]
    assert (et["runtime"], eager["runtime"]) == ("executorch", "eager")
    assert et["agrees"] is True and et["max_rel_error"] < 1e-4
    assert et["iterations"] == eager["iterations"] == 6
    assert 0 < et["load_s"] < 60 and et["p50_s"] > 0
    # 6 iterations support the median, not p90 (10) or p99 (100): left out, with the stability beside
    assert et["p90_s"] is None and et["p99_s"] is None and et["stability"]["samples"] == 6
    assert min(et["mean_s"], et["trimmed_mean_s"]) > 0
    assert record.metric("fleetbench_edge_model_latency_seconds_count", runtime="executorch", model="tiny") == 6
    assert record.metric("fleetbench_edge_model_load_seconds", runtime="executorch", model="tiny") == et["load_s"]
    assert record.metric(
        "fleetbench_edge_model_latency_percentile_seconds", runtime="eager", model="tiny", percentile="p50"
    ) == pytest.approx(eager["p50_s"])
    assert (
        record.metric(
            "fleetbench_edge_model_latency_percentile_seconds", runtime="eager", model="tiny", percentile="p90"
        )
        is None
    )


def test_program_that_disagrees_with_its_eager_model_fails_the_run(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same architecture with other weights (seed 4, not 3): same inputs, different outputs.
    (tmp_path / "other_weights.py").write_text(
        textwrap.dedent("""
        from fleetbench.edge.model_factory import tiny

        def factory():
            return tiny(seed=4, batch=1)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from fleetbench.edge.run import run as run_edge
    from fleetbench.job import RunContext

    cfg = FleetbenchConfig(
        run=RunConfig(results_dir=tmp_path / "r", run_id="bad"),
        edge=EdgeConfig(
            kernels=[], mps=False, pte=exported, module="other_weights:factory", pte_warmup=0, pte_iterations=2
        ),
    )
    with pytest.raises(UserError, match=r"wrong results: executorch tiny disagrees with eager PyTorch") as caught:
        run_edge(cfg, RunContext.start(cfg))
    assert caught.value.exit_code == 1
    (record,) = read_records(tmp_path / "r" / "bad")
    assert record.status == "failed" and record.summary["models"][0]["agrees"] is False


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"garbage" * 200, "Program identifier"),
        (None, "File size is too small"),  # the exported program cut in half
    ],
    ids=["not a program", "truncated"],
)
def test_corrupt_pte_gets_one_clear_line(
    content: bytes | None,
    fragment: str,
    exported: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.pte"
    data = exported.read_bytes()
    bad.write_bytes(content if content is not None else data[: len(data) // 2])
    before = sorted(tmp_path.rglob("*"))
    code = edge_main(["edge", "run", "--pte", str(bad), "--results-dir", str(tmp_path / "r")], monkeypatch, tmp_path)
    _out, err = capfd.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert (
        lines[0].startswith(f"fleetbench: error: {bad}: not a loadable ExecuTorch program (") and fragment in lines[0]
    )
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the MPS partitioner can lower")
def test_export_to_mps_off_macos_is_refused_in_one_line(
    executorch: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    code = edge_main(
        ["edge", "export", "--partitioners", "mps", "--out-dir", str(tmp_path / "m")], monkeypatch, tmp_path
    )
    _out, err = capfd.readouterr()
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("fleetbench: error: cannot export with partitioner mps: requires macOS"), err
    assert not list((tmp_path / "m").glob("*.pte"))


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the path where MPS is absent")
def test_mps_path_is_skipped_not_faked(tmp_path: Path) -> None:
    from fleetbench.edge.run import run as run_edge
    from fleetbench.job import RunContext

    cfg = FleetbenchConfig(run=RunConfig(results_dir=tmp_path, run_id="mps"), edge=EdgeConfig(kernels=[], mps=True))
    record = run_edge(cfg, RunContext.start(cfg)).record
    assert record.summary["mps"] == {"skipped": "requires Apple silicon (MPS)"}
    assert record.summary["models"] == []
    assert not [s for s in record.metrics if s.name.startswith("fleetbench_edge_model")]


@pytest.mark.slow
def test_program_for_a_delegate_this_runtime_lacks_gets_one_clear_line(
    executorch: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.edge import pte

    if pte.partitioner_problem("coreml") is not None:
        pytest.skip(pte.partitioner_problem("coreml") or "")
    assert (
        edge_main(["edge", "export", "--partitioners", "coreml", "--out-dir", str(tmp_path)], monkeypatch, tmp_path)
        == 0
    )
    registered = pte._registered()
    if "CoreMLBackend" in registered:
        pytest.skip("this ExecuTorch runtime includes the CoreML delegate")
    capfd.readouterr()
    code = edge_main(
        ["edge", "run", "--pte", str(tmp_path / "tiny-coreml.pte"), "--results-dir", str(tmp_path / "r")],
        monkeypatch,
        tmp_path,
    )
    (line,) = capfd.readouterr().err.strip().splitlines()
    assert code == 2
    assert "Backend CoreMLBackend is not registered in this ExecuTorch runtime (it has: " in line
    assert not (tmp_path / "r").exists()
