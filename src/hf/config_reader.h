// Typed, key-naming reads of a Hugging Face JSON config (config.json, a sentence-transformers module
// config): a missing key, a value of the wrong type or out of range is a pagoda::Error naming the
// file and the key's path. Shared by the decoder and encoder config readers (src/hf only).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

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
    int64_t integer(const char* key) const {
        const Json& v = at(key);
        if (!v.is_number_integer()) fail("{}: key '{}{}' is {}, expected an integer", name_, scope_, key, v.type_name());
        return v.get<int64_t>();
    }
    int64_t positive(const char* key) const {
        const int64_t v = integer(key);
        if (v <= 0 || v > (int64_t(1) << 31)) fail("{}: key '{}{}' = {} is out of range", name_, scope_, key, v);
        return v;
    }
    int64_t positive_or(const char* key, int64_t fallback) const { return has(key) ? positive(key) : fallback; }
    double number(const char* key) const {
        const Json& v = at(key);
        if (!v.is_number()) fail("{}: key '{}{}' is {}, expected a number", name_, scope_, key, v.type_name());
        const double d = v.get<double>();
        if (!std::isfinite(d)) fail("{}: key '{}{}' is not finite", name_, scope_, key);
        return d;
    }
    double number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
    bool boolean_or(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const Json& v = j_[key];
        if (!v.is_boolean()) fail("{}: key '{}{}' is {}, expected true or false", name_, scope_, key, v.type_name());
        return v.get<bool>();
    }
    std::string string_or(const char* key, const std::string& fallback) const {
        if (!has(key)) return fallback;
        const Json& v = j_[key];
        if (!v.is_string()) fail("{}: key '{}{}' is {}, expected a string", name_, scope_, key, v.type_name());
        return v.get<std::string>();
    }
    std::vector<float> floats(const char* key) const {
        const Json& v = at(key);
        if (!v.is_array()) fail("{}: key '{}{}' is {}, expected a list of numbers", name_, scope_, key, v.type_name());
        std::vector<float> out;
        for (const Json& x : v) {
            if (!x.is_number()) fail("{}: key '{}{}' holds {}, expected numbers", name_, scope_, key, x.type_name());
            out.push_back(float(x.get<double>()));
        }
        return out;
    }
    Config object(const char* key) const {
        const Json& v = at(key);
        if (!v.is_object()) fail("{}: key '{}{}' is {}, expected an object", name_, scope_, key, v.type_name());
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
