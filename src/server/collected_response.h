// A response collected from one result per engine request ("sub") and answered whole, never
// streamed: /v1/embeddings (embedding_response.h), /v1/rerank and /v1/score (rerank_response.h).
// A Job holds one in place of the completion assembler. Not thread-safe.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace pagoda::server {

class CollectedResponse {
public:
    virtual ~CollectedResponse() = default;
    virtual void add(size_t sub, const engine::Delta& delta) = 0;
    virtual bool done() const = 0;  // every sub-request has delivered its last delta
    virtual const std::optional<std::string>& error() const = 0;  // the first engine error, if any
    virtual bool cancelled() const = 0;
    virtual int64_t prompt_tokens() const = 0;
    // Once done() without error: the response body.
    virtual nlohmann::json response() const = 0;
};

}  // namespace pagoda::server
