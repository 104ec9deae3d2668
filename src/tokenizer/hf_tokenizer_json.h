// Typed access to the JSON of Hugging Face tokenizer files with errors that name the file and the
// key path ("…/tokenizer.json: model.merges[3]: …"), so a malformed file is reported in the terms a
// user can find in it. Internal to the hf_tokenizer_* files.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"

namespace pagoda::tokenizer::hf {

using Json = nlohmann::json;

// Where a JSON value sits: the file (as named in errors) and the key path inside it.
struct JsonPath {
    std::string file;
    std::string path;  // empty at the document's top level

    JsonPath operator/(std::string_view key) const {
        return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
    }
    JsonPath operator[](size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }

    template <class... Args>
    [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
        std::string what = fmt::format(format, std::forward<Args>(args)...);
        if (path.empty()) pagoda::fail("{}: {}", file, what);
        pagoda::fail("{}: {}: {}", file, path, what);
    }
};

// Parses a whole document; a syntax error names the file and nlohmann's position.
Json parse_json(std::string_view text, const std::string& file);

// `obj[key]` when `obj` is an object holding a non-null `key`, else nullptr.
const Json* member(const Json& obj, std::string_view key);

// Checked reads of a value at `at` (the value's own path).
const Json& as_object(const Json& j, const JsonPath& at);
const Json& as_array(const Json& j, const JsonPath& at);
const std::string& as_string(const Json& j, const JsonPath& at);
bool as_bool(const Json& j, const JsonPath& at);
int64_t as_token_id(const Json& j, const JsonPath& at);  // a non-negative integer below kMaxTokenId

// Members of an object `obj` (at path `at`): required or optional, typed.
const Json& required(const Json& obj, std::string_view key, const JsonPath& at);
std::optional<bool> optional_bool(const Json& obj, std::string_view key, const JsonPath& at);
std::optional<std::string> optional_string(const Json& obj, std::string_view key, const JsonPath& at);
// The "type" member every normalizer, pre-tokenizer, model, post-processor and decoder carries.
const std::string& type_of(const Json& obj, const JsonPath& at);

// A token in tokenizer_config.json: a string, an {"content": …} object (AddedToken), or null.
std::optional<std::string> token_text(const Json& obj, std::string_view key, const JsonPath& at);

// Precompiled's charsmap as tokenizer.json stores it (core/base64.h; the writer uses encode_base64):
// the bytes, or a failure naming `at`.
std::string decode_base64(std::string_view text, const JsonPath& at);

inline constexpr int64_t kMaxTokenId = int64_t(1) << 24;  // far above any real vocabulary (Gemma: 262144)

}  // namespace pagoda::tokenizer::hf
