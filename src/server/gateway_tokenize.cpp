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

}  // namespace

SimpleResponse Gateway::tokenize(const nlohmann::json& body) const {
    require_ready(state(), draining_, load_error_);
    return {200, "application/json", dump_json(tokenize_response(body, *engine_->tokenizer()))};
}

SimpleResponse Gateway::detokenize(const nlohmann::json& body) const {
    require_ready(state(), draining_, load_error_);
    return {200, "application/json", dump_json(detokenize_response(body, *engine_->tokenizer()))};
}

}  // namespace pagoda::server
