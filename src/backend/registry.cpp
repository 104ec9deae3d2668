// The backends this build has, by name ("vulkan" where the build found the Vulkan headers and glslc).
// A backend is one line of kBackends; a factory that cannot
// run here (no device) throws its own pagoda::Error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif
#include "core/error.h"

namespace pagoda::backend {
namespace {

struct Entry {
    const char* name;
    std::unique_ptr<Backend> (*make)(const BackendOptions&);
};

const Entry kBackends[] = {
    {"cpu", make_cpu_backend},
    {"reference", make_reference_backend},
#ifdef PAGODA_HAVE_VULKAN
    {"vulkan", make_vulkan_backend},  // built when CMake finds Vulkan (PAGODA_VULKAN); throws where no device is
#endif
};

}  // namespace

std::vector<std::string> backend_names() {
    std::vector<std::string> names;
    for (const Entry& e : kBackends) names.emplace_back(e.name);
    return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
    for (const Entry& e : kBackends)
        if (name == e.name) return e.make(options);
    fail("unknown backend '{}' (choices: {})", name, fmt::join(backend_names(), ", "));
}

}  // namespace pagoda::backend
