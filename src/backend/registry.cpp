#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace pagoda::backend {
namespace {

struct Entry {
    const char* name;
    std::unique_ptr<Backend> (*make)(const BackendOptions&);
};
// One line per backend.
constexpr Entry kBackends[] = {
    {"cpu", make_cpu_backend},
};

}  // namespace

std::vector<std::string> backend_names() {
    std::vector<std::string> out;
    for (const auto& e : kBackends) out.push_back(e.name);
    return out;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
    for (const auto& e : kBackends)
        if (name == e.name) return e.make(options);
    fail("unknown backend '{}' (choices: {})", name, fmt::join(backend_names(), ", "));
}

}  // namespace pagoda::backend
