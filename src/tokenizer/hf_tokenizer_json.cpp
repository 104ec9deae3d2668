#include "tokenizer/hf_tokenizer_json.h"

namespace pagoda::tokenizer::hf {

Json parse_json(std::string_view text, const std::string& file) {
    try {
        return Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {
        pagoda::fail("{}: not valid JSON: {}", file, e.what());
    }
}

const Json* member(const Json& obj, std::string_view key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

const Json& as_object(const Json& j, const JsonPath& at) {
    if (!j.is_object()) at.fail("must be a JSON object, not {}", j.type_name());
    return j;
}

const Json& as_array(const Json& j, const JsonPath& at) {
    if (!j.is_array()) at.fail("must be a JSON array, not {}", j.type_name());
    return j;
}

const std::string& as_string(const Json& j, const JsonPath& at) {
    if (!j.is_string()) at.fail("must be a string, not {}", j.type_name());
    return j.get_ref<const std::string&>();
}

bool as_bool(const Json& j, const JsonPath& at) {
    if (!j.is_boolean()) at.fail("must be true or false, not {}", j.type_name());
    return j.get<bool>();
}

int64_t as_token_id(const Json& j, const JsonPath& at) {
    if (j.is_number_unsigned()) {
        uint64_t v = j.get<uint64_t>();
        if (v >= uint64_t(kMaxTokenId)) at.fail("token id {} is out of range (pagoda accepts ids below {})", v, kMaxTokenId);
        return int64_t(v);
    }
    if (j.is_number_integer()) at.fail("token id {} is negative", j.get<int64_t>());
    at.fail("must be a token id (a non-negative integer), not {}", j.type_name());
}

const Json& required(const Json& obj, std::string_view key, const JsonPath& at) {
    const Json* m = member(as_object(obj, at), key);
    if (!m) (at / key).fail("is missing");
    return *m;
}

std::optional<bool> optional_bool(const Json& obj, std::string_view key, const JsonPath& at) {
    const Json* m = member(obj, key);
    if (!m) return std::nullopt;
    return as_bool(*m, at / key);
}

std::optional<std::string> optional_string(const Json& obj, std::string_view key, const JsonPath& at) {
    const Json* m = member(obj, key);
    if (!m) return std::nullopt;
    return as_string(*m, at / key);
}

const std::string& type_of(const Json& obj, const JsonPath& at) {
    return as_string(required(obj, "type", at), at / "type");
}

std::optional<std::string> token_text(const Json& obj, std::string_view key, const JsonPath& at) {
    const Json* m = member(obj, key);
    if (!m) return std::nullopt;
    if (m->is_string()) return m->get<std::string>();
    if (m->is_object()) return as_string(required(*m, "content", at / key), at / key / "content");
    (at / key).fail("must be a token string or an object with \"content\", not {}", m->type_name());
}

}  // namespace pagoda::tokenizer::hf
