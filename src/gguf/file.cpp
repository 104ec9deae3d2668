// File's lookups and typed getters. Getters fail with the file and key named, so a model loader can
// call them without wrapping every call in its own checks.
#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {

int64_t TensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // the reader already rejected shapes whose product overflows
    return n;
}

const Value* File::find(std::string_view key) const {
    auto it = metadata_index_.find(key);
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

const Value& require(const File& f, std::string_view key) {
    const Value* v = f.find(key);
    if (!v) {
        const std::string note = f.missing_key_note(key);
        fail("{}: missing metadata key '{}'{}{}", f.name(), key, note.empty() ? "" : " (", note.empty() ? "" : note + ")");
    }
    return *v;
}

[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v, const char* expected) {
    fail("{}: metadata key '{}' is {} {}, expected {}", f.name(), key, v.type == ValueType::array ? "an" : "a",
         value_type_name(v.type), expected);
}

std::string convert_string(const File& f, std::string_view key, const Value& v) {
    if (const std::string* s = v.as_string()) return *s;
    wrong_type(f, key, v, "a string");
}
int64_t convert_int(const File& f, std::string_view key, const Value& v) {
    if (auto i = v.as_int()) return *i;
    if (v.is_integer()) fail("{}: metadata key '{}' value {} does not fit a signed 64-bit integer", f.name(), key, v.to_display());
    wrong_type(f, key, v, "an integer");
}
uint64_t convert_uint(const File& f, std::string_view key, const Value& v) {
    if (auto u = v.as_uint()) return *u;
    if (v.is_integer()) fail("{}: metadata key '{}' value {} is negative, expected a non-negative integer", f.name(), key, v.to_display());
    wrong_type(f, key, v, "a non-negative integer");
}
double convert_float(const File& f, std::string_view key, const Value& v) {
    if (auto d = v.as_float()) return *d;
    wrong_type(f, key, v, "a number");
}
bool convert_bool(const File& f, std::string_view key, const Value& v) {
    if (v.type == ValueType::boolean)
        if (const bool* b = std::get_if<bool>(&v.data)) return *b;
    wrong_type(f, key, v, "a bool");
}

const Array& require_array(const File& f, std::string_view key, const char* expected) {
    const Value& v = require(f, key);
    const Array* a = v.as_array();
    if (!a) wrong_type(f, key, v, expected);
    return *a;
}

}  // namespace

std::string File::get_string(std::string_view key) const { return convert_string(*this, key, require(*this, key)); }
int64_t File::get_int(std::string_view key) const { return convert_int(*this, key, require(*this, key)); }
uint64_t File::get_uint(std::string_view key) const { return convert_uint(*this, key, require(*this, key)); }
double File::get_float(std::string_view key) const { return convert_float(*this, key, require(*this, key)); }
bool File::get_bool(std::string_view key) const { return convert_bool(*this, key, require(*this, key)); }

std::vector<std::string> File::get_strings(std::string_view key) const {
    const Array& a = require_array(*this, key, "an array of strings");
    if (a.element_type != ValueType::string)
        fail("{}: metadata key '{}' is an array of {}, expected an array of strings", name_, key,
             value_type_name(a.element_type));
    std::vector<std::string> out;
    out.reserve(a.items.size());
    for (const Value& v : a.items) out.push_back(convert_string(*this, key, v));
    return out;
}

std::vector<float> File::get_floats(std::string_view key) const {
    const Array& a = require_array(*this, key, "an array of numbers");
    std::vector<float> out;
    out.reserve(a.items.size());
    for (const Value& v : a.items) {
        auto d = v.as_float();
        if (!d)
            fail("{}: metadata key '{}' is an array of {}, expected an array of numbers", name_, key,
                 value_type_name(a.element_type));
        out.push_back(float(*d));
    }
    return out;
}

std::vector<int64_t> File::get_ints(std::string_view key) const {
    const Array& a = require_array(*this, key, "an array of integers");
    std::vector<int64_t> out;
    out.reserve(a.items.size());
    for (size_t i = 0; i < a.items.size(); ++i) {
        auto n = a.items[i].as_int();
        if (!n)
            fail("{}: metadata key '{}' item {} ({} {}) is not an integer that fits 64 bits", name_, key, i,
                 value_type_name(a.items[i].type), a.items[i].to_display());
        out.push_back(*n);
    }
    return out;
}

std::string File::get_string_or(std::string_view key, const std::string& fallback) const {
    const Value* v = find(key);
    return v ? convert_string(*this, key, *v) : fallback;
}
int64_t File::get_int_or(std::string_view key, int64_t fallback) const {
    const Value* v = find(key);
    return v ? convert_int(*this, key, *v) : fallback;
}
uint64_t File::get_uint_or(std::string_view key, uint64_t fallback) const {
    const Value* v = find(key);
    return v ? convert_uint(*this, key, *v) : fallback;
}
double File::get_float_or(std::string_view key, double fallback) const {
    const Value* v = find(key);
    return v ? convert_float(*this, key, *v) : fallback;
}
bool File::get_bool_or(std::string_view key, bool fallback) const {
    const Value* v = find(key);
    return v ? convert_bool(*this, key, *v) : fallback;
}

}  // namespace pagoda::gguf
