// Strict reading of JSON fields: every value is checked for its type (and range) before use, and a
// problem is a JsonFieldError naming the JSON path ("tools[2].function.name"), what was expected and
// what came ("'temperature' must be a number, got string"). A field that is absent or null reads as
// "not given". Callers turn JsonFieldError into their own error shape (the server: a 400 whose
// `param` is the path and whose `code` is code()). Works with nlohmann::json and ordered_json alike.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::json_reader {

enum class Problem { wrong_type, bad_value, missing };

struct JsonFieldError : Error {
    JsonFieldError(const std::string& message, std::string path, Problem problem)
        : Error(message), path(std::move(path)), problem(problem) {}
    std::string path;  // the field at fault
    Problem problem;
    // OpenAI's error codes: "invalid_type", "invalid_value", "missing_required_parameter".
    const char* code() const;
};

// "null", "boolean", "string", "array", "object", "number" (with a fraction), "integer".
const char* type_name(nlohmann::json::value_t type);
template <class J>
const char* type_name(const J& v) {
    return type_name(static_cast<nlohmann::json::value_t>(v.type()));
}

// "'PATH' must be WANTED, got TYPE" (Problem::wrong_type).
[[noreturn]] void wrong_type(const std::string& path, std::string_view wanted, const char* got);
template <class J>
[[noreturn]] void wrong_type(const std::string& path, std::string_view wanted, const J& got) {
    wrong_type(path, wanted, type_name(got));
}
// "'PATH' RULE" (Problem::bad_value), e.g. rule "must be between 0 and 2".
[[noreturn]] void bad_value(const std::string& path, const std::string& rule);
// "'PATH' is required" (Problem::missing).
[[noreturn]] void missing(const std::string& path);
// The rule an integer broke, in words; a bound nobody could mean (the type's, or 2^40 and above)
// is left out rather than printed as a huge number.
std::string integer_rule(int64_t lo, int64_t hi);

// The member `name` of `object`, or null when absent or null.
template <class J>
const J* field(const J& object, std::string_view name) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(name);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}
// The member `name`, which must be there (not null); its path is `at`.
template <class J>
const J& required(const J& object, std::string_view name, const std::string& at) {
    const J* v = field(object, name);
    if (!v) missing(at);
    return *v;
}

template <class J>
bool read_bool(const J& v, const std::string& path) {
    if (!v.is_boolean()) wrong_type(path, "a boolean", v);
    return v.template get<bool>();
}

template <class J>
const std::string& read_string(const J& v, const std::string& path) {
    if (!v.is_string()) wrong_type(path, "a string", v);
    return v.template get_ref<const std::string&>();
}

// A finite number within [lo, hi].
template <class J>
double read_number(const J& v, const std::string& path, double lo = -std::numeric_limits<double>::max(),
                   double hi = std::numeric_limits<double>::max()) {
    if (!v.is_number()) wrong_type(path, "a number", v);
    const double x = v.template get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) bad_value(path, fmt::format("must be between {} and {}", lo, hi));
    return x;
}

// An integer within [lo, hi]. It may arrive as 3 or 3.0 (JavaScript clients); 3.5 is refused.
template <class J>
int64_t read_integer(const J& v, const std::string& path, int64_t lo = std::numeric_limits<int64_t>::min(),
                     int64_t hi = std::numeric_limits<int64_t>::max()) {
    int64_t x = 0;
    if (v.is_number_unsigned()) {
        if (v.template get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) bad_value(path, integer_rule(lo, hi));
        x = int64_t(v.template get<uint64_t>());
    } else if (v.is_number_integer()) {
        x = v.template get<int64_t>();
    } else if (v.is_number_float()) {
        const double d = v.template get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) wrong_type(path, "an integer", v);
        x = int64_t(d);
    } else {
        wrong_type(path, "an integer", v);
    }
    if (x < lo || x > hi) bad_value(path, integer_rule(lo, hi));
    return x;
}

template <class J>
const J& read_object(const J& v, const std::string& path, std::string_view wanted = "an object") {
    if (!v.is_object()) wrong_type(path, wanted, v);
    return v;
}

template <class J>
const J& read_array(const J& v, const std::string& path, std::string_view wanted = "an array") {
    if (!v.is_array()) wrong_type(path, wanted, v);
    return v;
}

}  // namespace pagoda::json_reader
