// What the Hugging Face config tests share: the GGUF metadata an HfModel maps to (looked up by key,
// or as a map that fails the test when a key is written twice) and the message a call or a
// config.json text is refused with ("" when it is accepted).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "hf/hf_config.h"

namespace pagoda::hf::config_test {

inline const gguf::Value* meta(const HfModel& m, const std::string& key) {
    for (const auto& [k, v] : m.metadata)
        if (k == key) return &v;
    return nullptr;
}

inline int64_t meta_int(const HfModel& m, const std::string& key) {
    const gguf::Value* v = meta(m, key);
    return v ? v->as_int().value_or(-1) : -1;
}

inline std::map<std::string, gguf::Value> metadata_map(const HfModel& m) {
    std::map<std::string, gguf::Value> out;
    for (const auto& [key, value] : m.metadata) EXPECT_TRUE(out.emplace(key, value).second) << key << " written twice";
    return out;
}

template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

inline std::string config_error(const std::string& json) {
    return error_of([&] { read_hf_config(json, "config.json"); });
}

}  // namespace pagoda::hf::config_test
