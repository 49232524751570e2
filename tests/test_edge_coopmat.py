"""gemm_coopmat: the cooperative-matrix GEMM is compiled and validated here, the raw Vulkan path runs a
plain GLSL GEMM on lavapipe (checked against numpy, timed with timestamps), and on lavapipe, which has
no VK_KHR_cooperative_matrix (Mesa 22.3 here; 25.0 checked too), the run says it was skipped and why.
The kernel itself runs on an adapter with the extension (scripts/gpu-check.sh's edge stage)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from fleetbench.config.schema import EdgeConfig
from fleetbench.edge import coopmat, paths, vkcompute

KERNEL = paths.kernels_dir() / coopmat.SOURCE


def test_the_kernel_compiles_to_spirv_that_validates(tmp_path: Path) -> None:
    tools = coopmat.toolchain()
    assert tools.problem is None, tools.problem
    assert tools.glslang is not None and tools.glslang >= coopmat.NEEDS_GLSLANG
    spirv, why = coopmat.compile_kernel(tools, KERNEL, tmp_path)
    assert why is None and spirv is not None
    words = np.frombuffer(spirv.read_bytes(), dtype=np.uint32)
    assert words[0] == 0x07230203  # the SPIR-V magic number
    # The module declares the capability and extension the driver must offer (spirv-dis of the same tools).
    dis = Path(tools.validator or "").with_name("spirv-dis")
    if dis.is_file():
        text = subprocess.run(
            [str(dis), str(spirv)], capture_output=True, text=True, env=coopmat._env_for(str(dis))
        ).stdout
        assert "OpCapability CooperativeMatrixKHR" in text and '"SPV_KHR_cooperative_matrix"' in text
    # The same bytes again: reused by content hash, not rebuilt.
    again, _ = coopmat.compile_kernel(tools, KERNEL, tmp_path)
    assert again == spirv


def test_a_broken_kernel_is_refused_with_the_compilers_line(tmp_path: Path) -> None:
    broken = tmp_path / "gemm_coopmat.comp"
    broken.write_text(KERNEL.read_text().replace("coopMatMulAdd(", "coopMatMulAddd("))
    spirv, why = coopmat.compile_kernel(coopmat.toolchain(), broken, tmp_path / "out")
    assert spirv is None and why is not None
    assert why.startswith(f"{Path(coopmat.toolchain().compiler or '').name} refused gemm_coopmat.comp:")
    assert "coopMatMulAddd" in why
    assert list((tmp_path / "out").iterdir()) == []  # nothing half-written


def test_shape_choice_from_an_adapters_property_list() -> None:
    # VkCooperativeMatrixPropertiesKHR as an NVIDIA driver lists them (fp16/fp32 and int8 shapes).
    def shape(m: int, n: int, k: int, a: str = "float16", c: str = "float32") -> dict[str, object]:
        return {"M": m, "N": n, "K": k, "A": a, "B": a, "C": c, "result": c, "saturating": False, "scope": "subgroup"}

    offered = [
        shape(16, 8, 16),
        shape(16, 8, 8),
        shape(16, 16, 16),
        shape(16, 8, 32, "sint8", "sint32"),
        shape(16, 16, 16, c="float16"),
    ]
    assert coopmat.pick_shape(offered, [1024]) == shape(16, 16, 16)
    assert coopmat.pick_shape([shape(16, 8, 16)], [128, 256]) == shape(16, 8, 16)
    assert coopmat.pick_shape([shape(16, 16, 16, c="float16")], [1024]) is None
    assert coopmat.pick_shape([shape(48, 48, 16)], [128]) is None  # 2 x 48 does not divide 128


@pytest.mark.vulkan
def test_lavapipe_is_refused_cleanly_with_the_reason(vulkan: None) -> None:
    from fleetbench.edge import gpu

    rep = gpu.report(gpu.select_adapter("vulkan", None, "high-performance"))
    plan = coopmat.prepare(EdgeConfig(), (rep.vendor_id, rep.device_id, rep.device), "vulkan")
    assert plan.spirv is not None  # compiled and validated even where it cannot run
    if rep.cooperative_matrix.get(coopmat.EXTENSION):
        pytest.skip(f"{rep.device} offers {coopmat.EXTENSION}: nothing to refuse")
    assert plan.extension is False and plan.device is None and plan.shapes == []
    assert plan.skipped == f"{rep.device} (Vulkan {rep.vulkan_api}) does not offer {coopmat.EXTENSION}"


@pytest.mark.vulkan
def test_the_raw_vulkan_path_runs_a_glsl_gemm_on_lavapipe(vulkan: None, tmp_path: Path) -> None:
    # The path gemm_coopmat takes (device, staging uploads, pipeline with specialisation, timestamps),
    # exercised with the plain GLSL GEMM in float16, which every Vulkan 1.1 adapter with 16-bit storage runs.
    spirv = tmp_path / "gemm_vec4_f16.spv"
    source = paths.kernels_dir() / "glsl" / "gemm_vec4.comp"
    subprocess.run(
        [
            "glslc",
            "-fshader-stage=compute",
            "--target-env=vulkan1.1",
            "-DFLEETBENCH_F16",
            str(source),
            "-o",
            str(spirv),
        ],
        check=True,
    )
    v = vkcompute.vk()
    inst = vkcompute.instance()
    try:
        physical = v.vkEnumeratePhysicalDevices(inst)[0]
        features = vkcompute.Features(float16=True)
        if vkcompute.missing_features(physical, features):
            pytest.skip("this adapter lacks 16-bit storage")
        device = vkcompute.Device(physical, [], features)
        try:
            n = 256
            rng = np.random.default_rng(3)
            a, b = (rng.standard_normal((n, n), dtype=np.float32).astype(np.float16) for _ in range(2))
            kernel = vkcompute.prepare(
                device,
                spirv.read_bytes(),
                struct.pack("<4I", n, n, n, 0),
                [a.tobytes(), b.tobytes()],
                2 * n * n,
                ([], (n // 128, n // 128, 1)),
            )
            out = np.frombuffer(vkcompute.run_once(kernel), dtype=np.float16)
            _abs, rel = coopmat_rel(out, a, b)
            assert rel < 2e-3
            times = vkcompute.timed(kernel, 3)
            assert len(times) == 3 and all(t > 0 for t in times)
        finally:
            device.close()
    finally:
        v.vkDestroyInstance(inst, None)


def coopmat_rel(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    from fleetbench.edge.kernels import max_abs_rel

    return max_abs_rel(out, (a.astype(np.float64) @ b.astype(np.float64)).reshape(-1))


@pytest.mark.vulkan
def test_an_edge_run_says_gemm_coopmat_was_skipped_and_why(vulkan: None, tmp_path: Path) -> None:
    results = tmp_path / "r"
    done = run_cli(
        "edge",
        "run",
        "--quick",
        "--backend",
        "vulkan",
        "--kernels",
        "gemm_coopmat,silu",
        "--results-dir",
        str(results),
        "--run-id",
        "cm",
        cwd=tmp_path,
        unset=("WGPU_BACKEND_TYPE",),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((results / "cm" / "edge_results.json").read_text())
    coop = result["cooperative_matrix"]
    if coop["extension"]:
        pytest.skip("this adapter offers the extension: the kernel runs instead")
    assert coop["spirv"] and Path(coop["spirv"]).is_file()
    assert [k["kernel"] for k in result["kernels"]] == ["silu"]
    assert f"gemm_coopmat skipped: {coop['skipped']}" in result["notes"]
    assert f"gemm_coopmat skipped: {coop['skipped']}" in done.stderr
