// `pagoda cpu-info`: what the processor supports, which kernel path pagoda will use, and whether the
// AMX tiles can run here.
#include <cstdio>

#include "apps/command.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace pagoda::app {
namespace {
CommandRegistration reg("cpu-info", "Show CPU features and the kernel path pagoda selects", [](CLI::App&) {
    return [] {
        std::printf("features: %s\n", cpu_features().summary().c_str());
        std::printf("best path: %s\n", isa_name(best_supported_isa()));
        std::printf("active path: %s\n", isa_name(active_isa()));
        // The tiles need the CPU's bits and the OS's permission: "available" or "absent (why)".
        std::printf("amx int8: %s\n", amx_status().c_str());
        std::printf("amx bf16: %s\n", amx_bf16_status().c_str());
        std::printf("default threads: %d\n", default_thread_count());
        return 0;
    };
});
}  // namespace
}  // namespace pagoda::app
