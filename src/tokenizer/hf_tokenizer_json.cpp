#include "tokenizer/hf_tokenizer_json.h"

#include <cstring>

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

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string decode_base64(std::string_view text, const JsonPath& at) {
    std::string out;
    out.reserve(text.size() / 4 * 3 + 3);
    uint32_t bits = 0;
    int n_bits = 0;
    size_t end = text.size();
    while (end > 0 && text[end - 1] == '=') --end;
    if (text.size() - end > 2) at.fail("is not valid base64 (too much '=' padding)");
    for (size_t i = 0; i < end; ++i) {
        const char* hit = text[i] ? std::strchr(kBase64, text[i]) : nullptr;
        if (!hit) at.fail("is not valid base64 (character {} is '{}')", i, text[i]);
        bits = (bits << 6) | uint32_t(hit - kBase64);
        n_bits += 6;
        if (n_bits >= 8) {
            n_bits -= 8;
            out += char((bits >> n_bits) & 0xFF);
        }
    }
    if (n_bits >= 6) at.fail("is not valid base64 (its length is not possible)");
    return out;
}

std::string encode_base64(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t chunk = uint32_t(uint8_t(bytes[i])) << 16;
        if (i + 1 < bytes.size()) chunk |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        if (i + 2 < bytes.size()) chunk |= uint32_t(uint8_t(bytes[i + 2]));
        out += kBase64[(chunk >> 18) & 63];
        out += kBase64[(chunk >> 12) & 63];
        out += i + 1 < bytes.size() ? kBase64[(chunk >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? kBase64[chunk & 63] : '=';
    }
    return out;
}

}  // namespace pagoda::tokenizer::hf
