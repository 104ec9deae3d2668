// The Vulkan entry points pagoda calls, loaded at run time from the loader (libvulkan.so.1) with
// dlopen, so the binary starts, and every other backend works, where no Vulkan is installed.
// load_vulkan() opens the loader once per process; load_instance_functions() fills the table for an
// instance (device functions come through vkGetInstanceProcAddr too: one table, one device).
#pragma once
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace pagoda::backend::vulkan {

#define PAGODA_VK_GLOBAL_FUNCTIONS(X) \
    X(vkCreateInstance)               \
    X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumerateInstanceExtensionProperties)

#define PAGODA_VK_INSTANCE_FUNCTIONS(X)       \
    X(vkDestroyInstance)                      \
    X(vkEnumeratePhysicalDevices)             \
    X(vkGetPhysicalDeviceProperties)          \
    X(vkGetPhysicalDeviceProperties2)         \
    X(vkGetPhysicalDeviceFeatures2)           \
    X(vkGetPhysicalDeviceMemoryProperties)    \
    X(vkGetPhysicalDeviceMemoryProperties2)   \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkEnumerateDeviceExtensionProperties)   \
    X(vkCreateDevice)                         \
    X(vkDestroyDevice)                        \
    X(vkGetDeviceQueue)                       \
    X(vkCreateBuffer)                         \
    X(vkDestroyBuffer)                        \
    X(vkGetBufferMemoryRequirements)          \
    X(vkAllocateMemory)                       \
    X(vkFreeMemory)                           \
    X(vkBindBufferMemory)                     \
    X(vkMapMemory)                            \
    X(vkUnmapMemory)                          \
    X(vkGetBufferDeviceAddress)               \
    X(vkCreateShaderModule)                   \
    X(vkDestroyShaderModule)                  \
    X(vkCreatePipelineLayout)                 \
    X(vkDestroyPipelineLayout)                \
    X(vkCreateComputePipelines)               \
    X(vkDestroyPipeline)                      \
    X(vkCreateCommandPool)                    \
    X(vkDestroyCommandPool)                   \
    X(vkAllocateCommandBuffers)               \
    X(vkFreeCommandBuffers)                   \
    X(vkBeginCommandBuffer)                   \
    X(vkEndCommandBuffer)                     \
    X(vkResetCommandBuffer)                   \
    X(vkQueueSubmit)                          \
    X(vkCreateFence)                          \
    X(vkDestroyFence)                         \
    X(vkWaitForFences)                        \
    X(vkResetFences)                          \
    X(vkCmdBindPipeline)                      \
    X(vkCmdPushConstants)                     \
    X(vkCmdDispatch)                          \
    X(vkCmdDispatchIndirect)                  \
    X(vkCmdPipelineBarrier)                   \
    X(vkCmdCopyBuffer)                        \
    X(vkCmdFillBuffer)                        \
    X(vkDeviceWaitIdle)

#define PAGODA_VK_OPTIONAL_FUNCTIONS(X) \
    X(vkCreateDebugUtilsMessengerEXT)   \
    X(vkDestroyDebugUtilsMessengerEXT)

struct VkApi {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define PAGODA_VK_MEMBER(name) PFN_##name name = nullptr;
    PAGODA_VK_GLOBAL_FUNCTIONS(PAGODA_VK_MEMBER)
    PAGODA_VK_INSTANCE_FUNCTIONS(PAGODA_VK_MEMBER)
    PAGODA_VK_OPTIONAL_FUNCTIONS(PAGODA_VK_MEMBER)
#undef PAGODA_VK_MEMBER
};

// The process's table. Throws pagoda::Error naming the loader library (and the Debian package
// libvulkan1) when it cannot be opened.
VkApi& load_vulkan();
// Fills the instance-level and device-level entries of the table for `instance`. Throws naming a
// missing entry point.
void load_instance_functions(VkApi& api, VkInstance instance);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc., for errors.
std::string result_name(VkResult r);
// Throws pagoda::Error "vulkan backend: <what>: <result>" unless r is VK_SUCCESS.
void check(VkResult r, const char* what);

}  // namespace pagoda::backend::vulkan
