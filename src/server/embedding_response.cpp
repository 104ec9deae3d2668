#include "server/embedding_response.h"

#include <bit>
#include <cstring>

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
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<unsigned char> bytes(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
        const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
        for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = static_cast<unsigned char>(bits >> (8 * b));  // little-endian
    }
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t chunk = uint32_t(bytes[i]) << 16;
        if (n > 1) chunk |= uint32_t(bytes[i + 1]) << 8;
        if (n > 2) chunk |= uint32_t(bytes[i + 2]);
        out += kAlphabet[(chunk >> 18) & 63];
        out += kAlphabet[(chunk >> 12) & 63];
        out += n > 1 ? kAlphabet[(chunk >> 6) & 63] : '=';
        out += n > 2 ? kAlphabet[chunk & 63] : '=';
    }
    return out;
}

}  // namespace pagoda::server
