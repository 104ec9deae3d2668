#include "server/dashboard.h"

#include <fmt/format.h>

#include "server/dashboard_assets.h"

namespace pagoda::server {

namespace {

std::string content_type_of(std::string_view name) {
    auto ends = [&](std::string_view ext) { return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext; };
    if (ends(".html")) return "text/html; charset=utf-8";
    if (ends(".js")) return "text/javascript; charset=utf-8";
    if (ends(".css")) return "text/css; charset=utf-8";
    if (ends(".svg")) return "image/svg+xml";
    if (ends(".png")) return "image/png";
    return "application/octet-stream";
}

}  // namespace

bool is_dashboard_path(std::string_view path) {
    return path == "/dashboard" || path.starts_with("/dashboard/");
}

SimpleResponse dashboard_file(std::string_view path) {
    std::string_view name = path == "/dashboard" ? "" : path.substr(std::string_view("/dashboard/").size());
    if (name.empty()) name = "index.html";
    for (const EmbeddedAsset& a : dashboard_assets())
        if (a.name == name) return {200, content_type_of(name), std::string(a.bytes)};
    throw ApiError::not_found(fmt::format("the dashboard has no file '{}'", name));
}

}  // namespace pagoda::server
