// The gateway's /tokenize and /detokenize, apart from gateway.cpp: the work is tokenize_request.cpp's.
#include "server/gateway.h"
#include "server/tokenize_request.h"

namespace pagoda::server {

namespace {

void require_ready(Gateway::State state, bool draining, const std::string& load_error) {
    if (draining) throw ApiError::unavailable("the server is shutting down", "shutting_down");
    if (state == Gateway::State::loading) {
        ApiError e = ApiError::unavailable("the model is still loading; retry shortly", "model_loading");
        e.retry_after = 1;
        throw e;
    }
    if (state == Gateway::State::failed)
        throw ApiError::unavailable("the model failed to load: " + load_error, "model_failed");
}

// The body without `model` (vLLM's /tokenize takes one; a server of several models routes by it),
// which must name this gateway's model when present.
nlohmann::json without_model(const nlohmann::json& body, const std::string& served) {
    auto it = body.is_object() ? body.find("model") : body.end();
    if (it == body.end()) return body;
    if (!it->is_string()) throw ApiError::invalid("'model' must be a string", "model", "invalid_type");
    if (it->get<std::string>() != served)
        throw ApiError(404, "the model '" + it->get<std::string>() + "' does not exist; this server serves '" + served + "'",
                       "invalid_request_error", "model", "model_not_found");
    nlohmann::json rest = body;
    rest.erase("model");
    return rest;
}

}  // namespace

SimpleResponse Gateway::tokenize(const nlohmann::json& body) const {
    require_ready(state(), draining_, load_error_);
    return {200, "application/json", dump_json(tokenize_response(without_model(body, options_.model_name), *engine_->tokenizer()))};
}

SimpleResponse Gateway::detokenize(const nlohmann::json& body) const {
    require_ready(state(), draining_, load_error_);
    return {200, "application/json",
            dump_json(detokenize_response(without_model(body, options_.model_name), *engine_->tokenizer()))};
}

}  // namespace pagoda::server
