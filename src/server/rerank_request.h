// Parses and validates the JSON bodies of the relevance endpoints without a model:
//   POST /v1/rerank and /rerank (Jina's and Cohere's shape):
//     {"model", "query": "text", "documents": ["text" | {"text": "..."}, ...], "top_n": N,
//      "return_documents": bool}
//   POST /v1/score (vLLM's shape): {"model", "text_1": "text" | [...], "text_2": "text" | [...]}
// Both become a list of (query, document) pairs, each scored by the model (gateway_rerank.cpp).
// Every problem is an ApiError 400 naming the field; a field these endpoints do not act on is
// refused by name (rerank_request_fields(), the same table as docs/api.md's).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request_fields.h"

namespace pagoda::server {

// The top-level fields of /v1/rerank (RequestField::completions) and /v1/score (RequestField::chat).
const std::vector<RequestField>& rerank_request_fields();

// At most this many documents (or pairs) per request.
inline constexpr size_t kMaxRerankDocuments = 1024;

struct RerankPair {
    std::string query, document;
};

struct RerankParams {
    std::string model;               // as sent (may be empty)
    std::vector<RerankPair> pairs;   // one per document (rerank) or per pair (score), in order
    std::optional<int64_t> top_n;    // rerank: keep the n best (nullopt: all)
    bool return_documents = true;    // rerank: echo each document as {"text": ...}
    bool score = false;              // /v1/score's response shape
};

// POST /v1/rerank and /rerank. Throws ApiError (400) on the first problem.
RerankParams parse_rerank_request(const nlohmann::json& body);
// POST /v1/score: text_1 and text_2 each a string or a non-empty array of strings; one text_1 goes
// with every text_2, else the two lists pair up by index and must be as long. Throws ApiError (400).
RerankParams parse_score_request(const nlohmann::json& body);

}  // namespace pagoda::server
