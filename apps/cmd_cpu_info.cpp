// `pagoda cpu-info`: what the processor supports and which kernel path pagoda will use.
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
        std::printf("default threads: %d\n", default_thread_count());
        return 0;
    };
});
}  // namespace
}  // namespace pagoda::app
