// POST /admin/models/{id}/reload, parsed without a socket or a registry: the id from the path (one
// percent-encoded segment before "/reload") and the optional new path from the body ({} or
// {"path": "..."}). Throws ApiError: 404 for another path shape, 400 for a bad body.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pagoda::server {

struct ReloadRequest {
    std::string id;
    std::optional<std::string> path;  // unset: reload from the model's current path
};

inline constexpr std::string_view kAdminModelsPrefix = "/admin/models/";

// `target_path`: the request's path (no query), starting with kAdminModelsPrefix; `body`: its text
// (empty: no body).
ReloadRequest parse_reload_request(std::string_view target_path, const std::string& body);

}  // namespace pagoda::server
