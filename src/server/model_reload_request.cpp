#include "server/model_reload_request.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/http_common.h"
#include "server/openai_request.h"

namespace pagoda::server {

ReloadRequest parse_reload_request(std::string_view target_path, const std::string& body) {
    const std::string_view rest =
        target_path.starts_with(kAdminModelsPrefix) ? target_path.substr(kAdminModelsPrefix.size()) : std::string_view();
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos || slash == 0 || rest.substr(slash) != "/reload")
        throw ApiError::not_found(
            fmt::format("no route for POST {} (POST /admin/models/{{id}}/reload)", std::string(target_path)));
    ReloadRequest out;
    out.id = transport::percent_decode(std::string(rest.substr(0, slash)));
    if (body.empty()) return out;
    const nlohmann::json parsed = nlohmann::json(parse_json_body(body));
    if (!parsed.is_object()) throw ApiError::invalid("the body must be a JSON object: {} or {\"path\": \"...\"}");
    for (const auto& [name, value] : parsed.items()) {
        if (name != "path") throw ApiError::invalid(fmt::format("unknown field '{}' (known: path)", name), name);
        if (!value.is_string() || value.get<std::string>().empty())
            throw ApiError::invalid("'path' must be a non-empty string", "path");
        out.path = value.get<std::string>();
    }
    return out;
}

}  // namespace pagoda::server
