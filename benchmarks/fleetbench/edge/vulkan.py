"""Vulkan device extensions through libvulkan (ctypes), to learn what wgpu does not report.

wgpu exposes features and limits but not the device extension list, and llama.cpp-style detection
of `VK_KHR_cooperative_matrix` / `VK_NV_cooperative_matrix2` needs exactly that list. A few ctypes
calls do it without the `vulkan-tools` package: vkCreateInstance (Vulkan 1.0, no layers, no
extensions), vkEnumeratePhysicalDevices, vkGetPhysicalDeviceProperties and
vkEnumerateDeviceExtensionProperties. Anything unexpected (no loader, no ICD, an error code) gives
None: the report then says "unknown" instead of guessing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass
from functools import cache

VK_SUCCESS = 0
VK_INCOMPLETE = 5
VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
VK_MAX_EXTENSION_NAME_SIZE = 256
VK_MAX_PHYSICAL_DEVICE_NAME_SIZE = 256
DEVICE_TYPES = {0: "other", 1: "integrated-gpu", 2: "discrete-gpu", 3: "virtual-gpu", 4: "cpu"}

COOPERATIVE_MATRIX_EXTENSIONS = ("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2")


class _ApplicationInfo(ctypes.Structure):
    _fields_ = (
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    )


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = (
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(_ApplicationInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    )


class _ExtensionProperties(ctypes.Structure):
    _fields_ = (("extensionName", ctypes.c_char * VK_MAX_EXTENSION_NAME_SIZE), ("specVersion", ctypes.c_uint32))


# VkPhysicalDeviceProperties starts with these fields; the rest (limits, sparse properties) is
# read into padding. 4096 bytes comfortably exceed the real size (824 bytes on 64-bit systems).
class _PhysicalDeviceProperties(ctypes.Structure):
    _fields_ = (
        ("apiVersion", ctypes.c_uint32),
        ("driverVersion", ctypes.c_uint32),
        ("vendorID", ctypes.c_uint32),
        ("deviceID", ctypes.c_uint32),
        ("deviceType", ctypes.c_int),
        ("deviceName", ctypes.c_char * VK_MAX_PHYSICAL_DEVICE_NAME_SIZE),
        ("rest", ctypes.c_uint8 * 4096),
    )


@dataclass(frozen=True)
class VulkanDevice:
    """A physical device as the Vulkan loader reports it, with its device extensions."""

    name: str
    vendor_id: int
    device_id: int
    device_type: str
    api_version: str
    driver_version_raw: int
    extensions: tuple[str, ...]

    def has(self, extension: str) -> bool:
        """Whether the device offers the Vulkan extension `extension`."""
        return extension in self.extensions


def _version(packed: int) -> str:
    return f"{packed >> 22 & 0x7F}.{packed >> 12 & 0x3FF}.{packed & 0xFFF}"


def _load_loader() -> ctypes.CDLL | None:
    candidates = {
        "linux": ["libvulkan.so.1", "libvulkan.so"],
        "darwin": ["libvulkan.1.dylib", "libMoltenVK.dylib"],
        "win32": ["vulkan-1.dll"],
    }.get(sys.platform, ["libvulkan.so.1"])
    found = ctypes.util.find_library("vulkan")
    for name in [*candidates, *([found] if found else [])]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@cache
def vulkan_devices() -> tuple[VulkanDevice, ...] | None:
    """Every physical device the Vulkan loader sees, with its extensions; None when that cannot be read."""
    lib = _load_loader()
    if lib is None:
        return None
    try:
        return _enumerate(lib)
    except (AttributeError, OSError, ValueError):
        return None


def _enumerate(lib: ctypes.CDLL) -> tuple[VulkanDevice, ...] | None:
    c_void_pp = ctypes.POINTER(ctypes.c_void_p)
    lib.vkCreateInstance.argtypes = (ctypes.POINTER(_InstanceCreateInfo), ctypes.c_void_p, c_void_pp)
    lib.vkCreateInstance.restype = ctypes.c_int
    lib.vkDestroyInstance.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    lib.vkDestroyInstance.restype = None
    lib.vkEnumeratePhysicalDevices.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), c_void_pp)
    lib.vkEnumeratePhysicalDevices.restype = ctypes.c_int
    lib.vkGetPhysicalDeviceProperties.argtypes = (ctypes.c_void_p, ctypes.POINTER(_PhysicalDeviceProperties))
    lib.vkGetPhysicalDeviceProperties.restype = None
    lib.vkEnumerateDeviceExtensionProperties.argtypes = (
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.POINTER(_ExtensionProperties),
    )
    lib.vkEnumerateDeviceExtensionProperties.restype = ctypes.c_int

    app = _ApplicationInfo(
        sType=VK_STRUCTURE_TYPE_APPLICATION_INFO,
        pApplicationName=b"fleetbench",
        pEngineName=b"fleetbench",
        apiVersion=(1 << 22),  # Vulkan 1.0 is enough to enumerate
    )
    info = _InstanceCreateInfo(sType=VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=ctypes.pointer(app))
    instance = ctypes.c_void_p()
    if lib.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != VK_SUCCESS:
        return None
    try:
        count = ctypes.c_uint32(0)
        if lib.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None) not in (VK_SUCCESS, VK_INCOMPLETE):
            return None
        handles = (ctypes.c_void_p * count.value)()
        if lib.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles) not in (VK_SUCCESS, VK_INCOMPLETE):
            return None
        devices = []
        for handle in handles[: count.value]:
            props = _PhysicalDeviceProperties()
            lib.vkGetPhysicalDeviceProperties(handle, ctypes.byref(props))
            devices.append(
                VulkanDevice(
                    name=props.deviceName.decode(errors="replace"),
                    vendor_id=props.vendorID,
                    device_id=props.deviceID,
                    device_type=DEVICE_TYPES.get(props.deviceType, "other"),
                    api_version=_version(props.apiVersion),
                    driver_version_raw=props.driverVersion,
                    extensions=_extensions(lib, handle),
                )
            )
        return tuple(devices)
    finally:
        lib.vkDestroyInstance(instance, None)


def _extensions(lib: ctypes.CDLL, handle: int | None) -> tuple[str, ...]:
    count = ctypes.c_uint32(0)
    if lib.vkEnumerateDeviceExtensionProperties(handle, None, ctypes.byref(count), None) != VK_SUCCESS:
        raise ValueError("vkEnumerateDeviceExtensionProperties failed")
    props = (_ExtensionProperties * count.value)()
    status = lib.vkEnumerateDeviceExtensionProperties(handle, None, ctypes.byref(count), props)
    if status not in (VK_SUCCESS, VK_INCOMPLETE):
        raise ValueError("vkEnumerateDeviceExtensionProperties failed")
    return tuple(sorted(p.extensionName.decode(errors="replace") for p in props[: count.value]))


def match_device(vendor_id: int, device_id: int, name: str) -> VulkanDevice | None:
    """The Vulkan physical device behind a wgpu adapter: same PCI ids, the name as tie-breaker."""
    devices = vulkan_devices()
    if not devices:
        return None
    same_ids = [d for d in devices if d.vendor_id == vendor_id and d.device_id == device_id]
    for device in same_ids:
        if device.name == name:
            return device
    return same_ids[0] if len(same_ids) == 1 else None
