// Collects the engine's results for one POST /v1/embeddings (one engine request per input, "subs")
// into OpenAI's response: {"object": "list", "data": [{"object": "embedding", "index": i,
// "embedding": [floats] | "base64"}], "model", "usage": {"prompt_tokens", "total_tokens"}}.
// base64 is the little-endian float32 bytes, as OpenAI's clients decode it. Not thread-safe.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/collected_response.h"
#include "server/embedding_request.h"

namespace pagoda::server {

class EmbeddingAssembler : public CollectedResponse {
public:
    EmbeddingAssembler(std::string model, EmbeddingEncoding encoding, size_t n_subs);

    void add(size_t sub, const engine::Delta& delta) override;
    bool done() const override { return n_done_ == results_.size(); }
    const std::optional<std::string>& error() const override { return error_; }
    bool cancelled() const override { return cancelled_; }
    int64_t prompt_tokens() const override;
    nlohmann::json response() const override;

private:
    struct Result {
        std::vector<float> embedding;
        int64_t prompt_tokens = 0;
        bool done = false;
    };
    std::string model_;
    EmbeddingEncoding encoding_;
    std::vector<Result> results_;
    size_t n_done_ = 0;
    std::optional<std::string> error_;
    bool cancelled_ = false;
};

// Standard base64 (RFC 4648, with padding) of the floats' little-endian bytes.
std::string base64_floats(const std::vector<float>& values);

}  // namespace pagoda::server
