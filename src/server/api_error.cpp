#include "server/api_error.h"

namespace pagoda::server {

ApiError::ApiError(int status_, std::string message, std::string type_, std::string param_, std::string code_)
    : std::runtime_error(std::move(message)),
      status(status_),
      type(std::move(type_)),
      param(std::move(param_)),
      code(std::move(code_)) {}

nlohmann::json ApiError::error_object() const {
    nlohmann::json e;
    e["message"] = what();
    e["type"] = type;
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    return e;
}

nlohmann::json ApiError::body() const { return nlohmann::json{{"error", error_object()}}; }

ApiError ApiError::invalid(std::string message, std::string param, std::string code) {
    return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}
ApiError ApiError::unauthorized(std::string message) {
    return ApiError(401, std::move(message), "invalid_request_error", {}, "invalid_api_key");
}
ApiError ApiError::not_found(std::string message) {
    return ApiError(404, std::move(message), "invalid_request_error", {}, "not_found");
}
ApiError ApiError::method_not_allowed(std::string message) {
    return ApiError(405, std::move(message), "invalid_request_error", {}, "method_not_allowed");
}
ApiError ApiError::too_large(std::string message) {
    return ApiError(413, std::move(message), "invalid_request_error", {}, "request_too_large");
}
ApiError ApiError::rate_limited(std::string message, double retry_after, std::string code) {
    ApiError e(429, std::move(message), "rate_limit_error", {}, std::move(code));
    e.retry_after = retry_after;
    return e;
}
ApiError ApiError::unavailable(std::string message, std::string code) {
    return ApiError(503, std::move(message), "server_error", {}, std::move(code));
}
ApiError ApiError::internal(std::string message) {
    return ApiError(500, std::move(message), "server_error", {}, "internal_error");
}

ApiError ApiError::from_field(const json_reader::JsonFieldError& e) {
    return invalid(e.what(), e.path, e.code());
}

std::string dump_json(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pagoda::server
