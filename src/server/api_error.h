// OpenAI-shaped API errors. Everything the gateway rejects becomes an ApiError carrying the HTTP
// status and the body fields OpenAI clients look at: {"error":{"message","type","param","code"}}.
// Official clients pick their exception class from the status (400 BadRequestError, 401
// AuthenticationError, 404 NotFoundError, 429 RateLimitError, 5xx InternalServerError...).
#pragma once
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_reader.h"

namespace pagoda::server {

struct ApiError : std::runtime_error {
    int status = 400;
    std::string type;   // "invalid_request_error", "rate_limit_error", "server_error", ...
    std::string param;  // the offending request field, empty: null
    std::string code;   // machine-readable code, empty: null
    std::optional<double> retry_after;  // seconds, for 429 (Retry-After header)

    ApiError(int status, std::string message, std::string type, std::string param = {}, std::string code = {});

    nlohmann::json body() const;  // {"error": {...}}
    nlohmann::json error_object() const;  // the inner object (WebSocket "error" field)

    static ApiError invalid(std::string message, std::string param = {}, std::string code = {});  // 400
    static ApiError unauthorized(std::string message);                                           // 401
    static ApiError not_found(std::string message);                                              // 404
    static ApiError method_not_allowed(std::string message);                                     // 405
    static ApiError too_large(std::string message);                                              // 413
    static ApiError rate_limited(std::string message, double retry_after, std::string code);     // 429
    static ApiError unavailable(std::string message, std::string code);                          // 503
    static ApiError internal(std::string message);                                               // 500
    // 400 from a strict JSON reader's error: param is its path, code its code().
    static ApiError from_field(const json_reader::JsonFieldError& e);
};

// Serialises JSON for the wire; never throws (invalid UTF-8 would be replaced by U+FFFD).
std::string dump_json(const nlohmann::json& value);

}  // namespace pagoda::server
