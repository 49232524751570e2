// Vulkan-Hpp of Vulkan-Headers older than 1.3.272 (Debian 12 ships 1.3.239) with the three declarations of
// VK_EXT_layer_settings that llama.cpp's ggml-vulkan.cpp names when it creates its instance (it chains a
// LayerSettingsCreateInfoEXT into InstanceCreateInfo, and enables the extension only with the validation
// layer). scripts/setup.sh puts this folder first on the include path of llama.cpp's Vulkan build where
// the system header lacks them; it includes the real header and adds nothing where that has them.
// Layouts and values as the Vulkan registry defines them (vulkan_core.h 1.3.272 and later: extension 497,
// VK_STRUCTURE_TYPE_LAYER_SETTINGS_CREATE_INFO_EXT = 1000496000).
#pragma once
#include_next <vulkan/vulkan.hpp>

#ifndef VK_EXT_layer_settings
#include <cstdint>
#include <vector>

namespace VULKAN_HPP_NAMESPACE {
enum class LayerSettingTypeEXT : int32_t {
  eBool32 = 0,
  eInt32 = 1,
  eInt64 = 2,
  eUint32 = 3,
  eUint64 = 4,
  eFloat32 = 5,
  eFloat64 = 6,
  eString = 7,
};

struct LayerSettingEXT {  // VkLayerSettingEXT
  const char *pLayerName;
  const char *pSettingName;
  LayerSettingTypeEXT type;
  uint32_t valueCount;
  const void *pValues;
};

struct LayerSettingsCreateInfoEXT {  // VkLayerSettingsCreateInfoEXT
  explicit LayerSettingsCreateInfoEXT(const std::vector<LayerSettingEXT> &settings, const void *next = nullptr)
      : pNext(next), settingCount(static_cast<uint32_t>(settings.size())), pSettings(settings.data()) {}
  StructureType sType = static_cast<StructureType>(1000496000);
  const void *pNext;
  uint32_t settingCount;
  const LayerSettingEXT *pSettings;
};
static_assert(sizeof(LayerSettingEXT) == 32 || sizeof(void *) != 8, "VkLayerSettingEXT's layout");
static_assert(sizeof(LayerSettingsCreateInfoEXT) == 32 || sizeof(void *) != 8, "VkLayerSettingsCreateInfoEXT's layout");
}  // namespace VULKAN_HPP_NAMESPACE
#endif
