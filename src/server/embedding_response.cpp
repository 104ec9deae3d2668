#include "server/embedding_response.h"

#include <bit>
#include <cstring>

#include "core/base64.h"
#include "core/error.h"

namespace pagoda::server {

using json = nlohmann::json;

EmbeddingAssembler::EmbeddingAssembler(std::string model, EmbeddingEncoding encoding, size_t n_subs)
    : model_(std::move(model)), encoding_(encoding), results_(n_subs) {}

void EmbeddingAssembler::add(size_t sub, const engine::Delta& d) {
    if (sub >= results_.size()) fail("embedding response: sub-request {} of {}", sub, results_.size());
    Result& r = results_[sub];
    if (r.done) return;
    r.prompt_tokens = d.usage.prompt_tokens;
    if (!d.request_done) return;
    r.done = true;
    ++n_done_;
    if (d.finish_reason == engine::FinishReason::error && !error_) error_ = d.error;
    if (d.finish_reason == engine::FinishReason::cancelled) cancelled_ = true;
    r.embedding = d.embedding;
    if (d.finish_reason == engine::FinishReason::stop && r.embedding.empty() && !error_)
        error_ = "the engine finished an embedding without a vector";
}

int64_t EmbeddingAssembler::prompt_tokens() const {
    int64_t n = 0;
    for (const auto& r : results_) n += r.prompt_tokens;
    return n;
}

json EmbeddingAssembler::response() const {
    json data = json::array();
    for (size_t i = 0; i < results_.size(); ++i) {
        json e = {{"object", "embedding"}, {"index", i}};
        if (encoding_ == EmbeddingEncoding::base64) e["embedding"] = base64_floats(results_[i].embedding);
        else e["embedding"] = results_[i].embedding;
        data.push_back(std::move(e));
    }
    const int64_t tokens = prompt_tokens();
    return {{"object", "list"}, {"data", std::move(data)}, {"model", model_},
            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

std::string base64_floats(const std::vector<float>& values) {
    std::vector<uint8_t> bytes(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
        const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
        for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = static_cast<uint8_t>(bits >> (8 * b));  // little-endian
    }
    return encode_base64(bytes);
}

}  // namespace pagoda::server
