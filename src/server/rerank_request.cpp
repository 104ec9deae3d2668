#include "server/rerank_request.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

std::string model_of(const json& body) {
    const auto it = body.find("model");
    if (it == body.end() || it->is_null()) return {};
    if (!it->is_string()) throw ApiError::invalid("'model' must be a string", "model", "invalid_type");
    return it->get<std::string>();
}

const json& required(const json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null())
        throw ApiError::invalid(fmt::format("'{}' is required", name), name, "missing_required_parameter");
    return *it;
}

// A text to score: a non-empty string.
std::string text_of(const json& v, const std::string& name) {
    if (!v.is_string()) throw ApiError::invalid(fmt::format("'{}' must be a string", name), name, "invalid_type");
    if (v.get_ref<const std::string&>().empty())
        throw ApiError::invalid(fmt::format("'{}' is empty: there is nothing to score", name), name, "invalid_value");
    return v.get<std::string>();
}

// A string, or a non-empty array of strings of at most kMaxRerankDocuments.
std::vector<std::string> texts_of(const json& v, const std::string& name) {
    if (v.is_string()) return {text_of(v, name)};
    if (!v.is_array())
        throw ApiError::invalid(fmt::format("'{}' must be a string or an array of strings", name), name, "invalid_type");
    if (v.empty()) throw ApiError::invalid(fmt::format("'{}' is an empty array", name), name, "invalid_value");
    if (v.size() > kMaxRerankDocuments)
        throw ApiError::invalid(fmt::format("'{}' has {} items; at most {} are accepted per request", name, v.size(),
                                            kMaxRerankDocuments),
                                name, "invalid_value");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(text_of(v[i], fmt::format("{}[{}]", name, i)));
    return out;
}

// A rerank document: a string, or an object whose only key is "text" (Cohere's and Jina's form).
std::string document_of(const json& v, size_t i) {
    const std::string name = fmt::format("documents[{}]", i);
    if (v.is_string()) return text_of(v, name);
    if (!v.is_object())
        throw ApiError::invalid(fmt::format("'{}' must be a string or an object with 'text'", name), name, "invalid_type");
    for (auto it = v.begin(); it != v.end(); ++it)
        if (it.key() != "text")
            throw ApiError::invalid(fmt::format("'{}.{}' is not supported: a document is scored by its 'text' only",
                                                name, it.key()),
                                    name + "." + it.key(), "unsupported_parameter");
    const auto text = v.find("text");
    if (text == v.end()) throw ApiError::invalid(fmt::format("'{}.text' is required", name), name + ".text",
                                                 "missing_required_parameter");
    return text_of(*text, name + ".text");
}

}  // namespace

const std::vector<RequestField>& rerank_request_fields() {
    using enum FieldUse;
    constexpr bool R = true, S = true, _ = false;  // rerank, score
    static const std::vector<RequestField> fields = {
        {"model", R, S, honoured, "the served model's id or one of its LoRA adapters' (see LoRA adapters)"},
        {"query", R, _, honoured, "required"},
        {"documents", R, _, honoured, "required: strings, or objects with 'text'"},
        {"top_n", R, _, honoured, "the n best; default all"},
        {"return_documents", R, _, honoured, "default true"},
        {"text_1", _, S, honoured, "required: a string or an array of strings"},
        {"text_2", _, S, honoured, "required: a string or an array of strings"},
        {"user", R, S, no_op, "an end-user id for the provider's abuse monitoring; no output depends on it"},
        {"max_chunks_per_doc", R, _, refused, "documents are never split; one too long for the context is a 400"},
        {"rank_fields", R, _, refused, "a document is scored by its 'text' only"},
        {"max_tokens_per_doc", R, _, refused, "documents are never truncated; one too long for the context is a 400"},
        {"truncate_prompt_tokens", R, S, refused, "inputs are never truncated; one too long for the context is a 400"},
        {"encoding_format", _, S, refused, "scores are numbers"},
        {"priority", R, S, refused, "requests are served first come, first served"},
    };
    return fields;
}

RerankParams parse_rerank_request(const json& body) {
    if (!body.is_object()) throw ApiError::invalid("the body must be a JSON object", {}, "invalid_type");
    check_fields_in(body, rerank_request_fields(), false, "/v1/rerank");
    RerankParams p;
    p.model = model_of(body);
    const std::string query = text_of(required(body, "query"), "query");
    const json& docs = required(body, "documents");
    if (!docs.is_array())
        throw ApiError::invalid("'documents' must be an array of strings or of objects with 'text'", "documents",
                                "invalid_type");
    if (docs.empty()) throw ApiError::invalid("'documents' is an empty array: there is nothing to rank", "documents",
                                              "invalid_value");
    if (docs.size() > kMaxRerankDocuments)
        throw ApiError::invalid(fmt::format("'documents' has {} items; at most {} are accepted per request", docs.size(),
                                            kMaxRerankDocuments),
                                "documents", "invalid_value");
    for (size_t i = 0; i < docs.size(); ++i) p.pairs.push_back({query, document_of(docs[i], i)});
    if (const auto it = body.find("top_n"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer() || (it->is_number_unsigned() ? it->get<uint64_t>() < 1 : it->get<int64_t>() < 1))
            throw ApiError::invalid("'top_n' must be a positive integer", "top_n", "invalid_value");
        // More than there are documents means all of them (as Cohere and Jina answer).
        p.top_n = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : it->get<int64_t>();
    }
    if (const auto it = body.find("return_documents"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean()) throw ApiError::invalid("'return_documents' must be a boolean", "return_documents", "invalid_type");
        p.return_documents = it->get<bool>();
    }
    if (const auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string())
        throw ApiError::invalid("'user' must be a string", "user", "invalid_type");
    return p;
}

RerankParams parse_score_request(const json& body) {
    if (!body.is_object()) throw ApiError::invalid("the body must be a JSON object", {}, "invalid_type");
    check_fields_in(body, rerank_request_fields(), true, "/v1/score");
    RerankParams p;
    p.score = true;
    p.model = model_of(body);
    const std::vector<std::string> first = texts_of(required(body, "text_1"), "text_1");
    const std::vector<std::string> second = texts_of(required(body, "text_2"), "text_2");
    if (first.size() != 1 && first.size() != second.size())
        throw ApiError::invalid(fmt::format("'text_1' has {} items and 'text_2' {}: send one text_1 for all of text_2, "
                                            "or two lists of the same length",
                                            first.size(), second.size()),
                                "text_1", "invalid_value");
    for (size_t i = 0; i < second.size(); ++i) p.pairs.push_back({first[first.size() == 1 ? 0 : i], second[i]});
    if (const auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string())
        throw ApiError::invalid("'user' must be a string", "user", "invalid_type");
    return p;
}

}  // namespace pagoda::server
