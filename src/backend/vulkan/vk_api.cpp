#include "backend/vulkan/vk_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::backend::vulkan {

VkApi& load_vulkan() {
    static VkApi api;
    static std::string error;
    static bool tried = false;
    if (!tried) {
        tried = true;
        void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            error = fmt::format("no Vulkan loader: libvulkan.so.1 cannot be opened ({}); install the Debian package libvulkan1 "
                                "and a driver (mesa-vulkan-drivers for the CPU device lavapipe)",
                                dlerror());
        } else {
            api.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
            if (!api.vkGetInstanceProcAddr) error = "the Vulkan loader libvulkan.so.1 has no vkGetInstanceProcAddr";
        }
        if (error.empty()) {
#define PAGODA_VK_LOAD(name)                                                                                \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));          \
    if (!api.name && error.empty()) error = "the Vulkan loader lacks " #name;
            PAGODA_VK_GLOBAL_FUNCTIONS(PAGODA_VK_LOAD)
#undef PAGODA_VK_LOAD
        }
    }
    if (!error.empty()) fail("vulkan backend: {}", error);
    return api;
}

void load_instance_functions(VkApi& api, VkInstance instance) {
#define PAGODA_VK_LOAD(name)                                                                                \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(instance, #name));                \
    if (!api.name) fail("vulkan backend: the Vulkan instance lacks the entry point " #name);
    PAGODA_VK_INSTANCE_FUNCTIONS(PAGODA_VK_LOAD)
#undef PAGODA_VK_LOAD
#define PAGODA_VK_LOAD_OPTIONAL(name) api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(instance, #name));
    PAGODA_VK_OPTIONAL_FUNCTIONS(PAGODA_VK_LOAD_OPTIONAL)
#undef PAGODA_VK_LOAD_OPTIONAL
}

std::string result_name(VkResult r) {
    switch (r) {
        case VK_SUCCESS: return "VK_SUCCESS";
        case VK_NOT_READY: return "VK_NOT_READY";
        case VK_TIMEOUT: return "VK_TIMEOUT";
        case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
        case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
        case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
        case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
        case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
        case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
        case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
        case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
        case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
        default: return fmt::format("VkResult {}", int(r));
    }
}

void check(VkResult r, const char* what) {
    if (r != VK_SUCCESS) fail("vulkan backend: {}: {}", what, result_name(r));
}

}  // namespace pagoda::backend::vulkan
