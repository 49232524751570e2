"""Edge kernels on a real Vulkan adapter (lavapipe in CI): correctness, both timers, SPIR-V, telemetry.

Marker `vulkan`: these run wherever a Vulkan adapter exists and skip, saying why, where none does.
Sizes are small so lavapipe on two shared cores finishes each test in seconds.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fleetbench.config.schema import EDGE_KERNELS, EdgeConfig, FleetbenchConfig, RunConfig
from fleetbench.edge import gpu, kernels, spirv, timing
from fleetbench.edge.coopmat import EXTENSION as COOPMAT_EXTENSION
from fleetbench.edge.native import optional_module
from fleetbench.edge.paths import KERNELS_ENV
from fleetbench.errors import UserError
from fleetbench.job import JobFailed, RunContext
from fleetbench.results.store import read_records

SMALL = {
    "gemm_sizes": [128],
    "rows": 48,
    "cols": 200,
    "silu_elements": 4096,
    "copy_mib": 1,
    "peak_workgroups": 3,
    "peak_iterations": 64,
    "peak_dispatch_s": 0.002,
    "warmup": 1,
    "try_time_s": 0.005,
    "min_iterations": 2,
    "max_iterations": 6,
    "min_tries": 1,
    "max_tries": 2,
    "cooldown_s": 0.0,
    "mps": False,
    "plot": False,
}
# gemm_coopmat runs through the raw Vulkan path (fleetbench.edge.coopmat), not wgpu.
WGPU_KERNELS = [k for k in EDGE_KERNELS if k != "gemm_coopmat"]


@pytest.fixture(scope="module")
def adapter() -> gpu.AdapterReport:
    try:
        return gpu.report(gpu.select_adapter("vulkan", None, "high-performance"))
    except UserError as exc:
        pytest.skip(f"no Vulkan adapter here ({exc}); CI installs mesa-vulkan-drivers (lavapipe)")


def config(tmp_path: Path, run_id: str, **edge: object) -> FleetbenchConfig:
    fields = {**SMALL, "backend": "vulkan", "spirv_dir": str(tmp_path / "spirv"), **edge}
    return FleetbenchConfig(
        run=RunConfig(results_dir=tmp_path / "results", run_id=run_id), edge=EdgeConfig.model_validate(fields)
    )


def promtool_problems(path: Path) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        return ""
    result = subprocess.run([promtool, "check", "metrics"], input=path.read_bytes(), capture_output=True, timeout=30)
    return (result.stdout + result.stderr).decode().strip() if result.returncode else ""


# --- on the adapter -------------------------------------------------------------------------------
@pytest.mark.vulkan
def test_adapter_report_reads_features_limits_and_the_vulkan_extension_list(adapter: gpu.AdapterReport) -> None:
    assert adapter.backend == "vulkan"
    assert adapter.limits["max-storage-buffer-binding-size"] > 0
    assert adapter.vulkan_extensions, "libvulkan's device extension list was not read"
    # Every Vulkan 1.1+ driver lists these; the list is what the driver reports.
    assert "VK_KHR_storage_buffer_storage_class" in adapter.vulkan_extensions
    assert set(adapter.cooperative_matrix) == {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"}
    for name, offered in adapter.cooperative_matrix.items():
        assert offered == (name in adapter.vulkan_extensions)


@pytest.mark.vulkan
def test_every_kernel_is_correct_with_timestamps_and_spirv(adapter: gpu.AdapterReport, tmp_path: Path) -> None:
    assert spirv.glslc() is not None, "glslc missing: make setup installs it (Debian package glslc)"
    if not adapter.has("timestamp-query"):
        pytest.skip(f"{adapter.device} has no timestamp-query")
    from fleetbench.edge.run import run as run_edge

    dtypes = ["float32", "float16"] if adapter.has("shader-f16") else ["float32"]
    record = run_edge(*run_args(config(tmp_path, "all", timing="timestamp", dtypes=dtypes, plot=True))).record
    assert record.status == "ok", record.error
    rows = record.summary["kernels"]
    runnable = [k for k in WGPU_KERNELS if not kernels.KERNELS[k].missing_features(adapter.features)]
    expected = {(k, d) for k in runnable for d in (("u32",) if k == "copy" else dtypes)}
    if adapter.cooperative_matrix.get(COOPMAT_EXTENSION):  # gemm_coopmat runs in fp16 where the driver has it
        expected.add(("gemm_coopmat", "float16"))
    assert {(r["kernel"], r["dtype"]) for r in rows} == expected
    for row in rows:
        assert row["correct"], row
        assert row["timing"] == "timestamp"
        assert 0 < row["min_s"] <= row["p50_s"]
        # at most 2 x 6 dispatches: p90 only from 10 of them, p99 never (it needs 100)
        assert (row["p90_s"] is not None) == (row["dispatches"] >= 10) and row["p99_s"] is None
        assert row["p90_s"] is None or row["p50_s"] <= row["p90_s"]
        assert row["verdict"] in ("stable", "unstable", "single sample")
        assert math.isfinite(row["variation"]) and row["variation"] >= 0
        assert row["dispatches"] >= SMALL["min_iterations"] * row["tries"]
    # exact kernels are bit-exact; float kernels within their tolerance
    assert all(r["max_abs_error"] == 0 for r in rows if r["kernel"].startswith(("peak", "copy")))
    # the SPIR-V path: glslc wrote the modules into the build folder, and they ran
    spv = record.summary["spirv_files"]
    assert spv and all(Path(p).is_file() and Path(p).read_bytes()[:4] == b"\x03\x02\x23\x07" for p in spv)
    # telemetry: metrics in the record, the .prom file valid, artifacts written
    assert record.metric("fleetbench_edge_kernel_correct", kernel="gemm_vec4_spirv", dtype="float32", size="128") == 1
    assert record.metric(
        "fleetbench_edge_kernel_latency_seconds_count",
        kernel="softmax",
        dtype="float32",
        size="48x200",
        timing="timestamp",
    ) == next(r["dispatches"] for r in rows if (r["kernel"], r["dtype"]) == ("softmax", "float32"))
    peak = record.metric(
        "fleetbench_edge_kernel_achieved_flop_per_second",
        kernel="peak_fma",
        dtype="float32",
        size="auto",
        timing="timestamp",
    )
    assert peak is not None and peak > 0
    # the probe was sized: at least the configured start, and a dispatch of the target length or a note why not
    sizing = next(r["sizing"] for r in rows if (r["kernel"], r["dtype"]) == ("peak_fma", "float32"))
    assert sizing["workgroups"] >= SMALL["peak_workgroups"] and sizing["iterations"] >= SMALL["peak_iterations"]
    assert sizing["dispatch_s"] >= SMALL["peak_dispatch_s"] or sizing["note"]
    ratio = record.summary["gemm_peak_ratio"]["gemm_vec4 float32 128"]
    assert ratio == pytest.approx(
        record.metric("fleetbench_edge_gemm_peak_ratio", kernel="gemm_vec4", dtype="float32", size="128")
    )
    assert (
        record.metric(
            "fleetbench_edge_adapter_info",
            vendor=adapter.vendor,
            adapter_type=adapter.adapter_type,
            driver=adapter.driver,
            shader_f16="yes" if adapter.has("shader-f16") else "no",
            timestamp_query="yes",
            subgroups="yes" if adapter.has("subgroup") else "no",
            cooperative_matrix=adapter.cooperative_matrix_label,
        )
        == 1
    )
    run_dir = tmp_path / "results" / "all"
    assert promtool_problems(run_dir / "fleetbench_edge_rank0.prom") == ""
    table = json.loads((run_dir / "edge_results.json").read_text())
    assert len(table["kernels"]) == len(rows) and table["adapter"]["vulkan_extensions"]
    assert (run_dir / "edge_results.csv").read_text().count("\n") == len(rows) + 1
    pngs = sorted(p.name for p in run_dir.glob("edge_latency_*.png"))
    assert pngs == sorted(f"edge_latency_{k}.png" for k in {r["kernel"] for r in rows})
    assert all((run_dir / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert [r.run_id for r in read_records(run_dir)] == ["all"]


@pytest.mark.vulkan
def test_wallclock_path_times_a_synchronised_submit(adapter: gpu.AdapterReport, tmp_path: Path) -> None:
    from fleetbench.edge.run import run as run_edge

    record = run_edge(
        *run_args(config(tmp_path, "wall", timing="wallclock", kernels=["silu", "copy"], dtypes=["float32"]))
    ).record
    rows = record.summary["kernels"]
    assert [r["timing"] for r in rows] == ["wallclock", "wallclock"] and all(r["correct"] for r in rows)
    assert record.summary["timestamp_period_ns"] is None
    assert record.metric(
        "fleetbench_edge_kernel_latency_percentile_seconds",
        kernel="copy",
        dtype="u32",
        size="1MiB",
        timing="wallclock",
        percentile="p50",
    ) == pytest.approx(rows[1]["p50_s"])


@pytest.mark.vulkan
def test_timestamp_and_wallclock_agree_on_a_long_dispatch(adapter: gpu.AdapterReport, tmp_path: Path) -> None:
    # Timestamps bracket the GPU work only; the host clock adds submit and wake-up overhead, so it can be
    # larger but not smaller (within jitter) and not wildly larger on a dispatch of tens of milliseconds.
    if not adapter.has("timestamp-query"):
        pytest.skip(f"{adapter.device} has no timestamp-query")
    wgpu = optional_module("wgpu")
    device = gpu.open_device(gpu.select_adapter("vulkan", None, "high-performance"), ["timestamp-query"])
    cfg = EdgeConfig(peak_workgroups=16, peak_iterations=1024)
    (problem,) = kernels.build_problems(cfg, ["peak_fma"], ["float32"], adapter.limits)
    code = kernels.wgsl_source(_kernels_dir(), problem.spec, "float32")
    module = device.create_shader_module(code=code)
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    usage = wgpu.BufferUsage
    params = device.create_buffer_with_data(data=problem.params, usage=usage.UNIFORM)
    out = device.create_buffer(size=problem.output_nbytes, usage=usage.STORAGE | usage.COPY_SRC)
    group = device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate([params, out])
        ],
    )
    stamps = timing.DispatchTimer(device, pipeline, group, problem.groups, "timestamp", gpu.timestamp_period_ns(device))
    clock = timing.DispatchTimer(device, pipeline, group, problem.groups, "wallclock")
    clock.run_once()
    gpu_s, host_s = [], []
    for _ in range(5):  # interleaved, so load on the machine hits both alike
        gpu_s += stamps.sample(1)
        host_s += clock.sample(1)
    assert kernels.compare(problem, device.queue.read_buffer(out))[2]
    assert statistics.median(host_s) > 0.5 * statistics.median(gpu_s)
    assert statistics.median(host_s) < 20 * statistics.median(gpu_s) + 0.05


@pytest.mark.vulkan
def test_a_wrong_kernel_fails_the_run_and_says_which(
    adapter: gpu.AdapterReport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "kernels"
    shutil.copytree(_kernels_dir(), broken)
    source = broken / "silu.wgsl"
    text = source.read_text()
    assert "v / (vec4<f32>(1.0) + exp(-v))" in text
    source.write_text(text.replace("v / (vec4<f32>(1.0) + exp(-v))", "v / (vec4<f32>(1.0) + exp(v))"))
    monkeypatch.setenv(KERNELS_ENV, str(broken))
    from fleetbench.edge.run import run as run_edge

    with pytest.raises(UserError, match=r"wrong results: silu float32 4K \(max rel error") as caught:
        run_edge(*run_args(config(tmp_path, "wrong", kernels=["silu", "copy"], dtypes=["float32"])))
    assert caught.value.exit_code == 1
    (record,) = read_records(tmp_path / "results" / "wrong")
    assert record.status == "failed" and "silu float32" in (record.error or "")
    # What was measured still comes back (JobFailed), so the CLI shows the tables before the error line.
    assert isinstance(caught.value, JobFailed) and caught.value.result.record == record
    assert [(r.kernel, r.correct) for r in caught.value.result.view.rows] == [("silu", False), ("copy", True)]
    assert record.metric("fleetbench_edge_kernel_correct", kernel="silu", dtype="float32", size="4K") == 0
    assert record.metric("fleetbench_edge_kernel_correct", kernel="copy", dtype="u32", size="1MiB") == 1


@pytest.mark.vulkan
def test_adapter_limits_are_checked_before_anything_is_allocated(adapter: gpu.AdapterReport) -> None:
    limit = adapter.limits["max-storage-buffer-binding-size"]
    n = next(n for n in range(128, 16385, 128) if n * n * 4 > limit)
    (problem,) = kernels.build_problems(EdgeConfig(gemm_sizes=[n]), ["gemm_vec4"], ["float32"], adapter.limits)
    with pytest.raises(
        UserError,
        match=r"max-storage-buffer-binding-size\); accepted: edge.gemm_sizes multiples "
        r"of 128 up to \d+",
    ):
        kernels.check_limits(problem, adapter.limits, adapter.device)
    largest = int(str(problem.accepted).split("up to ")[1].split()[0])
    assert largest * largest * 4 <= limit < (largest + 128) ** 2 * 4


@pytest.mark.vulkan
def test_demo_stage_runs_the_quick_set(adapter: gpu.AdapterReport, tmp_path: Path) -> None:
    from fleetbench.edge.plan import QUICK
    from fleetbench.edge.stage import run_stage

    cfg = FleetbenchConfig(
        run=RunConfig(results_dir=tmp_path, run_id="demo"), edge=EdgeConfig(spirv_dir=tmp_path / "spirv")
    )
    record = run_stage(cfg, RunContext.start(cfg)).record
    assert record.status == "ok" and record.benchmark == "edge"
    kernels_run = [r["kernel"] for r in record.summary["kernels"]]
    expected = [
        k for k in QUICK["kernels"] if k in WGPU_KERNELS and (spirv.glslc() is not None or not k.endswith("_spirv"))
    ]
    # gemm_coopmat (in the quick set) runs after the wgpu kernels where the driver offers the extension.
    assert kernels_run == expected + (["gemm_coopmat"] if adapter.cooperative_matrix.get(COOPMAT_EXTENSION) else [])
    assert record.config["gemm_sizes"] == [256] and record.config["spirv_dir"] == str(tmp_path / "spirv")


@pytest.mark.vulkan
def test_without_glslc_spirv_kernels_are_skipped_by_default_and_refused_when_asked(
    adapter: gpu.AdapterReport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetbench.edge.plan import plan_edge

    monkeypatch.setenv("FLEETBENCH_GLSLC", str(tmp_path / "no-glslc"))
    base = {**SMALL, "backend": "vulkan", "dtypes": ["float32"]}
    plan = plan_edge(EdgeConfig.model_validate(base))
    assert "SPIR-V kernels skipped: glslc not found (Debian package glslc)" in plan.notes
    assert {c.problem.spec.name for c in plan.compiled} == {
        k
        for k in WGPU_KERNELS
        if not k.endswith("_spirv") and not kernels.KERNELS[k].missing_features(adapter.features)
    }
    with pytest.raises(UserError, match="glslc not found"):
        plan_edge(EdgeConfig.model_validate({**base, "kernels": ["peak_fma_spirv"]}))
    # The quick set's kernels are defaults too: skipped with the same note, not refused.
    from fleetbench.edge.plan import quick

    plan = plan_edge(quick(EdgeConfig.model_validate(base)))
    assert "SPIR-V kernels skipped: glslc not found (Debian package glslc)" in plan.notes
    assert all(not c.problem.spec.name.endswith("_spirv") for c in plan.compiled)


@pytest.mark.vulkan
def test_subgroup_size_is_measured_and_the_subgroup_gemm_needs_it(adapter: gpu.AdapterReport) -> None:
    if not adapter.has("subgroup"):
        pytest.skip(f"{adapter.device} does not offer subgroups")
    from fleetbench.edge.plan import plan_edge

    cfg = EdgeConfig.model_validate({**SMALL, "backend": "vulkan", "dtypes": ["float32"], "kernels": ["gemm_subgroup"]})
    plan = plan_edge(cfg)
    assert plan.adapter is not None
    size = plan.adapter.subgroup_size
    assert size is not None and size >= 4 and size & (size - 1) == 0
    if plan.adapter.device.startswith("llvmpipe") and "256 bits" in plan.adapter.device:
        assert size == 8  # one subgroup per 256-bit SIMD register of f32 lanes
    assert plan.adapter.as_dict()["subgroup_size"] == size
    (problem,) = [c.problem for c in plan.compiled]
    assert problem.groups == (1, 2, 1)  # 128x128: one 128-column tile wide, two 64-row tiles high


@pytest.mark.vulkan
def test_texture_gemm_covers_every_tile_in_its_workgroup_order(adapter: gpu.AdapterReport, tmp_path: Path) -> None:
    # gemm_texture maps workgroups to tiles in pairs of row blocks per stripe of B: at 384 that is 3
    # stripes x 6 row blocks, so a wrong mapping leaves tiles unwritten or writes one twice.
    if kernels.KERNELS["gemm_texture"].missing_features(adapter.features):
        pytest.skip(f"{adapter.device} does not offer subgroups")
    from fleetbench.edge.run import run as run_edge

    dtypes = ["float32", "float16"] if adapter.has("shader-f16") else ["float32"]
    cfg = config(tmp_path, "tex", kernels=["gemm_texture"], dtypes=dtypes, gemm_sizes=[384, 128])
    record = run_edge(cfg, RunContext.start(cfg)).record
    assert record.status == "ok", record.error
    rows = record.summary["kernels"]
    assert {(r["dtype"], r["size"]) for r in rows} == {(d, s) for d in dtypes for s in ("384", "128")}
    for row in rows:
        assert row["correct"] and row["max_rel_error"] <= kernels.TOLERANCE[row["dtype"]], row


@pytest.mark.vulkan
def test_texture_inputs_are_checked_against_the_texture_size_limit(adapter: gpu.AdapterReport) -> None:
    # Phones allow 4096 or 8192 texels per side: gemm_texture's A and B are n rows high.
    small = {**adapter.limits, "max-texture-dimension-2d": 512}
    (problem,) = kernels.build_problems(EdgeConfig(gemm_sizes=[1024]), ["gemm_texture"], ["float32"], small)
    assert problem.texture_sizes == [(256, 1024), (256, 1024)]
    assert problem.buffer_sizes() == [problem.output_nbytes]
    with pytest.raises(
        UserError,
        match=r"gemm_texture float32 1024: needs a 256x1024 texture but .* allows 512 texels per side "
        r"\(max-texture-dimension-2d\); accepted: edge.gemm_sizes multiples of 128 up to 512 for gemm_texture",
    ):
        kernels.check_limits(problem, small, adapter.device)
    (fits,) = kernels.build_problems(EdgeConfig(gemm_sizes=[512]), ["gemm_texture"], ["float32"], small)
    kernels.check_limits(fits, small, adapter.device)
    no_textures = {**adapter.limits, "max-storage-textures-per-shader-stage": 1}
    with pytest.raises(UserError, match=r"gemm_texture: needs 2 storage textures but .* allows 1 per shader stage"):
        kernels.check_limits(fits, no_textures, adapter.device)


# Element 1 of each wide array, unpacked: values 4-7 of the buffer through Wide4, 8-15 through Wide8.
UNPACK_WIDE = """
@group(0) @binding(0) var<storage, read> W4: array<Wide4>;
@group(0) @binding(1) var<storage, read> W8: array<Wide8>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(1)
fn main() {
    out[0] = wide4(W4[1]);
    out[1] = wide8_lo(W8[1]);
    out[2] = wide8_hi(W8[1]);
}
"""


@pytest.mark.vulkan
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_wide_loads_unpack_64_bit_words_in_memory_order(adapter: gpu.AdapterReport, dtype: str) -> None:
    # gemm_subgroup reads A and B through the prelude's Wide4/Wide8 words: value i of a word must be
    # element i of the array in memory, for f32 (2 per u64) and f16 (4 per u64) alike.
    if not adapter.has("shader-int64") or (dtype == "float16" and not adapter.has("shader-f16")):
        pytest.skip(f"{adapter.device} lacks shader-int64 or shader-f16")
    wgpu = optional_module("wgpu")
    features = ["shader-int64"] + (["shader-f16"] if dtype == "float16" else [])
    device = gpu.open_device(gpu.select_adapter("vulkan", None, "high-performance"), features)
    code = kernels.wgsl_prelude(dtype, ("shader-int64",)) + UNPACK_WIDE
    module = device.create_shader_module(code=code)
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    values = np.arange(1, 17, dtype=kernels.numpy_dtype(dtype)) / 4
    usage = wgpu.BufferUsage
    src = device.create_buffer_with_data(data=values.tobytes(), usage=usage.STORAGE)
    out = device.create_buffer(size=48, usage=usage.STORAGE | usage.COPY_SRC)
    group = device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in enumerate([src, src, out])
        ],
    )
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(1)
    compute.end()
    device.queue.submit([encoder.finish()])
    got = np.frombuffer(device.queue.read_buffer(out), np.float32)
    np.testing.assert_array_equal(got, np.concatenate([values[4:8], values[8:16]]).astype(np.float32))


def test_only_kernels_that_need_shader_int64_get_64_bit_types_in_their_prelude() -> None:
    # naga refuses a module with 64-bit types on a device opened without shader-int64, so every other
    # kernel must compile without them.
    for dtype in ("float32", "float16"):
        assert "u64" not in kernels.wgsl_prelude(dtype)
        assert "u64" in kernels.wgsl_prelude(dtype, kernels.KERNELS["gemm_subgroup"].features)


def test_only_texture_kernels_get_an_input_texture_type_of_their_storage_dtype() -> None:
    texture_kernels = [k for k, spec in kernels.KERNELS.items() if spec.texture_inputs]
    assert texture_kernels == ["gemm_texture"]
    for dtype, texel in (("float32", "rgba32float"), ("float16", "rgba16float")):
        assert "InTex" not in kernels.wgsl_prelude(dtype)
        prelude = kernels.wgsl_prelude(dtype, kernels.KERNELS["gemm_texture"].features, texture_inputs=True)
        assert f"alias InTex = texture_storage_2d<{texel}, read>;" in prelude


@pytest.mark.vulkan
def test_kernels_needing_a_missing_feature_or_wider_subgroups_are_skipped_or_refused(
    adapter: gpu.AdapterReport,
) -> None:
    from fleetbench.edge.plan import _too_narrow, _with_features

    wanted = ["gemm_vec4", "gemm_subgroup", "peak_fma"]
    lacking = gpu.AdapterReport(**{**vars(adapter), "features": [f for f in adapter.features if f != "subgroup"]})
    notes: list[str] = []
    assert _with_features(EdgeConfig(), lacking, wanted, notes) == ["gemm_vec4", "peak_fma"]
    assert notes == [f"gemm_subgroup skipped: {adapter.device} does not offer subgroup"]
    with pytest.raises(
        UserError,
        match=r"edge kernel gemm_subgroup needs the 'subgroup' feature, which .* lacks; "
        r"accepted: gemm_vec4, peak_fma",
    ):
        _with_features(EdgeConfig(kernels=wanted), lacking, wanted, [])

    no_int64 = gpu.AdapterReport(**{**vars(adapter), "features": [f for f in adapter.features if f != "shader-int64"]})
    notes = []
    assert _with_features(EdgeConfig(), no_int64, wanted, notes) == ["gemm_vec4", "peak_fma"]
    assert notes == [f"gemm_subgroup skipped: {adapter.device} does not offer shader-int64"]

    narrow = gpu.AdapterReport(**{**vars(adapter), "subgroup_size": 4})
    notes = []
    assert _too_narrow(EdgeConfig(), narrow, wanted, notes) == {"gemm_subgroup"}
    assert notes == [
        f"gemm_subgroup skipped: gemm_subgroup needs subgroups of at least 8 invocations; {adapter.device} runs 4"
    ]
    with pytest.raises(
        UserError, match=r"needs subgroups of at least 8 invocations.*; accepted: gemm_vec4 or gemm_tiled"
    ):
        _too_narrow(EdgeConfig(kernels=wanted), narrow, wanted, [])
    wide = gpu.AdapterReport(**{**vars(adapter), "subgroup_size": 32})
    assert _too_narrow(EdgeConfig(kernels=wanted), wide, wanted, []) == set()


# --- without a GPU ------------------------------------------------------------------------------------
def test_spirv_builds_once_per_source_and_flags(tmp_path: Path) -> None:
    assert spirv.glslc() is not None, "glslc missing: make setup installs it (Debian package glslc)"
    source = tmp_path / "k.comp"
    source.write_text((_kernels_dir() / "glsl" / "peak_fma.comp").read_text())
    first = spirv.build(source, "float32", tmp_path / "out")
    again = spirv.build(source, "float32", tmp_path / "out")
    half = spirv.build(source, "float16", tmp_path / "out")
    assert first == again and first != half and first.read_bytes() != half.read_bytes()
    source.write_text(source.read_text().replace("uint m = base", "uint m = 1u + base"))
    assert spirv.build(source, "float32", tmp_path / "out") != first
    source.write_text("#version 450\nvoid main() { this is not glsl }\n")
    with pytest.raises(UserError, match=r"glslc failed on .*k.comp \(float32\)"):
        spirv.build(source, "float32", tmp_path / "out")
    assert not list((tmp_path / "out").glob(".*tmp"))


def test_statistics_match_numpy() -> None:
    rng = np.random.default_rng(1)
    values = list(rng.exponential(size=101))
    for q in (50, 90, 99):
        assert timing.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert timing.coefficient_of_variation([1.0, 1.0, 1.0]) == 0
    assert timing.coefficient_of_variation([1.0, 3.0]) == pytest.approx(np.std([1, 3], ddof=1) / 2)
    assert timing.trimmed_mean([100.0, *[1.0] * 8, 0.0], 0.1) == 1.0


def test_tries_stop_when_the_median_is_stable_or_the_bound_is_hit() -> None:
    steady = iter([[1.0, 1.0], [1.01, 1.0], [1.0, 0.99], [5.0]])
    m = timing.measure_until_stable(lambda: next(steady), "wallclock", 3, 6, 0.05)
    assert m.stable and len(m.tries) == 3 and m.variation < 0.05
    noisy = iter([[1.0], [2.0], [1.0], [2.0], [1.0], [2.0], [9.0]])
    m = timing.measure_until_stable(lambda: next(noisy), "wallclock", 2, 5, 0.05)
    assert not m.stable and len(m.tries) == 5 and m.variation > 0.3


def test_gemm_peak_ratio_is_against_the_f32_probe_for_every_storage_dtype() -> None:
    from fleetbench.edge.export import peak_ratios
    from fleetbench.edge.rows import KernelRow

    def row(kernel: str, dtype: str, flop_per_second: float) -> KernelRow:
        return KernelRow(
            kernel, "wgsl", dtype, "1024", "timestamp", True, 0.0, 0.0, 0.0,
            flop_per_second=flop_per_second, latencies_s=[1.0],
        )  # fmt: skip

    rows = [
        row("peak_fma", "float32", 140e9),
        row("peak_fma_spirv", "float32", 130e9),
        row("peak_fma", "float16", 26e9),  # emulated f16: not the ceiling of a GEMM that computes in f32
        row("gemm_subgroup", "float32", 56e9),
        row("gemm_subgroup", "float16", 52e9),
    ]
    ratios = peak_ratios(rows)
    assert ratios == {
        "gemm_subgroup float32 1024": pytest.approx(0.4),
        "gemm_subgroup float16 1024": pytest.approx(52 / 140),
    }
    assert rows[4].peak_ratio == pytest.approx(52 / 140)
    # no f32 probe in the run: no ratio rather than one against the wrong ceiling
    assert peak_ratios([row("peak_fma", "float16", 26e9), row("gemm_vec4", "float16", 20e9)]) == {}
    # the chain count that reaches the peak depends on the driver: the fastest probe is the ceiling
    other_driver = [row("peak_fma", "float32", 70e9), row("peak_fma_2chain", "float32", 106e9)]
    assert peak_ratios([*other_driver, row("gemm_subgroup", "float32", 53e9)]) == {
        "gemm_subgroup float32 1024": pytest.approx(0.5)
    }


def test_a_gemm_above_the_measured_peak_is_refused_with_the_reason_not_published() -> None:
    from fleetbench.edge.export import peak_ratios, refused_ratios
    from fleetbench.edge.rows import KernelRow

    def row(kernel: str, flop_per_second: float) -> KernelRow:
        return KernelRow(
            kernel, "wgsl", "float32", "4096", "timestamp", True, 0.0, 0.0, 0.0,
            flop_per_second=flop_per_second, latencies_s=[1.0],
        )  # fmt: skip

    # the H100's first run: a probe that used a fraction of the device, a GEMM at 465 % of it
    rows = [row("peak_fma", 4.591e12), row("gemm_vec4", 21.35e12), row("gemm_subgroup", 2.0e12)]
    assert peak_ratios(rows) == {"gemm_subgroup float32 4096": pytest.approx(2.0 / 4.591)}
    assert rows[1].peak_ratio is None
    reason = refused_ratios(rows)["gemm_vec4 float32 4096"]
    assert "4.650 > 1" in reason and "did not reach the device's peak" in reason


def test_peak_sizing_fills_the_device_then_lengthens_the_dispatch() -> None:
    from fleetbench.edge.peak_sizing import size_probe

    # a model device: 132 units of 8 workgroups each; fewer workgroups leave units idle; 5 us launch cost
    def seconds_at(workgroups: int, iterations: int) -> float:
        busy = min(workgroups, 132 * 8) / (132 * 8)
        return workgroups * 256 * iterations * 24 / (60e12 * busy) + 5e-6

    def flops_at(workgroups: int, iterations: int) -> float:
        return workgroups * 256 * iterations * 24.0

    sizing = size_probe(seconds_at, flops_at, 64, 1024, 0.1, 1 << 20)
    assert sizing.workgroups >= 132 * 8  # every unit at full occupancy
    assert sizing.seconds >= 0.1 and not sizing.note
    assert sizing.iterations > 1024  # the count check's 1024 steps do not cap the timed work
    assert sizing.steps[-1].flop_per_second == pytest.approx(60e12, rel=0.01)
    # a device whose output buffer allows few workgroups and a cap on steps: said, not hidden
    capped = size_probe(lambda w, i: w * i * 1e-12, flops_at, 4, 16, 10.0, 8)
    assert capped.workgroups == 8 and "short of 10000 ms" in capped.note


def test_the_sized_peak_dispatch_is_exact_at_any_step_count() -> None:
    limits = {"max-compute-workgroups-per-dimension": 65535}
    problem = kernels.peak_problem(kernels.KERNELS["peak_fma"], "float16", 2, 1 << 20, limits, timed=True)
    ref = problem.reference()
    # x -> 1 - x an even number of times: every lane back at its start, whatever the step count
    assert ref[0] == pytest.approx(sum(m / 256 for m in range(12)))
    assert problem.size == "auto" and problem.flops == 2 * 256 * (1 << 20) * 12 * 2
    assert kernels.compare(problem, ref.astype(np.float32).tobytes())[2] is True
    # one step short (an odd count) leaves every lane at 1 - start: caught
    odd = (12 - ref).astype(np.float32).tobytes()
    assert kernels.compare(problem, odd)[2] is False


@pytest.mark.parametrize(("probe", "chains"), [("peak_fma", 3), ("peak_fma_2chain", 2), ("peak_fma_4chain", 4)])
def test_peak_probe_reference_counts_every_step(probe: str, chains: int) -> None:
    cfg = EdgeConfig(peak_workgroups=2, peak_iterations=16)
    limits = {
        "max-compute-workgroups-per-dimension": 65535,
        "max-storage-buffer-binding-size": 1 << 27,
        "max-buffer-size": 1 << 28,
    }
    (problem,) = kernels.build_problems(cfg, [probe], ["float16"], limits)
    ref = problem.reference()
    lanes = 4 * chains
    # invocation 0 starts its lanes (vec4 chains) at 0/256 .. (lanes - 1)/256 and adds 16 * (1/16) to each
    assert ref[0] == pytest.approx(sum(m / 256 for m in range(lanes)) + lanes)
    assert problem.flops == 2 * 256 * 16 * lanes * 2
    # one step short would be off by lanes/16: the exact comparison catches it
    short = (ref - lanes / 16).astype(np.float32).tobytes()
    assert kernels.compare(problem, short)[2] is False
    assert kernels.compare(problem, ref.astype(np.float32).tobytes())[2] is True


@pytest.mark.parametrize("name", ["gemm_subgroup", "gemm_texture"])
def test_the_subgroup_gemms_are_written_out_from_their_unroll_lines(name: str) -> None:
    # llvmpipe does not unroll loops over constants: the 64 rows of the tile must come out as straight-line code.
    spec = kernels.KERNELS[name]
    source = kernels.wgsl_source(_kernels_dir(), spec, "float32")
    assert source.startswith(kernels.wgsl_prelude("float32", spec.features, spec.texture_inputs))
    lines = [line.strip() for line in source.splitlines()]
    assert not [line for line in lines if line.startswith(kernels.UNROLL_MARK)]
    assert [line for line in lines if line.startswith("var c")] == [
        f"var c{i} = Acc(vec4<f32>(0.0), vec4<f32>(0.0));" for i in range(64)
    ]
    loads = [line for line in lines if line.startswith("let a")]
    assert len(loads) == 8 and all(
        f"let a{j} = " in loads[j] and f"row + {8 * j}u + lane" in loads[j] for j in range(8)
    )
    assert [line for line in lines if " = step(c" in line] == [
        f"c{i} = step(c{i}, subgroupBroadcast(a{i // 8}, {i % 8}u), b);" for i in range(64)
    ]
    assert [line for line in lines if line.startswith("store(row + ") and "poison" not in line] == [
        f"store(row + {i}u, N4, co, c{i});" for i in range(64)
    ]


def test_no_wgsl_kernel_keeps_an_unroll_line_and_the_peak_probes_step_every_chain_16_times() -> None:
    for spec in kernels.KERNELS.values():
        if spec.lang == "wgsl":
            for dtype in spec.dtypes:
                lines = kernels.wgsl_source(_kernels_dir(), spec, dtype).splitlines()
                assert not [line for line in lines if line.lstrip().startswith(kernels.UNROLL_MARK)], spec.name
    source = kernels.wgsl_source(_kernels_dir(), kernels.KERNELS["peak_fma"], "float32")
    for chains in (3, 2, 4):  # main, two_chains, four_chains, in file order
        source = source[source.index("for (var k = 0u") :]
        body = source[: source.index("}")].splitlines()[1:-1]
        assert [line.strip() for line in body] == [
            f"x{s % chains} = fma(x{s % chains}, a, b);" for s in range(16 * chains)
        ]
        source = source[1:]


def test_unroll_lines_expand_in_place_with_their_indentation_and_expressions() -> None:
    text = "fn f() {\n    //! unroll i in 2..5: let v{i} = w[{(i - 2) * 4 + i % 2}] / {i / 2};\n}\n"
    assert kernels.expand_unrolls(text, "k.wgsl") == (
        "fn f() {\n    let v2 = w[0] / 1;\n    let v3 = w[5] / 1;\n    let v4 = w[8] / 2;\n}\n"
    )
    assert kernels.expand_unrolls("// a comment that mentions //! unroll\n", "k.wgsl").count("\n") == 1


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("//! unrol i in 0..4: x{i};", r"k\.wgsl:2: bad unroll directive 'unrol i in 0\.\.4: x\{i\};'"),
        ("//! unroll i in 0..64 x{i};", r"k\.wgsl:2: bad unroll directive"),
        ("//! unroll i in 0..64:", r"k\.wgsl:2: bad unroll directive"),
        ("//! unroll i in 4..4: x{i};", r"k\.wgsl:2: unroll range 4\.\.4 is empty"),
        ("//! unroll i in 0..4: x{j};", r"k\.wgsl:2: cannot evaluate \{j\} in unroll template"),
        ("//! unroll i in 0..4: x{i ** 2};", r"k\.wgsl:2: cannot evaluate \{i \*\* 2\}"),
        ("//! unroll i in 0..4: x{i / 0};", r"k\.wgsl:2: cannot evaluate \{i / 0\}"),
        (
            "//! unroll i in 0..4: if (x{i}) { y = 1; }",
            r"k\.wgsl:2: cannot evaluate \{ y = 1; \}.*no braces but \{expr\}",
        ),
        ("//! unroll i in 0..4: x{i;", r"k\.wgsl:2: unbalanced brace"),
    ],
)
def test_a_bad_unroll_line_is_refused_naming_the_file_and_line(line: str, error: str) -> None:
    with pytest.raises(UserError, match=error):
        kernels.expand_unrolls(f"fn f() {{\n    {line}\n}}\n", "k.wgsl")


def test_kernels_dir_override_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fleetbench.edge import paths

    monkeypatch.setenv(KERNELS_ENV, str(tmp_path / "nope"))
    with pytest.raises(UserError, match=f"{KERNELS_ENV}=.*nope is not a folder"):
        paths.kernels_dir()
    monkeypatch.delenv(KERNELS_ENV)
    assert (paths.kernels_dir() / "gemm_vec4.wgsl").is_file()


def _kernels_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "mobile" / "kernels"


def run_args(cfg: FleetbenchConfig) -> tuple[FleetbenchConfig, RunContext]:
    """A job's arguments: its config and a run context from it."""
    return cfg, RunContext.start(cfg)
