"""`fleetbench edge` through the real console entry point: info, a quick run, and bad input.

Bad input gets one line on stderr, exit 2, no traceback and no results folder. The runs use lavapipe
(marker `vulkan`) and skip with the reason where no Vulkan adapter exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.results.store import read_records


def run_edge_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh process; the adapter choice is the test's, not the caller's environment."""
    keep_backend = "WGPU_BACKEND_TYPE" in (env or {})
    return run_cli(*args, cwd=cwd, env=env, timeout=timeout, unset=() if keep_backend else ("WGPU_BACKEND_TYPE",))


def test_edge_command_imports_nothing_heavy() -> None:
    code = (
        "import sys, fleetbench.cli.edge_cmd\n"
        "heavy = [m for m in ('wgpu', 'numpy', 'torch', 'executorch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.vulkan
def test_info_reports_the_adapter_as_json(vulkan: None, tmp_path: Path) -> None:
    result = run_edge_cli("edge", "info", "--backend", "vulkan", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["backend"] == "vulkan"
    assert set(report["key_features"]) >= {"shader-f16", "subgroup", "timestamp-query"}
    assert set(report["cooperative_matrix"]) == {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"}
    assert report["limits"]["max-compute-workgroups-per-dimension"] >= 65535
    assert result.stderr == ""  # the Wayland probe's noise is swallowed


@pytest.mark.vulkan
def test_quick_run_writes_record_table_and_artifacts(vulkan: None, tmp_path: Path) -> None:
    result = run_edge_cli(
        "edge",
        "run",
        "--quick",
        "--backend",
        "vulkan",
        "--results-dir",
        str(tmp_path / "r"),
        "--run-id",
        "quick",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "GEMM / f32 FMA peak: gemm_vec4 float32 256" in result.stderr
    assert "timing: timestamp (GPU timestamp queries)" in result.stderr
    (record,) = read_records(tmp_path / "r" / "quick")
    assert record.benchmark == "edge" and record.backend == "vulkan" and record.status == "ok"
    assert all(row["correct"] for row in record.summary["kernels"])
    assert {"edge_results.json", "edge_results.csv", "edge_latency_gemm_vec4.png"} <= set(record.artifacts)
    energy = record.summary["energy"]  # a figure where a source is readable; else each source says why
    assert (energy["joules"] is None) == (energy["source"] is None)
    if energy["source"] is None:
        assert set(energy["unavailable"]) == {"rapl", "tegrastats", "powermetrics", "battery", "adb"}, energy


def test_wgpu_backend_env_is_honoured_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.cli import main

    monkeypatch.setenv("WGPU_BACKEND_TYPE", "Glide")
    assert main.main(["edge", "info"]) == 2
    assert capfd.readouterr().err.strip() == (
        "fleetbench: error: WGPU_BACKEND_TYPE='Glide' is not accepted; accepted: Vulkan, Metal, D3D12, OpenGL "
        "(or unset it)"
    )
    monkeypatch.setenv("WGPU_BACKEND_TYPE", "Metal")  # wgpu's own names pick the backend when --backend is unset
    if sys.platform != "darwin":
        assert main.main(["edge", "info"]) == 2
        assert "no wgpu adapter for backend metal on this machine" in capfd.readouterr().err


BAD = {
    "unknown kernel": (["--kernels", "gemm_fast"], "--kernels: edge.kernels.0: Input should be 'gemm_tiled'"),
    "backend that does not exist": (["--backend", "cuda"], "--backend: edge.backend: Input should be 'auto'"),
    "backend absent on this machine": (["--backend", "metal"], "no wgpu adapter for backend metal on this machine"),
    "no such adapter": (["--adapter", "Adreno 750"], "no adapter named like 'Adreno 750' for backend vulkan"),
    "gemm beyond the adapter's binding limit": (
        ["--kernels", "gemm_vec4", "--dtypes", "float32", "--set", "edge.gemm_sizes=[16384]"],
        "gemm_vec4 float32 16384: needs a 1024 MiB storage buffer but",
    ),
    "copy beyond the adapter's binding limit": (
        ["--kernels", "copy", "--set", "edge.copy_mib=4096"],
        "copy u32 4096MiB: needs a 4096 MiB storage buffer but",
    ),
    "gemm size not a multiple of the tile": (
        ["--set", "edge.gemm_sizes=[1000]"],
        "edge.gemm_sizes.0: Input should be a multiple of 128",
    ),
    "peak iterations not a power of two": (["--set", "edge.peak_iterations=100"], "must be a power of two"),
    "unknown timing": (["--timing", "cpu"], "--timing: edge.timing: Input should be 'auto', 'timestamp'"),
    "unknown dtype": (["--dtypes", "bfloat16"], "--dtypes: edge.dtypes.0: Input should be 'float32' or 'float16'"),
    "unknown edge key": (["--set", "edge.kernel=silu"], "edge.kernel: unknown key; accepted: adapter, backend"),
    "cpu that does not exist": (["--cpu-affinity", "4096"], "edge.cpu_affinity: CPU 4096 does not exist"),
    "cpu list that is not numbers": (["--cpu-affinity", "big"], "--cpu-affinity 'big' is not accepted"),
    "missing .pte": (
        ["--pte", "{tmp}/none.pte"],
        "none.pte not found; accepted: a program written by `fleetbench edge export`",
    ),
    "tries out of order": (
        ["--set", "edge.min_tries=9", "--set", "edge.max_tries=2"],
        "min_tries=9 exceeds max_tries=2",
    ),
}


@pytest.mark.vulkan
@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_gets_one_clear_line(
    case: str, vulkan: None, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process (main() is the console entry point) to keep the suite quick; capfd also sees what native
    # libraries write to fd 2, so the one-line promise covers them too.
    from fleetbench.cli import main

    monkeypatch.delenv("WGPU_BACKEND_TYPE", raising=False)
    monkeypatch.setenv("FLEETBENCH_PUSHGATEWAY", "")
    monkeypatch.chdir(tmp_path)
    args, fragment = BAD[case]
    before = sorted(tmp_path.rglob("*"))
    code = main.main(
        [
            "edge",
            "run",
            "--backend",
            "vulkan",
            "--results-dir",
            str(tmp_path / "results"),
            *[a.replace("{tmp}", str(tmp_path)) for a in args],
        ]
    )
    out, err = capfd.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fleetbench: error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in err + out
    assert sorted(tmp_path.rglob("*")) == before  # no results folder, nothing half-written


@pytest.mark.vulkan
def test_info_names_the_extra_of_a_runtime_not_installed(
    vulkan: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from fleetbench.cli import edge_cmd
    from fleetbench.cli.main import main

    real = edge_cmd._version
    monkeypatch.setattr(edge_cmd, "_version", lambda package: None if package == "executorch" else real(package))
    assert main(["edge", "info"]) == 0
    said = capfd.readouterr()
    assert "executorch: not installed (extra [mobile])" in said.out + said.err  # not eaten as rich markup
