// Parses and validates the JSON body of POST /v1/embeddings (OpenAI's shape) without a model:
//   {"input": "text" | ["text", ...] | [ids] | [[ids], ...], "model": "...",
//    "encoding_format": "float" | "base64", "dimensions": N, "user": "..."}
// Every problem is an ApiError 400 naming the field. A field this endpoint does not act on is
// refused by name (user is accepted as the no-op it is by definition); `dimensions` is checked
// against the model later (the gateway), since only it knows the embedding width.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace pagoda::server {

enum class EmbeddingEncoding { float_array, base64 };

struct EmbeddingParams {
    std::string model;               // as sent (may be empty)
    std::vector<PromptInput> inputs; // one per embedding, in order
    EmbeddingEncoding encoding = EmbeddingEncoding::float_array;
    std::optional<int64_t> dimensions;
};

// OpenAI's limit on inputs per request.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// Throws ApiError (400) on the first problem.
EmbeddingParams parse_embedding_request(const nlohmann::json& body);

}  // namespace pagoda::server
