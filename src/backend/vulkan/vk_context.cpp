#include "backend/vulkan/vk_context.h"

#include <cstdlib>
#include <cstring>
#include <utility>
#include <fmt/format.h>

#include "backend/vulkan/shaders.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool validation_requested() {
    const char* env = std::getenv("PAGODA_VULKAN_VALIDATION");
    return env && std::string(env) == "1";
}

const char* device_type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
        default: return "other";
    }
}

bool has_device_extension(VkApi& api, VkPhysicalDevice pd, const char* name) {
    uint32_t n = 0;
    api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> props(n);
    if (n) api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, props.data());
    for (uint32_t i = 0; i < n; ++i)
        if (std::strcmp(props[i].extensionName, name) == 0) return true;
    return false;
}

// The memory properties with VK_EXT_memory_budget's budget and usage per heap.
VkPhysicalDeviceMemoryBudgetPropertiesEXT memory_budget(VkApi& api, VkPhysicalDevice pd, VkPhysicalDeviceMemoryProperties& mem) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    props.pNext = &budget;
    api.vkGetPhysicalDeviceMemoryProperties2(pd, &props);
    mem = props.memoryProperties;
    return budget;
}

DeviceInfo describe(VkApi& api, VkPhysicalDevice pd) {
    DeviceInfo d;
    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    subgroup.pNext = &driver;
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &subgroup;
    api.vkGetPhysicalDeviceProperties2(pd, &props);
    const VkPhysicalDeviceLimits& lim = props.properties.limits;
    d.name = props.properties.deviceName;
    d.type = device_type_name(props.properties.deviceType);
    d.driver = fmt::format("{} {}", driver.driverName, driver.driverInfo);
    d.api_version = props.properties.apiVersion;
    d.subgroup_size = subgroup.subgroupSize;
    d.subgroup_arithmetic = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                            (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
    d.max_workgroup_size = lim.maxComputeWorkGroupInvocations;
    d.shared_memory = lim.maxComputeSharedMemorySize;
    d.max_storage_buffer_range = lim.maxStorageBufferRange;
    d.max_push_constants = lim.maxPushConstantsSize;
    VkPhysicalDeviceMemoryProperties mem{};
    api.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
        (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ? d.device_local_heaps : d.other_heaps)
            .push_back(mem.memoryHeaps[i].size);
    d.memory_budget = has_device_extension(api, pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (d.memory_budget) {
        const VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = memory_budget(api, pd, mem);
        for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
            if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
                d.device_local_budget.push_back(budget.heapBudget[i]);
                d.device_local_usage.push_back(budget.heapUsage[i]);
            }
    }
    if (VK_API_VERSION_MINOR(d.api_version) < 2 && VK_API_VERSION_MAJOR(d.api_version) == 1) {
        d.unusable = "Vulkan device lacks Vulkan 1.2";
        return d;
    }
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f.pNext = &f11;
    api.vkGetPhysicalDeviceFeatures2(pd, &f);
    d.fp16 = f12.shaderFloat16;
    d.int8 = f12.shaderInt8;
    d.int64 = f.features.shaderInt64;
    d.buffer_device_address = f12.bufferDeviceAddress;
    d.storage_16bit = f11.storageBuffer16BitAccess;
    d.storage_8bit = f12.storageBuffer8BitAccess;
    if (!d.buffer_device_address) d.unusable = "Vulkan device lacks buffer device addresses";
    else if (!d.int64) d.unusable = "Vulkan device lacks 64-bit integers in shaders";
    else if (d.max_push_constants < Context::kPushConstantBytes) d.unusable = "Vulkan device lacks 128 bytes of push constants";
    else if (d.max_workgroup_size < 256) d.unusable = "Vulkan device lacks workgroups of 256 invocations";
    else if (d.shared_memory < 16384) d.unusable = "Vulkan device lacks 16 KiB of shared memory";
    return d;
}

VkInstance create_instance(VkApi& api, bool validation) {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "pagoda";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    std::vector<const char*> layers, extensions;
    if (validation) {
        uint32_t n = 0;
        api.vkEnumerateInstanceLayerProperties(&n, nullptr);
        std::vector<VkLayerProperties> props(n);
        api.vkEnumerateInstanceLayerProperties(&n, props.data());
        bool found = false;
        for (const auto& p : props) found = found || std::strcmp(p.layerName, kValidationLayer) == 0;
        if (!found)
            fail("vulkan backend: PAGODA_VULKAN_VALIDATION=1 but the layer {} is missing (install the Debian package "
                 "vulkan-validationlayers)",
                 kValidationLayer);
        layers.push_back(kValidationLayer);
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
    ci.enabledLayerCount = uint32_t(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = uint32_t(extensions.size());
    ci.ppEnabledExtensionNames = extensions.data();
    VkInstance instance = VK_NULL_HANDLE;
    const VkResult r = api.vkCreateInstance(&ci, nullptr, &instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        fail("vulkan backend: no Vulkan 1.2 driver (install mesa-vulkan-drivers for the CPU device lavapipe, or a GPU driver)");
    check(r, "vkCreateInstance");
    load_instance_functions(api, instance);
    return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkApi& api, VkInstance instance) {
    uint32_t n = 0;
    api.vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> out(n);
    if (n) api.vkEnumeratePhysicalDevices(instance, &n, out.data());
    out.resize(n);
    if (out.empty())
        fail("vulkan backend: no Vulkan device (install mesa-vulkan-drivers for the CPU device lavapipe, or a GPU driver)");
    return out;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
        static_cast<Context*>(user)->record_validation_error(data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
    if (bytes >= (uint64_t(1) << 30)) return fmt::format("{:.1f} GiB", double(bytes) / double(uint64_t(1) << 30));
    if (bytes >= (uint64_t(1) << 20)) return fmt::format("{:.1f} MiB", double(bytes) / double(uint64_t(1) << 20));
    return fmt::format("{:.1f} KiB", double(bytes) / 1024.0);
}

std::vector<DeviceInfo> list_devices() {
    VkApi& api = load_vulkan();
    VkInstance instance = create_instance(api, false);
    std::vector<DeviceInfo> out;
    try {
        for (VkPhysicalDevice pd : physical_devices(api, instance)) out.push_back(describe(api, pd));
    } catch (...) {
        api.vkDestroyInstance(instance, nullptr);
        throw;
    }
    api.vkDestroyInstance(instance, nullptr);
    return out;
}

std::shared_ptr<Context> Context::get() {
    static std::mutex mutex;
    static std::weak_ptr<Context> current;
    std::lock_guard lock(mutex);
    if (auto ctx = current.lock()) return ctx;
    std::shared_ptr<Context> ctx(new Context());
    current = ctx;
    return ctx;
}

Context::Context() : api(load_vulkan()) {
    validation = validation_requested();
    instance = create_instance(api, validation);
    try {
        if (validation && api.vkCreateDebugUtilsMessengerEXT) {
            VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
            mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
            mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
            mi.pfnUserCallback = on_message;
            mi.pUserData = this;
            check(api.vkCreateDebugUtilsMessengerEXT(instance, &mi, nullptr, &messenger_), "vkCreateDebugUtilsMessengerEXT");
        }
        // PAGODA_VULKAN_DEVICE=<index> picks a device; otherwise the first usable one, GPUs first.
        const std::vector<VkPhysicalDevice> devices = physical_devices(api, instance);
        std::string reasons;
        int best = -1, best_rank = -1;
        const char* pick = std::getenv("PAGODA_VULKAN_DEVICE");
        for (size_t i = 0; i < devices.size(); ++i) {
            DeviceInfo d = describe(api, devices[i]);
            if (pick && std::to_string(i) != pick) continue;
            if (!d.unusable.empty()) {
                reasons += fmt::format("; device {} ({}): {}", i, d.name, d.unusable);
                continue;
            }
            const int rank = d.type == "discrete GPU" ? 3 : d.type == "integrated GPU" ? 2 : 1;
            if (rank > best_rank) best = int(i), best_rank = rank, info = d;
        }
        if (best < 0)
            fail("vulkan backend: no usable Vulkan device{}{}", pick ? fmt::format(" (PAGODA_VULKAN_DEVICE={})", pick) : "", reasons);
        physical = devices[size_t(best)];
        api.vkGetPhysicalDeviceMemoryProperties(physical, &memory_);
        allocated_.assign(memory_.memoryHeapCount, 0);
        for (uint32_t i = 0; i < memory_.memoryHeapCount; ++i) {
            const VkMemoryHeap& h = memory_.memoryHeaps[i];
            const VkMemoryHeap& best_heap = memory_.memoryHeaps[largest_heap_];
            const bool local = h.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT, best_local = best_heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
            if ((local && !best_local) || (local == best_local && h.size > best_heap.size)) largest_heap_ = i;
        }

        uint32_t n = 0;
        api.vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, nullptr);
        std::vector<VkQueueFamilyProperties> families(n);
        api.vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, families.data());
        bool found = false;
        for (uint32_t i = 0; i < n && !found; ++i)
            if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) queue_family = i, found = true;
        if (!found) fail("vulkan backend: Vulkan device lacks a compute queue ({})", info.name);

        const float priority = 1.0f;
        VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
        qi.queueFamilyIndex = queue_family;
        qi.queueCount = 1;
        qi.pQueuePriorities = &priority;
        VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
        f12.bufferDeviceAddress = VK_TRUE;
        VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        f.features.shaderInt64 = VK_TRUE;
        f.pNext = &f12;
        VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
        di.pNext = &f;
        const char* budget_extension = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
        if (info.memory_budget) di.enabledExtensionCount = 1, di.ppEnabledExtensionNames = &budget_extension;
        di.queueCreateInfoCount = 1;
        di.pQueueCreateInfos = &qi;
        check(api.vkCreateDevice(physical, &di, nullptr, &device), "vkCreateDevice");
        api.vkGetDeviceQueue(device, queue_family, 0, &queue);

        VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
        VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        li.pushConstantRangeCount = 1;
        li.pPushConstantRanges = &range;
        check(api.vkCreatePipelineLayout(device, &li, nullptr, &layout_), "vkCreatePipelineLayout");
    } catch (...) {
        release();
        throw;
    }
}

Context::~Context() { release(); }

void Context::release() {
    if (device) {
        api.vkDeviceWaitIdle(device);
        for (auto& [key, p] : pipelines_) api.vkDestroyPipeline(device, p, nullptr);
        pipelines_.clear();
        if (layout_) api.vkDestroyPipelineLayout(device, layout_, nullptr);
        layout_ = VK_NULL_HANDLE;
        api.vkDestroyDevice(device, nullptr);
        device = VK_NULL_HANDLE;
    }
    if (messenger_) api.vkDestroyDebugUtilsMessengerEXT(instance, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
    if (instance) api.vkDestroyInstance(instance, nullptr);
    instance = VK_NULL_HANDLE;
}

Buffer Context::create_buffer(size_t bytes, bool host_visible, const std::string& what) {
    Buffer b;
    b.size = bytes;
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = std::max<size_t>(bytes, 16);
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(api.vkCreateBuffer(device, &bi, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req{};
    api.vkGetBufferMemoryRequirements(device, b.buffer, &req);
    const VkMemoryPropertyFlags want = host_visible ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                                    : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < memory_.memoryTypeCount && type == UINT32_MAX; ++i)
        if ((req.memoryTypeBits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type == UINT32_MAX) {
        api.vkDestroyBuffer(device, b.buffer, nullptr);
        fail("vulkan backend: no {} memory type for {}", host_visible ? "host-visible" : "device-local", what);
    }
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.pNext = &flags;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    const VkResult r = api.vkAllocateMemory(device, &ai, nullptr, &b.memory);
    if (r != VK_SUCCESS) {
        api.vkDestroyBuffer(device, b.buffer, nullptr);
        fail("vulkan backend: cannot allocate {} of device memory for {}: {}", format_bytes(bytes), what, result_name(r));
    }
    b.heap = memory_.memoryTypes[type].heapIndex;
    b.allocated = req.size;
    {
        std::lock_guard lock(mutex_);
        allocated_[b.heap] += b.allocated;
    }
    check(api.vkBindBufferMemory(device, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if (host_visible) check(api.vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
    VkBufferDeviceAddressInfo addr{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    addr.buffer = b.buffer;
    b.address = api.vkGetBufferDeviceAddress(device, &addr);
    return b;
}

void Context::destroy(Buffer& b) {
    if (b.mapped) api.vkUnmapMemory(device, b.memory);
    if (b.buffer) {
        api.vkDestroyBuffer(device, b.buffer, nullptr);
        ++buffers_destroyed_;
    }
    if (b.memory) {
        api.vkFreeMemory(device, b.memory, nullptr);
        std::lock_guard lock(mutex_);
        allocated_[b.heap] -= b.allocated;
    }
    b = Buffer{};
}

bool Context::uses_memory_budget() const {
    const char* env = std::getenv("PAGODA_VULKAN_MEMORY_BUDGET");
    return info.memory_budget && !(env && std::string(env) == "0");
}

uint64_t Context::allocated_bytes(uint32_t heap) const {
    std::lock_guard lock(mutex_);
    return heap < allocated_.size() ? allocated_[heap] : 0;
}

uint64_t Context::free_device_memory() const {
    if (uses_memory_budget()) {
        VkPhysicalDeviceMemoryProperties mem{};
        const VkPhysicalDeviceMemoryBudgetPropertiesEXT b = memory_budget(api, physical, mem);
        const uint64_t budget = b.heapBudget[largest_heap_], usage = b.heapUsage[largest_heap_];
        return budget > usage ? budget - usage : 0;
    }
    const uint64_t size = memory_.memoryHeaps[largest_heap_].size, used = allocated_bytes(largest_heap_);
    return size > used ? size - used : 0;
}

VkPipeline Context::pipeline(const std::string& name, const std::vector<uint32_t>& constants) {
    std::lock_guard lock(mutex_);
    auto key = std::pair{name, constants};
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
    const std::span<const unsigned char> code = shader_module(name);
    if (code.empty()) fail("vulkan backend: no shader module '{}' in this build", name);
    VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = code.size();
    mi.pCode = reinterpret_cast<const uint32_t*>(code.data());
    VkShaderModule module = VK_NULL_HANDLE;
    check(api.vkCreateShaderModule(device, &mi, nullptr, &module), "vkCreateShaderModule");
    std::vector<VkSpecializationMapEntry> entries;
    for (uint32_t i = 0; i < constants.size(); ++i) entries.push_back({i, uint32_t(i * 4), 4});
    VkSpecializationInfo spec{uint32_t(entries.size()), entries.data(), constants.size() * 4, constants.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = constants.empty() ? nullptr : &spec;
    ci.layout = layout_;
    VkPipeline p = VK_NULL_HANDLE;
    const VkResult r = api.vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &ci, nullptr, &p);
    api.vkDestroyShaderModule(device, module, nullptr);
    check(r, ("vkCreateComputePipelines " + name).c_str());
    pipelines_[key] = p;
    return p;
}

std::vector<std::string> Context::take_validation_errors() {
    std::lock_guard lock(mutex_);
    return std::exchange(errors_, {});
}

void Context::record_validation_error(std::string message) {
    std::lock_guard lock(mutex_);
    errors_.push_back(std::move(message));
}

}  // namespace pagoda::backend::vulkan
