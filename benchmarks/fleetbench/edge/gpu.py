"""Pick a wgpu adapter (backend, name, power preference), describe it, and open a device on it.

wgpu-py picks Vulkan on Linux/Android-class systems, Metal on macOS and D3D12 on Windows. The backend
comes from `edge.backend` (flag `--backend`), else from `WGPU_BACKEND_TYPE` (wgpu's own variable:
Vulkan, Metal, D3D12, OpenGL), else auto: the primary backends (Vulkan, Metal, D3D12) and no OpenGL,
which wgpu only offers as a compatibility fallback. Among the adapters of the chosen backend,
`edge.adapter` picks by name; otherwise the power preference orders adapter types
(high-performance: discrete, integrated, virtual, CPU; low-power: integrated first).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from fleetbench.edge.native import forward_unexpected, native_stderr, optional_module
from fleetbench.edge.vulkan import COOPERATIVE_MATRIX_EXTENSIONS, match_device
from fleetbench.errors import UserError

BACKEND_ENV = "WGPU_BACKEND_TYPE"
# Our names -> wgpu's BackendType names (adapter.info["backend_type"]) and instance backend flags.
BACKENDS: dict[str, tuple[str, str]] = {
    "vulkan": ("Vulkan", "Vulkan"),
    "metal": ("Metal", "Metal"),
    "d3d12": ("D3D12", "DX12"),
    "opengl": ("OpenGL", "GL"),
}
PRIMARY = ("Vulkan", "Metal", "D3D12")
TYPE_ORDER = {
    "high-performance": ("DiscreteGPU", "IntegratedGPU", "VirtualGPU", "CPU", "Unknown"),
    "low-power": ("IntegratedGPU", "DiscreteGPU", "VirtualGPU", "CPU", "Unknown"),
}
# Features worth a column in the report; the full list goes into the result record.
KEY_FEATURES = ("shader-f16", "subgroup", "timestamp-query", "timestamp-query-inside-passes", "shader-f64")
# Limits the kernels depend on; the device is opened with the adapter's values for these.
KEY_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage",
    "max-storage-textures-per-shader-stage",
    "max-texture-dimension-2d",
)


def resolve_backend(choice: str) -> str:
    """`auto`, or one of BACKENDS; `auto` yields to $WGPU_BACKEND_TYPE when that is set."""
    if choice != "auto":
        if choice not in BACKENDS:
            raise UserError(f"backend {choice!r} is not accepted; accepted: auto, {', '.join(BACKENDS)}")
        return choice
    env = os.environ.get(BACKEND_ENV, "").strip()
    if not env:
        return "auto"
    by_wgpu_name = {wgpu_name.lower(): ours for ours, (wgpu_name, _flag) in BACKENDS.items()}
    ours = by_wgpu_name.get(env.lower()) or (env.lower() if env.lower() in BACKENDS else None)
    if ours is None:
        accepted = ", ".join(wgpu_name for wgpu_name, _flag in BACKENDS.values())
        raise UserError(f"{BACKEND_ENV}={env!r} is not accepted; accepted: {accepted} (or unset it)")
    return ours


def _init_instance(backend: str) -> None:
    """Create wgpu's one global instance with only the backends asked for (no GL probing for Vulkan)."""
    set_instance_extras = optional_module("wgpu.backends.wgpu_native.extras").set_instance_extras
    flags = ["Primary"] if backend == "auto" else [BACKENDS[backend][1]]
    # RuntimeError: the instance exists already (an earlier run in this process); its adapters are filtered.
    with contextlib.suppress(RuntimeError):
        set_instance_extras(backends=flags)


def enumerate_adapters(backend: str) -> list[Any]:
    """wgpu's adapters of `backend` (`auto`: the primary backends); native probe output is filtered."""
    wgpu = optional_module("wgpu")
    sink: list[str] = []
    try:
        with native_stderr(sink):
            _init_instance(backend)
            adapters = list(wgpu.gpu.enumerate_adapters_sync())
    finally:
        forward_unexpected(sink)
    if backend == "auto":
        return [a for a in adapters if a.info.get("backend_type") in PRIMARY]
    wanted = BACKENDS[backend][0]
    return [a for a in adapters if a.info.get("backend_type") == wanted]


def describe(adapter: Any) -> str:
    """`device (backend, type)` of an adapter, for messages."""
    return (
        f"{adapter.info.get('device') or '?'} ({adapter.info.get('backend_type')}, {adapter.info.get('adapter_type')})"
    )


def select_adapter(backend_choice: str, name: str | None, power_preference: str) -> Any:
    """The adapter to run on: by backend, then name, then the power preference's type order.

    Raises UserError when wgpu is missing or no adapter fits, naming what this machine has.
    """
    backend = resolve_backend(backend_choice)
    try:
        optional_module("wgpu")  # fails without the wgpu-native library
    except ImportError as exc:
        raise UserError(f"the edge runner needs wgpu-py: pip install wgpu ({exc})") from None
    adapters = enumerate_adapters(backend)
    label = "auto (Vulkan, Metal, D3D12)" if backend == "auto" else backend
    if not adapters:
        hint = {
            "auto": "install a Vulkan driver (mesa-vulkan-drivers gives lavapipe), or try --backend opengl",
            "vulkan": "install a Vulkan driver (mesa-vulkan-drivers gives lavapipe)",
        }.get(backend, "accepted: a backend this machine has (see fleetbench edge info)")
        raise UserError(f"no wgpu adapter for backend {label} on this machine; {hint}")
    if name is not None:
        matching = [a for a in adapters if name.lower() in str(a.info.get("device", "")).lower()]
        if not matching:
            seen = "; ".join(describe(a) for a in adapters)
            raise UserError(f"no adapter named like {name!r} for backend {label}; adapters: {seen}")
        adapters = matching
    order = TYPE_ORDER[power_preference]
    return min(
        adapters, key=lambda a: order.index(a.info.get("adapter_type")) if a.info.get("adapter_type") in order else 9
    )


@dataclass
class AdapterReport:
    """What an adapter offers: identity, features, limits, Vulkan extensions and the measured subgroup size."""

    vendor: str
    device: str
    backend: str  # our lower-case name: vulkan, metal, d3d12, opengl
    driver: str
    adapter_type: str
    vendor_id: int
    device_id: int
    features: list[str]
    limits: dict[str, int]
    vulkan_api: str | None = None
    vulkan_extensions: list[str] | None = None
    cooperative_matrix: dict[str, bool | None] = field(default_factory=dict)
    subgroup_size: int | None = None  # measured on the device (see measure_subgroup_size); None: not measured

    def has(self, feature: str) -> bool:
        """Whether the adapter offers the wgpu feature `feature`."""
        return feature in self.features

    @property
    def cooperative_matrix_label(self) -> str:
        """yes / no / unknown (not Vulkan, or the extension list could not be read)."""
        values = list(self.cooperative_matrix.values())
        if not values or any(v is None for v in values):
            return "unknown"
        return "yes" if any(values) else "no"

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (edge_results.json, `edge info --json`), key features flagged."""
        return {
            "vendor": self.vendor,
            "device": self.device,
            "backend": self.backend,
            "driver": self.driver,
            "adapter_type": self.adapter_type,
            "vendor_id": self.vendor_id,
            "device_id": self.device_id,
            "key_features": {f: self.has(f) for f in KEY_FEATURES},
            "features": self.features,
            "limits": self.limits,
            "vulkan_api": self.vulkan_api,
            "cooperative_matrix": self.cooperative_matrix,
            "vulkan_extensions": self.vulkan_extensions,
            "subgroup_size": self.subgroup_size,
        }


def report(adapter: Any) -> AdapterReport:
    """Describe `adapter`; for a Vulkan adapter the extension list comes from libvulkan."""
    info = adapter.info
    by_wgpu_name = {wgpu_name: ours for ours, (wgpu_name, _flag) in BACKENDS.items()}
    backend = by_wgpu_name.get(info.get("backend_type"), str(info.get("backend_type", "unknown")).lower())
    rep = AdapterReport(
        vendor=info.get("vendor") or f"0x{info.get('vendor_id', 0):04x}",
        device=info.get("device") or "unknown adapter",
        backend=backend,
        driver=info.get("description") or "unknown",
        adapter_type=info.get("adapter_type", "Unknown"),
        vendor_id=int(info.get("vendor_id", 0)),
        device_id=int(info.get("device_id", 0)),
        features=sorted(adapter.features),
        limits={k: int(v) for k, v in sorted(dict(adapter.limits).items())},
    )
    if backend == "vulkan":
        vk = match_device(rep.vendor_id, rep.device_id, rep.device)
        if vk is not None:
            rep.vulkan_api = vk.api_version
            rep.vulkan_extensions = list(vk.extensions)
            rep.cooperative_matrix = {ext: vk.has(ext) for ext in COOPERATIVE_MATRIX_EXTENSIONS}
        else:
            rep.cooperative_matrix = dict.fromkeys(COOPERATIVE_MATRIX_EXTENSIONS)
    return rep


def open_device(adapter: Any, features: list[str]) -> Any:
    """A device with the adapter's own values for the limits the kernels need (not WebGPU's defaults)."""
    limits = {k: adapter.limits[k] for k in KEY_LIMITS if k in adapter.limits}
    try:
        return adapter.request_device_sync(required_features=features, required_limits=limits)
    except Exception as exc:  # wgpu raises plain RuntimeError/ValueError subclasses here
        raise UserError(f"could not open a device on {describe(adapter)}: {exc}") from None


def timestamp_period_ns(device: Any) -> float:
    """Nanoseconds per timestamp tick (wgpuQueueGetTimestampPeriod; wgpu-py has no public wrapper)."""
    lib = optional_module("wgpu.backends.wgpu_native._ffi").lib
    return float(lib.wgpuQueueGetTimestampPeriod(device.queue._internal))


# Every invocation of one 64-wide workgroup writes the subgroup size it runs with.
_SUBGROUP_SIZE_PROBE = """
@group(0) @binding(0) var<storage, read_write> sizes: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32, @builtin(subgroup_size) size: u32) {
    sizes[i] = size;
}
"""


def measure_subgroup_size(device: Any) -> int:
    """The smallest subgroup size a compute dispatch runs with on this device (needs the `subgroup` feature).

    Measured, because wgpu-py 0.32 reports WebGPU's default bounds (4-128) rather than the adapter's.
    Drivers that pick a size per pipeline (Intel) may differ from this probe; kernels that depend on
    the size check it themselves too.
    """
    import numpy as np

    usage = optional_module("wgpu").BufferUsage
    module = device.create_shader_module(code=_SUBGROUP_SIZE_PROBE)
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    out = device.create_buffer(size=64 * 4, usage=usage.STORAGE | usage.COPY_SRC)
    bind_group = device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[{"binding": 0, "resource": {"buffer": out, "offset": 0, "size": out.size}}],
    )
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, bind_group)
    compute.dispatch_workgroups(1, 1, 1)
    compute.end()
    device.queue.submit([encoder.finish()])
    return int(np.frombuffer(device.queue.read_buffer(out), dtype=np.uint32).min())
