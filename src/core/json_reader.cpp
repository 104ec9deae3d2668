#include "core/json_reader.h"

namespace pagoda::json_reader {

const char* JsonFieldError::code() const {
    switch (problem) {
        case Problem::wrong_type: return "invalid_type";
        case Problem::bad_value: return "invalid_value";
        case Problem::missing: return "missing_required_parameter";
    }
    return "invalid_value";
}

const char* type_name(nlohmann::json::value_t type) {
    using value_t = nlohmann::json::value_t;
    switch (type) {
        case value_t::null: return "null";
        case value_t::boolean: return "boolean";
        case value_t::string: return "string";
        case value_t::array: return "array";
        case value_t::object: return "object";
        case value_t::number_float: return "number";
        case value_t::number_integer:
        case value_t::number_unsigned: return "integer";
        default: return "value";
    }
}

void wrong_type(const std::string& path, std::string_view wanted, const char* got) {
    throw JsonFieldError(fmt::format("'{}' must be {}, got {}", path, wanted, got), path, Problem::wrong_type);
}

void bad_value(const std::string& path, const std::string& rule) {
    throw JsonFieldError(fmt::format("'{}' {}", path, rule), path, Problem::bad_value);
}

void missing(const std::string& path) {
    throw JsonFieldError(fmt::format("'{}' is required", path), path, Problem::missing);
}

std::string integer_rule(int64_t lo, int64_t hi) {
    const bool no_lo = lo == std::numeric_limits<int64_t>::min();
    const bool no_hi = hi >= (int64_t(1) << 40);
    if (no_lo && no_hi) return "must fit in a signed 64-bit integer";
    if (no_hi) return fmt::format("must be at least {}", lo);
    if (no_lo) return fmt::format("must be at most {}", hi);
    return fmt::format("must be between {} and {}", lo, hi);
}

}  // namespace pagoda::json_reader
