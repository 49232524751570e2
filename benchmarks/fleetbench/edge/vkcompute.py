"""A raw Vulkan compute path, for what wgpu cannot express (cooperative matrices).

Through the `vulkan` package (cffi bindings generated from the Vulkan registry 1.3.275, which holds
VK_KHR_cooperative_matrix): an instance, the physical device of the wgpu adapter (same PCI ids and
name), a device with the extensions and features a kernel needs, device-local buffers filled through
a staging buffer, one compute pipeline from SPIR-V with specialisation constants, and dispatches timed
with timestamp queries, a barrier between dispatches so each is timed alone.

The binding convention is the kernel set's: binding 0 a uniform, inputs next, the output last.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetbench.edge.native import optional_module

__all__ = ["Device", "Features", "find_physical_device", "instance"]

API_1_3 = (1 << 22) | (3 << 12)


def vk() -> Any:
    """The `vulkan` module (ImportError names the package where it is missing)."""
    return optional_module("vulkan")


def instance() -> Any:
    """A Vulkan 1.3 instance, no layers, no extensions."""
    v = vk()
    app = v.VkApplicationInfo(pApplicationName="fleetbench", pEngineName="fleetbench", apiVersion=API_1_3)
    return v.vkCreateInstance(v.VkInstanceCreateInfo(pApplicationInfo=app), None)


def find_physical_device(inst: Any, vendor_id: int, device_id: int, name: str) -> Any | None:
    """The physical device behind a wgpu adapter: same PCI ids, the name as tie-breaker."""
    v = vk()
    same = []
    for handle in v.vkEnumeratePhysicalDevices(inst):
        props = v.vkGetPhysicalDeviceProperties(handle)
        if props.vendorID == vendor_id and props.deviceID == device_id:
            if props.deviceName == name:
                return handle
            same.append(handle)
    return same[0] if len(same) == 1 else None


@dataclass(frozen=True)
class Features:
    """The device features a kernel needs (Vulkan 1.1/1.2 core, and the cooperative-matrix extension's)."""

    float16: bool = False  # shaderFloat16 + storageBuffer16BitAccess
    memory_model: bool = False  # vulkanMemoryModel
    cooperative_matrix: bool = False  # VK_KHR_cooperative_matrix: cooperativeMatrix


def _feature_chain(features: Features) -> tuple[Any, Any, Any | None]:
    """Vulkan 1.1 and 1.2 feature structs (and the cooperative-matrix one) chained, each asking for `features`."""
    v = vk()
    coop = (
        v.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(cooperativeMatrix=v.VK_TRUE)
        if features.cooperative_matrix
        else None
    )
    f12 = v.VkPhysicalDeviceVulkan12Features(
        pNext=coop, shaderFloat16=int(features.float16), vulkanMemoryModel=int(features.memory_model)
    )
    f11 = v.VkPhysicalDeviceVulkan11Features(pNext=f12, storageBuffer16BitAccess=int(features.float16))
    return f11, f12, coop


def missing_features(physical: Any, features: Features) -> list[str]:
    """The features asked for that the physical device does not offer (queried with vkGetPhysicalDeviceFeatures2)."""
    v = vk()
    coop = v.VkPhysicalDeviceCooperativeMatrixFeaturesKHR() if features.cooperative_matrix else None
    f12 = v.VkPhysicalDeviceVulkan12Features(pNext=coop)
    f11 = v.VkPhysicalDeviceVulkan11Features(pNext=f12)
    query = v.VkPhysicalDeviceFeatures2(pNext=f11)
    v.vkGetPhysicalDeviceFeatures2(physical, query)
    offered = {
        "shaderFloat16": (features.float16, f12.shaderFloat16),
        "storageBuffer16BitAccess": (features.float16, f11.storageBuffer16BitAccess),
        "vulkanMemoryModel": (features.memory_model, f12.vulkanMemoryModel),
        "cooperativeMatrix": (features.cooperative_matrix, coop.cooperativeMatrix if coop is not None else 0),
    }
    return [name for name, (wanted, has) in offered.items() if wanted and not has]


def _compute_queue_family(physical: Any) -> tuple[int, int]:
    """The first queue family with compute, and its timestampValidBits."""
    v = vk()
    for index, family in enumerate(v.vkGetPhysicalDeviceQueueFamilyProperties(physical)):
        if family.queueFlags & v.VK_QUEUE_COMPUTE_BIT:
            return index, family.timestampValidBits
    raise RuntimeError("the device has no compute queue")


class Device:
    """A logical device with one compute queue; buffers, one pipeline, timed dispatches. Close it when done."""

    def __init__(self, physical: Any, extensions: Sequence[str], features: Features) -> None:
        v = vk()
        self.v = v
        self.physical = physical
        self.family, self.timestamp_bits = _compute_queue_family(physical)
        props = v.vkGetPhysicalDeviceProperties(physical)
        self.timestamp_period_ns = float(props.limits.timestampPeriod)
        self.memory = v.vkGetPhysicalDeviceMemoryProperties(physical)
        f11, _f12, _coop = _feature_chain(features)
        queue_info = v.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=[1.0])
        info = v.VkDeviceCreateInfo(
            pNext=f11, pQueueCreateInfos=[queue_info], ppEnabledExtensionNames=list(extensions) or None
        )
        self.device = v.vkCreateDevice(physical, info, None)
        self.queue = v.vkGetDeviceQueue(self.device, self.family, 0)
        pool_info = v.VkCommandPoolCreateInfo(queueFamilyIndex=self.family)
        self.command_pool = v.vkCreateCommandPool(self.device, pool_info, None)
        self._owned: list[tuple[str, Any]] = []

    # --- memory and buffers ---------------------------------------------------------------------------

    def _memory_type(self, bits: int, wanted: int) -> int:
        for index in range(self.memory.memoryTypeCount):
            if bits & (1 << index) and (self.memory.memoryTypes[index].propertyFlags & wanted) == wanted:
                return index
        raise RuntimeError(f"no memory type with property flags {wanted:#x}")

    def buffer(self, size: int, usage: int, host_visible: bool) -> tuple[Any, Any]:
        """A buffer and its bound memory: host-visible and coherent, or device-local."""
        v = self.v
        buf = v.vkCreateBuffer(self.device, v.VkBufferCreateInfo(size=size, usage=usage), None)
        needs = v.vkGetBufferMemoryRequirements(self.device, buf)
        flags = (
            v.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | v.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
            if host_visible
            else v.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        )
        alloc = v.VkMemoryAllocateInfo(
            allocationSize=needs.size, memoryTypeIndex=self._memory_type(needs.memoryTypeBits, flags)
        )
        mem = v.vkAllocateMemory(self.device, alloc, None)
        v.vkBindBufferMemory(self.device, buf, mem, 0)
        self._owned += [("buffer", buf), ("memory", mem)]
        return buf, mem

    def _one_time(self) -> Any:
        v = self.v
        info = v.VkCommandBufferAllocateInfo(
            commandPool=self.command_pool, level=v.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        cmd = v.vkAllocateCommandBuffers(self.device, info)[0]
        v.vkBeginCommandBuffer(cmd, v.VkCommandBufferBeginInfo(flags=v.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        return cmd

    def _submit_and_wait(self, cmd: Any) -> None:
        v = self.v
        v.vkEndCommandBuffer(cmd)
        fence = v.vkCreateFence(self.device, v.VkFenceCreateInfo(), None)
        try:
            v.vkQueueSubmit(self.queue, 1, [v.VkSubmitInfo(pCommandBuffers=[cmd])], fence)
            v.vkWaitForFences(self.device, 1, [fence], v.VK_TRUE, 60 * 10**9)
        finally:
            v.vkDestroyFence(self.device, fence, None)
            v.vkFreeCommandBuffers(self.device, self.command_pool, 1, [cmd])

    def _staging(self, size: int) -> tuple[Any, Any]:
        v = self.v
        usage = v.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | v.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        return self.buffer(size, usage, host_visible=True)

    def upload(self, data: bytes, usage: int) -> Any:
        """A device-local buffer holding `data` (copied through a staging buffer)."""
        v = self.v
        staging, staging_mem = self._staging(len(data))
        mapped = v.vkMapMemory(self.device, staging_mem, 0, len(data), 0)
        mapped[: len(data)] = data
        v.vkUnmapMemory(self.device, staging_mem)
        target, _mem = self.buffer(len(data), usage | v.VK_BUFFER_USAGE_TRANSFER_DST_BIT, host_visible=False)
        cmd = self._one_time()
        v.vkCmdCopyBuffer(cmd, staging, target, 1, [v.VkBufferCopy(srcOffset=0, dstOffset=0, size=len(data))])
        self._submit_and_wait(cmd)
        return target

    def download(self, source: Any, size: int) -> bytes:
        """The first `size` bytes of a device buffer."""
        v = self.v
        staging, staging_mem = self._staging(size)
        cmd = self._one_time()
        v.vkCmdCopyBuffer(cmd, source, staging, 1, [v.VkBufferCopy(srcOffset=0, dstOffset=0, size=size)])
        self._submit_and_wait(cmd)
        mapped = v.vkMapMemory(self.device, staging_mem, 0, size, 0)
        data = bytes(mapped[:size])
        v.vkUnmapMemory(self.device, staging_mem)
        return data

    def close(self) -> None:
        """Destroy everything this device made, then the device."""
        v = self.v
        v.vkDeviceWaitIdle(self.device)
        destroy = {
            "buffer": v.vkDestroyBuffer,
            "memory": v.vkFreeMemory,
            "pipeline": v.vkDestroyPipeline,
            "layout": v.vkDestroyPipelineLayout,
            "set_layout": v.vkDestroyDescriptorSetLayout,
            "pool": v.vkDestroyDescriptorPool,
            "module": v.vkDestroyShaderModule,
            "query": v.vkDestroyQueryPool,
        }
        for kind, handle in reversed(self._owned):
            destroy[kind](self.device, handle, None)
        v.vkDestroyCommandPool(self.device, self.command_pool, None)
        v.vkDestroyDevice(self.device, None)


@dataclass
class Kernel:
    """A compute pipeline bound to its buffers, ready to dispatch."""

    device: Device
    pipeline: Any
    layout: Any
    descriptor_set: Any
    groups: tuple[int, int, int]
    output: Any
    output_nbytes: int


def _specialisation(constants: Sequence[int]) -> Any:
    v = vk()
    entries = [v.VkSpecializationMapEntry(constantID=i, offset=4 * i, size=4) for i in range(len(constants))]
    data = struct.pack(f"<{len(constants)}I", *constants)
    return v.VkSpecializationInfo(pMapEntries=entries, dataSize=len(data), pData=v.ffi.from_buffer(data)), data


def prepare(
    device: Device,
    spirv: bytes,
    uniform: bytes,
    inputs: Sequence[bytes],
    output_nbytes: int,
    launch: tuple[Sequence[int], tuple[int, int, int]],
) -> Kernel:
    """Upload the uniform and inputs, allocate the output, build the pipeline with `launch`'s
    specialisation constants, and bind everything; `launch[1]` is the dispatch grid."""
    v = device.v
    constants, groups = launch
    storage, uniform_usage = v.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, v.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT
    buffers = [device.upload(uniform, uniform_usage)] + [device.upload(data, storage) for data in inputs]
    output, _mem = device.buffer(output_nbytes, storage | v.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, host_visible=False)
    buffers.append(output)
    sizes_of = [len(uniform), *(len(data) for data in inputs), output_nbytes]
    kinds = [v.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER] + [v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER] * (len(buffers) - 1)
    bindings = [
        v.VkDescriptorSetLayoutBinding(
            binding=i, descriptorType=kind, descriptorCount=1, stageFlags=v.VK_SHADER_STAGE_COMPUTE_BIT
        )
        for i, kind in enumerate(kinds)
    ]
    set_layout = v.vkCreateDescriptorSetLayout(
        device.device, v.VkDescriptorSetLayoutCreateInfo(pBindings=bindings), None
    )
    layout = v.vkCreatePipelineLayout(device.device, v.VkPipelineLayoutCreateInfo(pSetLayouts=[set_layout]), None)
    module = v.vkCreateShaderModule(device.device, v.VkShaderModuleCreateInfo(codeSize=len(spirv), pCode=spirv), None)
    spec, _keep = _specialisation(constants)
    stage = v.VkPipelineShaderStageCreateInfo(
        stage=v.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main", pSpecializationInfo=spec
    )
    pipeline = v.vkCreateComputePipelines(
        device.device, None, 1, [v.VkComputePipelineCreateInfo(stage=stage, layout=layout)], None
    )[0]
    sizes = [
        v.VkDescriptorPoolSize(type=v.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, descriptorCount=1),
        v.VkDescriptorPoolSize(type=v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=len(buffers) - 1),
    ]
    pool = v.vkCreateDescriptorPool(device.device, v.VkDescriptorPoolCreateInfo(maxSets=1, pPoolSizes=sizes), None)
    descriptor_set = v.vkAllocateDescriptorSets(
        device.device, v.VkDescriptorSetAllocateInfo(descriptorPool=pool, pSetLayouts=[set_layout])
    )[0]
    writes = [
        v.VkWriteDescriptorSet(
            dstSet=descriptor_set,
            dstBinding=i,
            descriptorType=kind,
            descriptorCount=1,
            pBufferInfo=[v.VkDescriptorBufferInfo(buffer=buf, offset=0, range=size)],
        )
        for i, (kind, buf, size) in enumerate(zip(kinds, buffers, sizes_of, strict=True))
    ]
    v.vkUpdateDescriptorSets(device.device, len(writes), writes, 0, None)
    device._owned += [("set_layout", set_layout), ("layout", layout), ("module", module), ("pipeline", pipeline)]
    device._owned.append(("pool", pool))
    return Kernel(device, pipeline, layout, descriptor_set, groups, output, output_nbytes)


def _dispatch(kernel: Kernel, cmd: Any) -> None:
    v = kernel.device.v
    v.vkCmdBindPipeline(cmd, v.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline)
    v.vkCmdBindDescriptorSets(
        cmd, v.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout, 0, 1, [kernel.descriptor_set], 0, None
    )
    v.vkCmdDispatch(cmd, *kernel.groups)


def _barrier(kernel: Kernel, cmd: Any) -> None:
    """Each dispatch waits for the one before it: the timestamps then bracket one dispatch's work."""
    v = kernel.device.v
    access = v.VK_ACCESS_SHADER_WRITE_BIT | v.VK_ACCESS_SHADER_READ_BIT
    barrier = v.VkMemoryBarrier(srcAccessMask=access, dstAccessMask=access)
    stage = v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    v.vkCmdPipelineBarrier(cmd, stage, stage, 0, 1, [barrier], 0, None, 0, None)


def run_once(kernel: Kernel) -> bytes:
    """One dispatch, waited for; the output's bytes."""
    cmd = kernel.device._one_time()
    _dispatch(kernel, cmd)
    kernel.device._submit_and_wait(cmd)
    return kernel.device.download(kernel.output, kernel.output_nbytes)


def timed(kernel: Kernel, count: int) -> list[float]:
    """`count` dispatches in one submit, each between two timestamps; their GPU times in seconds."""
    device = kernel.device
    v = device.v
    if device.timestamp_bits == 0:
        raise RuntimeError("the compute queue has no timestamps (timestampValidBits 0)")
    pool = v.vkCreateQueryPool(
        device.device, v.VkQueryPoolCreateInfo(queryType=v.VK_QUERY_TYPE_TIMESTAMP, queryCount=2 * count), None
    )
    try:
        cmd = device._one_time()
        v.vkCmdResetQueryPool(cmd, pool, 0, 2 * count)
        for i in range(count):
            _barrier(kernel, cmd)
            v.vkCmdWriteTimestamp(cmd, v.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 2 * i)
            _dispatch(kernel, cmd)
            v.vkCmdWriteTimestamp(cmd, v.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 2 * i + 1)
        device._submit_and_wait(cmd)
        raw = v.ffi.new("uint64_t[]", 2 * count)
        flags = v.VK_QUERY_RESULT_64_BIT | v.VK_QUERY_RESULT_WAIT_BIT
        v.vkGetQueryPoolResults(device.device, pool, 0, 2 * count, 16 * count, raw, 8, flags)
    finally:
        v.vkDestroyQueryPool(device.device, pool, None)
    mask = (1 << device.timestamp_bits) - 1 if device.timestamp_bits < 64 else (1 << 64) - 1
    return [((raw[2 * i + 1] - raw[2 * i]) & mask) * device.timestamp_period_ns * 1e-9 for i in range(count)]
