// Typed, key-naming reads of a Hugging Face JSON config (config.json, a sentence-transformers module
// config): a missing key, a value of the wrong type or out of range is a pagoda::Error naming the
// file and the key's path. Shared by the decoder and encoder config readers (src/hf only); the kinds
// are checked by core/json_reader, the project's one strict JSON reader.
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_reader.h"

namespace pagoda::hf::detail {

using Json = nlohmann::json;

// Typed reads of config.json keys; JSON null counts as absent (HF writes "sliding_window": null).
class Config {
public:
    Config(const Json& j, std::string name, std::string scope) : j_(j), name_(std::move(name)), scope_(std::move(scope)) {}

    bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
    const Json& at(const char* key) const {
        if (!has(key)) fail("{}: key '{}{}' is missing", name_, scope_, key);
        return j_[key];
    }
    // at(key) through one of core/json_reader's checked reads (defined before the readers that use it).
    template <class Get>
    decltype(auto) read(const char* key, Get get) const {
        const Json& v = at(key);
        try {
            return get(v, scope_ + key);
        } catch (const json_reader::JsonFieldError& e) {
            fail("{}: key {}", name_, e.what());
        }
    }
    // Kinds are checked by core/json_reader (the one strict reader); its message is reported as
    // "FILE: key 'SCOPE.KEY' must be ..., got ...".
    int64_t integer(const char* key) const {
        return read(key, [](const Json& v, const std::string& p) {
            if (!v.is_number_integer()) json_reader::wrong_type(p, "an integer", v);  // 3.0 is not a count here
            return json_reader::read_integer(v, p);
        });
    }
    int64_t positive(const char* key) const {
        const int64_t v = integer(key);
        if (v <= 0 || v > (int64_t(1) << 31)) fail("{}: key '{}{}' = {} is out of range", name_, scope_, key, v);
        return v;
    }
    int64_t positive_or(const char* key, int64_t fallback) const { return has(key) ? positive(key) : fallback; }
    double number(const char* key) const {
        return read(key, [](const Json& v, const std::string& p) { return json_reader::read_number(v, p); });
    }
    double number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
    bool boolean_or(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        return read(key, [](const Json& v, const std::string& p) { return json_reader::read_bool(v, p); });
    }
    std::string string_or(const char* key, const std::string& fallback) const {
        if (!has(key)) return fallback;
        return read(key, [](const Json& v, const std::string& p) { return json_reader::read_string(v, p); });
    }
    std::vector<float> floats(const char* key) const {
        return read(key, [](const Json& v, const std::string& p) {
            std::vector<float> out;
            for (size_t i = 0; i < json_reader::read_array(v, p, "a list of numbers").size(); ++i)
                out.push_back(float(json_reader::read_number(v[i], p + "[" + std::to_string(i) + "]")));
            return out;
        });
    }
    Config object(const char* key) const {
        const Json& v = read(key, [](const Json& j, const std::string& p) -> const Json& { return json_reader::read_object(j, p); });
        return Config(v, name_, scope_ + key + ".");
    }
    [[noreturn]] void refuse(const char* key, const std::string& why) const {
        fail("{}: key '{}{}' {}", name_, scope_, key, why);
    }
    const std::string& name() const { return name_; }

private:
    const Json& j_;
    std::string name_, scope_;
};

}  // namespace pagoda::hf::detail
