// How the test suite meets the Vulkan backend: every Vulkan test runs with the Khronos validation
// layer on (PAGODA_VULKAN_VALIDATION=1, set before any test unless the environment says otherwise),
// and any validation error fails the op that caused it (Stream::flush throws). Where the build has no
// Vulkan backend or the machine no device, the tests skip saying why, except under CI (CI set), where
// that is a failure naming the packages: CI installs them (scripts/install-deps.sh). Skips for a
// feature the device lacks begin with "Vulkan device lacks".
#pragma once
#include <algorithm>
#include <cstdlib>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace pagoda::backend::testing {

inline const bool kVulkanValidationOn = [] {
    setenv("PAGODA_VULKAN_VALIDATION", "1", /*overwrite=*/0);
    return true;
}();

inline bool under_ci() {
    const char* ci = std::getenv("CI");
    return ci && *ci && std::string(ci) != "0" && std::string(ci) != "false";
}

// "" when a Vulkan backend can be made here, else why not.
inline const std::string& vulkan_unavailable() {
    static const std::string reason = []() -> std::string {
        const std::vector<std::string> names = backend_names();
        if (std::find(names.begin(), names.end(), "vulkan") == names.end())
            return "this build has no Vulkan backend (CMake found no Vulkan headers or glslc: libvulkan-dev, glslc)";
        try {
            make_backend("vulkan");
            return "";
        } catch (const Error& e) {
            return e.what();
        }
    }();
    return reason;
}

// The device backends the parameterised suites run: "vulkan" where it works here, and under CI
// always (so that a missing device fails there instead of vanishing from the suite).
inline std::vector<std::string> device_backends_under_test() {
    const std::vector<std::string> names = backend_names();
    const bool built = std::find(names.begin(), names.end(), "vulkan") != names.end();
    if ((built && vulkan_unavailable().empty()) || (built && under_ci())) return {"vulkan"};
    return {};
}

}  // namespace pagoda::backend::testing

#define PAGODA_REQUIRE_VULKAN()                                                                                           \
    do {                                                                                                                  \
        const std::string& why_ = ::pagoda::backend::testing::vulkan_unavailable();                                      \
        if (!why_.empty()) {                                                                                              \
            if (::pagoda::backend::testing::under_ci())                                                                   \
                FAIL() << why_ << " (CI installs libvulkan-dev, glslc, mesa-vulkan-drivers and vulkan-validationlayers "  \
                                  "through scripts/install-deps.sh)";                                                    \
            GTEST_SKIP() << "no Vulkan device here: " << why_;                                                            \
        }                                                                                                                 \
    } while (0)
