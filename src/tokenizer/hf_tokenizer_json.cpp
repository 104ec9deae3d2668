#include "tokenizer/hf_tokenizer_json.h"


#include "core/json_reader.h"

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

namespace {

// Runs one of core/json_reader's checked reads of the value at `at`, reporting its problem in this
// file's form ("FILE: PATH: must be a string, got integer"): one reader, the tokenizer's error shape.
template <class Read>
decltype(auto) checked(const JsonPath& at, Read read) {
    try {
        return read(at.path);
    } catch (const json_reader::JsonFieldError& e) {
        std::string_view what = e.what();
        const std::string quoted = "'" + at.path + "' ";
        if (what.starts_with(quoted)) what.remove_prefix(quoted.size());
        at.fail("{}", what);
    }
}

}  // namespace

const Json& as_object(const Json& j, const JsonPath& at) {
    return checked(at, [&](const std::string& p) -> const Json& { return json_reader::read_object(j, p, "a JSON object"); });
}

const Json& as_array(const Json& j, const JsonPath& at) {
    return checked(at, [&](const std::string& p) -> const Json& { return json_reader::read_array(j, p, "a JSON array"); });
}

const std::string& as_string(const Json& j, const JsonPath& at) {
    return checked(at, [&](const std::string& p) -> const std::string& { return json_reader::read_string(j, p); });
}

bool as_bool(const Json& j, const JsonPath& at) {
    return checked(at, [&](const std::string& p) { return json_reader::read_bool(j, p); });
}

int64_t as_token_id(const Json& j, const JsonPath& at) {
    if (j.is_number_unsigned()) {
        uint64_t v = j.get<uint64_t>();
        if (v >= uint64_t(kMaxTokenId)) at.fail("token id {} is out of range (pagoda accepts ids below {})", v, kMaxTokenId);
        return int64_t(v);
    }
    if (j.is_number_integer()) at.fail("token id {} is negative", j.get<int64_t>());
    return checked(at, [&](const std::string& p) -> int64_t {
        json_reader::wrong_type(p, "a token id (a non-negative integer)", j);
    });
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
    return checked(at / key, [&](const std::string& p) -> std::optional<std::string> {
        json_reader::wrong_type(p, "a token string or an object with \"content\"", *m);
    });
}

std::string decode_base64(std::string_view text, const JsonPath& at) {
    std::vector<uint8_t> bytes;
    std::string problem;
    if (!try_decode_base64(text, bytes, problem)) at.fail("is not valid base64 ({})", problem);
    return std::string(bytes.begin(), bytes.end());
}

}  // namespace pagoda::tokenizer::hf
