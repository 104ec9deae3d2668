// The compute devices this build's backends can use, for `pagoda devices`: each with its limits and
// memory as (label, value) lines. A backend that finds no device says why in a note (no loader, no
// device), so the command works on every machine.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace pagoda::model {

struct ComputeDevice {
    std::string backend;  // "vulkan"
    std::string name;
    std::vector<std::pair<std::string, std::string>> properties;
};

struct DeviceReport {
    std::vector<ComputeDevice> devices;
    std::vector<std::string> notes;  // e.g. "vulkan: no Vulkan device (install mesa-vulkan-drivers ...)"
};

DeviceReport compute_devices();

}  // namespace pagoda::model
