#include "model/devices.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vk_context.h"
#endif

namespace pagoda::model {

DeviceReport compute_devices() {
    DeviceReport report;
#ifdef PAGODA_HAVE_VULKAN
    using backend::vulkan::format_bytes;
    try {
        for (const auto& d : backend::vulkan::list_devices()) {
            ComputeDevice c{"vulkan", d.name, {}};
            auto add = [&](std::string label, std::string value) { c.properties.emplace_back(std::move(label), std::move(value)); };
            auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
            auto sizes = [&](const std::vector<uint64_t>& heaps) {
                std::vector<std::string> out;
                for (uint64_t h : heaps) out.push_back(format_bytes(h));
                return out.empty() ? std::string("none") : fmt::format("{}", fmt::join(out, ", "));
            };
            add("type", d.type);
            add("driver", d.driver);
            add("vulkan", fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(d.api_version), VK_API_VERSION_MINOR(d.api_version),
                                      VK_API_VERSION_PATCH(d.api_version)));
            add("subgroup size", std::to_string(d.subgroup_size));
            add("max workgroup", std::to_string(d.max_workgroup_size) + " invocations");
            add("shared memory", format_bytes(d.shared_memory) + " per workgroup");
            add("max storage buffer range", format_bytes(d.max_storage_buffer_range));
            add("device-local heaps", sizes(d.device_local_heaps));
            add("other heaps", sizes(d.other_heaps));
            if (d.memory_budget)
                add("device-local budget / usage", fmt::format("{} / {} (VK_EXT_memory_budget)", sizes(d.device_local_budget),
                                                               sizes(d.device_local_usage)));
            else
                add("device-local budget / usage", "not reported (no VK_EXT_memory_budget): a fractional --kv-memory is of "
                                                   "the heap less pagoda's own allocations");
            add("fp16 arithmetic", yes(d.fp16));
            add("int8 arithmetic", yes(d.int8));
            add("16-bit / 8-bit storage", yes(d.storage_16bit) + " / " + yes(d.storage_8bit));
            add("int64, buffer device address", yes(d.int64) + ", " + yes(d.buffer_device_address));
            add("usable by pagoda", d.unusable.empty() ? std::string("yes") : "no: " + d.unusable);
            report.devices.push_back(std::move(c));
        }
    } catch (const Error& e) {
        report.notes.push_back(e.what());
    }
#else
    report.notes.push_back("this build has no Vulkan backend (configure with the Vulkan headers and glslc: libvulkan-dev, glslc)");
#endif
    return report;
}

}  // namespace pagoda::model
