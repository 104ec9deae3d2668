// Metadata values: constructors that keep the declared GGUF type, lossless conversions, equality and
// a short display form (used by `pagoda gguf-info` and error messages).
#include <bit>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::u8: return "u8";
        case ValueType::i8: return "i8";
        case ValueType::u16: return "u16";
        case ValueType::i16: return "i16";
        case ValueType::u32: return "u32";
        case ValueType::i32: return "i32";
        case ValueType::f32: return "f32";
        case ValueType::boolean: return "bool";
        case ValueType::string: return "string";
        case ValueType::array: return "array";
        case ValueType::u64: return "u64";
        case ValueType::i64: return "i64";
        case ValueType::f64: return "f64";
    }
    return "unknown";
}

std::optional<uint64_t> min_encoded_size(uint32_t value_type_id) {
    switch (static_cast<ValueType>(value_type_id)) {
        case ValueType::u8:
        case ValueType::i8:
        case ValueType::boolean: return 1;
        case ValueType::u16:
        case ValueType::i16: return 2;
        case ValueType::u32:
        case ValueType::i32:
        case ValueType::f32: return 4;
        case ValueType::u64:
        case ValueType::i64:
        case ValueType::f64: return 8;
        case ValueType::string: return 8;  // the length prefix
        case ValueType::array: return 12;  // element type + count
    }
    return std::nullopt;
}

namespace {
Value make(ValueType type, decltype(Value::data) data) {
    Value v;
    v.type = type;
    v.data = std::move(data);
    return v;
}
}  // namespace

Value Value::u8(uint8_t v) { return make(ValueType::u8, uint64_t(v)); }
Value Value::i8(int8_t v) { return make(ValueType::i8, int64_t(v)); }
Value Value::u16(uint16_t v) { return make(ValueType::u16, uint64_t(v)); }
Value Value::i16(int16_t v) { return make(ValueType::i16, int64_t(v)); }
Value Value::u32(uint32_t v) { return make(ValueType::u32, uint64_t(v)); }
Value Value::i32(int32_t v) { return make(ValueType::i32, int64_t(v)); }
Value Value::u64(uint64_t v) { return make(ValueType::u64, v); }
Value Value::i64(int64_t v) { return make(ValueType::i64, v); }
Value Value::f32(float v) { return make(ValueType::f32, double(v)); }
Value Value::f64(double v) { return make(ValueType::f64, v); }
Value Value::boolean(bool v) { return make(ValueType::boolean, v); }
Value Value::string(std::string v) { return make(ValueType::string, std::move(v)); }

Value Value::array(ValueType element_type, std::vector<Value> items) {
    if (!min_encoded_size(static_cast<uint32_t>(element_type)))
        fail("array element type id {} is not a GGUF value type", static_cast<uint32_t>(element_type));
    for (size_t i = 0; i < items.size(); ++i)
        if (items[i].type != element_type)
            fail("array of {} holds a {} at index {}", value_type_name(element_type), value_type_name(items[i].type), i);
    auto arr = std::make_shared<Array>();
    arr->element_type = element_type;
    arr->items = std::move(items);
    return make(ValueType::array, std::shared_ptr<const Array>(std::move(arr)));
}

Value Value::strings(const std::vector<std::string>& items) {
    std::vector<Value> values;
    values.reserve(items.size());
    for (const auto& s : items) values.push_back(string(s));
    return array(ValueType::string, std::move(values));
}

Value Value::f32s(const std::vector<float>& items) {
    std::vector<Value> values;
    values.reserve(items.size());
    for (float f : items) values.push_back(f32(f));
    return array(ValueType::f32, std::move(values));
}

Value Value::i32s(const std::vector<int32_t>& items) {
    std::vector<Value> values;
    values.reserve(items.size());
    for (int32_t i : items) values.push_back(i32(i));
    return array(ValueType::i32, std::move(values));
}

bool Value::is_integer() const {
    switch (type) {
        case ValueType::u8:
        case ValueType::i8:
        case ValueType::u16:
        case ValueType::i16:
        case ValueType::u32:
        case ValueType::i32:
        case ValueType::u64:
        case ValueType::i64: return true;
        default: return false;
    }
}

bool Value::is_float() const { return type == ValueType::f32 || type == ValueType::f64; }

std::optional<int64_t> Value::as_int() const {
    if (!is_integer()) return std::nullopt;
    if (const auto* u = std::get_if<uint64_t>(&data)) {
        if (*u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return int64_t(*u);
    }
    if (const auto* i = std::get_if<int64_t>(&data)) return *i;
    return std::nullopt;
}

std::optional<uint64_t> Value::as_uint() const {
    if (!is_integer()) return std::nullopt;
    if (const auto* u = std::get_if<uint64_t>(&data)) return *u;
    if (const auto* i = std::get_if<int64_t>(&data)) {
        if (*i < 0) return std::nullopt;
        return uint64_t(*i);
    }
    return std::nullopt;
}

std::optional<double> Value::as_float() const {
    if (is_float()) {
        if (const auto* d = std::get_if<double>(&data)) return *d;
        return std::nullopt;
    }
    if (!is_integer()) return std::nullopt;
    if (const auto* u = std::get_if<uint64_t>(&data)) return double(*u);
    if (const auto* i = std::get_if<int64_t>(&data)) return double(*i);
    return std::nullopt;
}

const std::string* Value::as_string() const {
    return type == ValueType::string ? std::get_if<std::string>(&data) : nullptr;
}

const Array* Value::as_array() const {
    if (type != ValueType::array) return nullptr;
    const auto* p = std::get_if<std::shared_ptr<const Array>>(&data);
    return p ? p->get() : nullptr;
}

namespace {

// Quotes a string, escaping control bytes so that multi-line chat templates print on one line.
std::string quoted(const std::string& s, size_t max_chars) {
    std::string out = "\"";
    size_t shown = std::min(s.size(), max_chars);
    for (size_t i = 0; i < shown; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    out += "\"";
    if (shown < s.size()) out += fmt::format("...(+{} bytes)", s.size() - shown);
    return out;
}

}  // namespace

std::string Value::to_display(size_t max_items) const {
    // Strings are cut too unless the caller asked for everything (max_items == SIZE_MAX).
    const size_t max_chars = max_items == std::numeric_limits<size_t>::max() ? max_items : 120;
    switch (type) {
        case ValueType::boolean: {
            const bool* b = std::get_if<bool>(&data);
            return b ? (*b ? "true" : "false") : "?";
        }
        case ValueType::f32: {
            const double* d = std::get_if<double>(&data);
            return d ? fmt::format("{}", float(*d)) : "?";
        }
        case ValueType::f64: {
            const double* d = std::get_if<double>(&data);
            return d ? fmt::format("{}", *d) : "?";
        }
        case ValueType::string: {
            const std::string* s = as_string();
            return s ? quoted(*s, max_chars) : "?";
        }
        case ValueType::array: {
            const Array* a = as_array();
            if (!a) return "?";
            std::string out = "[";
            size_t shown = std::min(a->items.size(), max_items);
            for (size_t i = 0; i < shown; ++i) {
                if (i) out += ", ";
                out += a->items[i].to_display(max_items);
            }
            if (shown < a->items.size()) out += fmt::format("{}... +{} more", shown ? ", " : "", a->items.size() - shown);
            out += "]";
            return out;
        }
        default: {
            if (const auto* u = std::get_if<uint64_t>(&data)) return std::to_string(*u);
            if (const auto* i = std::get_if<int64_t>(&data)) return std::to_string(*i);
            return "?";
        }
    }
}

bool operator==(const Value& a, const Value& b) {
    if (a.type != b.type || a.data.index() != b.data.index()) return false;
    if (const auto* x = std::get_if<double>(&a.data))
        return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(std::get<double>(b.data));
    if (a.type == ValueType::array) {
        const Array* x = a.as_array();
        const Array* y = b.as_array();
        if (!x || !y) return x == y;
        return x->element_type == y->element_type && x->items == y->items;
    }
    return a.data == b.data;
}

}  // namespace pagoda::gguf
