#include "server/embedding_request.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

// Ids arrive as non-negative integers; the vocabulary bound is the gateway's to check.
std::vector<int32_t> token_ids(const json& v, const std::string& name) {
    std::vector<int32_t> ids;
    ids.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const json& t = v[i];
        const std::string at = fmt::format("{}[{}]", name, i);
        if (!t.is_number_integer()) throw ApiError::invalid(fmt::format("'{}' must be a token id (an integer)", at), at, "invalid_type");
        if (t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t(INT32_MAX) : (t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX))
            throw ApiError::invalid(fmt::format("'{}' is not a valid token id", at), at, "invalid_value");
        ids.push_back(int32_t(t.get<int64_t>()));
    }
    return ids;
}

PromptInput one_input(const json& v, const std::string& name) {
    if (v.is_string()) {
        if (v.get_ref<const std::string&>().empty())
            throw ApiError::invalid(fmt::format("'{}' is empty: there is nothing to embed", name), name, "invalid_value");
        return v.get<std::string>();
    }
    if (v.is_array()) {
        if (v.empty()) throw ApiError::invalid(fmt::format("'{}' is an empty token array", name), name, "invalid_value");
        return token_ids(v, name);
    }
    throw ApiError::invalid(fmt::format("'{}' must be a string or an array of token ids", name), name, "invalid_type");
}

std::vector<PromptInput> inputs_of(const json& v) {
    if (v.is_string()) return {one_input(v, "input")};
    if (!v.is_array()) throw ApiError::invalid("'input' must be a string, an array of strings, an array of token ids or "
                                               "an array of token-id arrays", "input", "invalid_type");
    if (v.empty()) throw ApiError::invalid("'input' is an empty array: there is nothing to embed", "input", "invalid_value");
    if (v[0].is_number()) return {one_input(v, "input")};  // one token array
    if (v.size() > kMaxEmbeddingInputs)
        throw ApiError::invalid(fmt::format("'input' has {} items; at most {} are accepted per request", v.size(),
                                            kMaxEmbeddingInputs), "input", "invalid_value");
    std::vector<PromptInput> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) out.push_back(one_input(v[i], fmt::format("input[{}]", i)));
    return out;
}

}  // namespace

EmbeddingParams parse_embedding_request(const json& body) {
    if (!body.is_object()) throw ApiError::invalid("the body must be a JSON object", {}, "invalid_type");
    EmbeddingParams p;
    bool has_input = false;
    for (const auto& [name, value] : body.items()) {
        if (name == "input") {
            if (value.is_null()) continue;
            p.inputs = inputs_of(value);
            has_input = true;
        } else if (name == "model") {
            if (value.is_null()) continue;
            if (!value.is_string()) throw ApiError::invalid("'model' must be a string", "model", "invalid_type");
            p.model = value.get<std::string>();
        } else if (name == "encoding_format") {
            if (value.is_null()) continue;
            if (value == "float") p.encoding = EmbeddingEncoding::float_array;
            else if (value == "base64") p.encoding = EmbeddingEncoding::base64;
            else throw ApiError::invalid("'encoding_format' must be \"float\" or \"base64\"", "encoding_format", "invalid_value");
        } else if (name == "dimensions") {
            if (value.is_null()) continue;
            if (!value.is_number_integer() || value.get<int64_t>() < 1 || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)))
                throw ApiError::invalid("'dimensions' must be a positive integer", "dimensions", "invalid_value");
            p.dimensions = value.get<int64_t>();
        } else if (name == "user") {
            // An end-user id for the provider's abuse monitoring: nothing to do here by definition.
            if (!value.is_null() && !value.is_string()) throw ApiError::invalid("'user' must be a string", "user", "invalid_type");
        } else {
            throw ApiError::invalid(fmt::format("'{}' is not supported on /v1/embeddings: this server would not act on it, "
                                                "so it refuses the request rather than ignore it", name),
                                    name, "unsupported_parameter");
        }
    }
    if (!has_input) throw ApiError::invalid("'input' is required", "input", "missing_required_parameter");
    return p;
}

}  // namespace pagoda::server
