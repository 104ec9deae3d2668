// `pagoda devices`: the compute devices this build can use (Vulkan), with their limits and memory,
// or why there are none. The CPU is `pagoda cpu-info`.
#include <cstdio>

#include "apps/command.h"
#include "model/devices.h"

namespace pagoda::app {
namespace {
CommandRegistration reg("devices", "List the Vulkan devices with their limits and memory", [](CLI::App&) {
    return [] {
        const model::DeviceReport report = model::compute_devices();
        for (size_t i = 0; i < report.devices.size(); ++i) {
            const auto& d = report.devices[i];
            std::printf("%s device %zu: %s\n", d.backend.c_str(), i, d.name.c_str());
            for (const auto& [label, value] : d.properties) std::printf("  %-30s %s\n", (label + ":").c_str(), value.c_str());
        }
        for (const auto& note : report.notes) std::printf("%s\n", note.c_str());
        return 0;
    };
});
}  // namespace
}  // namespace pagoda::app
