// The dashboard's files (assets/dashboard/*), compiled into the binary by cmake/embed_assets.cmake
// so `pagoda serve` serves the page offline with nothing beside it.
#pragma once
#include <span>
#include <string_view>

namespace pagoda::server {

struct EmbeddedAsset {
    std::string_view name;   // file name, e.g. "dashboard.js"
    std::string_view bytes;  // its contents
};

// Sorted by name. Defined in the generated build/generated/dashboard_assets.cpp.
std::span<const EmbeddedAsset> dashboard_assets();

}  // namespace pagoda::server
