#include "server/tokenize_request.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

bool optional_bool(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return false;
    if (!it->is_boolean())
        throw ApiError::invalid(fmt::format("'{}' must be a boolean", name), name, "invalid_type");
    return it->get<bool>();
}

// Refuses any field but `known` (null counts as absent), as the completion endpoints do.
void only_fields(const json& body, std::initializer_list<std::string_view> known, const char* path) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (it->is_null() || std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
        throw ApiError::invalid(fmt::format("'{}' is not a parameter of {}; it is refused rather than ignored",
                                            it.key(), path),
                                it.key(), "unsupported_parameter");
    }
}

void require_object(const json& body) {
    if (!body.is_object()) throw ApiError::invalid("the body must be a JSON object", {}, "invalid_type");
}

}  // namespace

json tokenize_response(const json& body, const tokenizer::Tokenizer& tok) {
    require_object(body);
    only_fields(body, {"content", "add_special", "parse_special", "with_pieces"}, "/tokenize");
    auto content = body.find("content");
    if (content == body.end() || content->is_null())
        throw ApiError::invalid("'content' is required", "content", "missing_required_parameter");
    if (!content->is_string()) throw ApiError::invalid("'content' must be a string", "content", "invalid_type");
    const bool add_special = optional_bool(body, "add_special");
    const bool parse_special = optional_bool(body, "parse_special");
    const bool with_pieces = optional_bool(body, "with_pieces");
    tokenizer::EncodeOptions eo;
    if (!add_special) eo.add_bos = eo.add_eos = false;
    eo.parse_special = parse_special;
    const std::vector<int32_t> ids = tok.encode(content->get<std::string>(), eo);
    json tokens = json::array();
    for (int32_t id : ids) {
        if (!with_pieces) {
            tokens.push_back(id);
            continue;
        }
        const std::string piece = tok.token_to_piece(id, true);
        json p;
        if (tokenizer::utf8_sanitize(piece) == piece) {
            p = piece;
        } else {
            p = json::array();
            for (unsigned char c : piece) p.push_back(int(c));
        }
        tokens.push_back({{"id", id}, {"piece", std::move(p)}});
    }
    return json{{"tokens", std::move(tokens)}};
}

json detokenize_response(const json& body, const tokenizer::Tokenizer& tok) {
    require_object(body);
    only_fields(body, {"tokens"}, "/detokenize");
    auto tokens = body.find("tokens");
    if (tokens == body.end() || tokens->is_null())
        throw ApiError::invalid("'tokens' is required", "tokens", "missing_required_parameter");
    if (!tokens->is_array()) throw ApiError::invalid("'tokens' must be an array of token ids", "tokens", "invalid_type");
    std::vector<int32_t> ids;
    ids.reserve(tokens->size());
    const int64_t vocab = tok.n_vocab();
    for (size_t i = 0; i < tokens->size(); ++i) {
        const json& v = (*tokens)[i];
        const std::string name = fmt::format("tokens[{}]", i);
        if (!v.is_number_integer()) throw ApiError::invalid(fmt::format("'{}' must be an integer", name), name, "invalid_type");
        if (v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(vocab) : (v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab))
            throw ApiError::invalid(fmt::format("'{}' is out of range (vocabulary has {} tokens)", name, vocab), name,
                                    "invalid_value");
        ids.push_back(int32_t(v.get<int64_t>()));
    }
    return json{{"content", tok.decode(ids)}};
}

}  // namespace pagoda::server
