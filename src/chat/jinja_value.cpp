#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja_text.h"
#include "core/error.h"

namespace pagoda::chat::jinja {

const Value* Dict::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

void Dict::set(const std::string& key, Value value) {
    for (auto& [k, v] : items) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    items.emplace_back(key, std::move(value));
}

namespace {
std::uint32_t checked_depth(std::uint32_t deepest_child) {
    if (deepest_child + 1 > Value::kMaxNesting) fail("value nested more than {} levels deep", Value::kMaxNesting);
    return deepest_child + 1;
}
}  // namespace

std::uint32_t Value::nesting_of(const List& items) {
    std::uint32_t deepest = 0;
    for (const auto& item : items) deepest = std::max(deepest, item.depth_);
    return checked_depth(deepest);
}

std::uint32_t Value::nesting_of(const Dict& dict) {
    std::uint32_t deepest = 0;
    for (const auto& [k, v] : dict.items) deepest = std::max(deepest, v.depth_);
    return checked_depth(deepest);
}

double Value::to_double() const {
    switch (kind()) {
        case Kind::boolean: return as_bool() ? 1.0 : 0.0;
        case Kind::integer: return static_cast<double>(as_int());
        case Kind::floating: return as_float();
        default: fail("expected a number, got {}", type_name());
    }
}

std::int64_t Value::to_int() const {
    if (is_bool()) return as_bool() ? 1 : 0;
    if (is_int()) return as_int();
    fail("expected an integer, got {}", type_name());
}

bool Value::truthy() const {
    switch (kind()) {
        case Kind::undefined:
        case Kind::none: return false;
        case Kind::boolean: return as_bool();
        case Kind::integer: return as_int() != 0;
        case Kind::floating: return as_float() != 0.0;
        case Kind::string: return !as_string().empty();
        case Kind::list: return !as_list()->empty();
        case Kind::dict: return as_dict()->is_namespace || !as_dict()->items.empty();
        case Kind::callable: return true;
    }
    return false;
}

std::string Value::type_name() const {
    switch (kind()) {
        case Kind::undefined: return "Undefined";
        case Kind::none: return "NoneType";
        case Kind::boolean: return "bool";
        case Kind::integer: return "int";
        case Kind::floating: return "float";
        case Kind::string: return "str";
        case Kind::list: return tuple_ ? "tuple" : "list";
        case Kind::dict: return as_dict()->is_namespace ? "Namespace" : "dict";
        case Kind::callable: return "function";
    }
    return "?";
}

std::string Value::str() const {
    switch (kind()) {
        case Kind::undefined: return "";
        case Kind::string: return as_string();
        default: return repr();
    }
}

std::string Value::repr_at(std::uint32_t level) const {
    if (level > kMaxNesting) fail("value nested more than {} levels deep (a namespace that contains itself?)", kMaxNesting);
    switch (kind()) {
        case Kind::undefined: return "";
        case Kind::none: return "None";
        case Kind::boolean: return as_bool() ? "True" : "False";
        case Kind::integer: return std::to_string(as_int());
        case Kind::floating: return py_repr_float(as_float());
        case Kind::string: return py_repr_string(as_string());
        case Kind::list: {
            std::string out = tuple_ ? "(" : "[";
            bool first = true;
            for (const auto& item : *as_list()) {
                if (!first) out += ", ";
                first = false;
                out += item.repr_at(level + 1);
            }
            if (tuple_ && as_list()->size() == 1) out += ",";
            return out + (tuple_ ? ")" : "]");
        }
        case Kind::dict: {
            const auto& dict = *as_dict();
            std::string out = dict.is_namespace ? "<Namespace {" : "{";
            bool first = true;
            for (const auto& [k, v] : dict.items) {
                if (!first) out += ", ";
                first = false;
                out += py_repr_string(k) + ": " + v.repr_at(level + 1);
            }
            return out + (dict.is_namespace ? "}>" : "}");
        }
        case Kind::callable: return "<function " + as_callable()->name + ">";
    }
    return "";
}

namespace {
Value from_json_at(const nlohmann::ordered_json& json, std::uint32_t depth);
}

Value Value::from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

namespace {
Value from_json_at(const nlohmann::ordered_json& json, std::uint32_t depth) {
    if (depth >= Value::kMaxNesting) fail("JSON value nested more than {} levels deep", Value::kMaxNesting);
    switch (json.type()) {
        case nlohmann::ordered_json::value_t::null: return Value::none();
        case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<std::int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = json.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
            return Value(static_cast<std::int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            List list;
            list.reserve(json.size());
            for (const auto& item : json) list.push_back(from_json_at(item, depth + 1));
            return Value(std::move(list));
        }
        case nlohmann::ordered_json::value_t::object: {
            auto dict = std::make_shared<Dict>();
            dict->items.reserve(json.size());
            for (auto it = json.begin(); it != json.end(); ++it) dict->items.emplace_back(it.key(), from_json_at(it.value(), depth + 1));
            return Value(std::move(dict));
        }
        default: return Value::none();
    }
}
}  // namespace

nlohmann::ordered_json Value::to_json() const {
    switch (kind()) {
        case Kind::none: return nullptr;
        case Kind::boolean: return as_bool();
        case Kind::integer: return as_int();
        case Kind::floating: return as_float();
        case Kind::string: return as_string();
        case Kind::list: {
            auto out = nlohmann::ordered_json::array();
            for (const auto& item : *as_list()) out.push_back(item.to_json());
            return out;
        }
        case Kind::dict: {
            if (as_dict()->is_namespace) break;
            auto out = nlohmann::ordered_json::object();
            for (const auto& [k, v] : as_dict()->items) out[k] = v.to_json();
            return out;
        }
        default: break;
    }
    fail("Object of type {} is not JSON serializable", type_name());
}

bool values_equal(const Value& a, const Value& b) {
    using K = Value::Kind;
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
        return a.to_int() == b.to_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case K::undefined:
        case K::none: return true;
        case K::string: return a.as_string() == b.as_string();
        case K::list: {
            if (a.is_tuple() != b.is_tuple()) return false;
            const auto& x = *a.as_list();
            const auto& y = *b.as_list();
            if (x.size() != y.size()) return false;
            for (std::size_t i = 0; i < x.size(); ++i)
                if (!values_equal(x[i], y[i])) return false;
            return true;
        }
        case K::dict: {
            const auto& x = *a.as_dict();
            const auto& y = *b.as_dict();
            if (x.is_namespace || y.is_namespace) return a.as_dict() == b.as_dict();
            if (x.items.size() != y.items.size()) return false;
            for (const auto& [k, v] : x.items) {
                const Value* other = y.find(k);
                if (!other || !values_equal(v, *other)) return false;
            }
            return true;
        }
        case K::callable: return a.as_callable() == b.as_callable();
        default: return false;
    }
}

bool values_less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
        return a.to_int() < b.to_int();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order
    if (a.is_list() && b.is_list()) {
        const auto& x = *a.as_list();
        const auto& y = *b.as_list();
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!values_equal(x[i], y[i])) return values_less(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    fail("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out.push_back('"');
    for (char32_t cp : utf8_decode(s)) {
        switch (cp) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default: {
                char buf[16];
                if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
                    if (cp >= 0x10000) {
                        const char32_t v = cp - 0x10000;
                        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
                    } else {
                        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
                    }
                    out += buf;
                } else {
                    utf8_append(out, cp);
                }
            }
        }
    }
    out.push_back('"');
}

struct Dumper {
    const JsonDumpOptions& opt;
    std::string indent_unit;
    bool indented;
    std::string item_sep;

    void newline(std::string& out, int level) const {
        out.push_back('\n');
        for (int i = 0; i < level; ++i) out += indent_unit;
    }

    void dump(std::string& out, const Value& v, int level) const {
        switch (v.kind()) {
            case Value::Kind::none: out += "null"; return;
            case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
            case Value::Kind::integer: out += std::to_string(v.as_int()); return;
            case Value::Kind::floating: {
                const double d = v.as_float();
                if (std::isnan(d)) out += "NaN";
                else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
                else out += py_repr_float(d);
                return;
            }
            case Value::Kind::string: dump_string(out, v.as_string(), opt.ensure_ascii); return;
            case Value::Kind::list: {
                const auto& list = *v.as_list();
                if (list.empty()) { out += "[]"; return; }
                out.push_back('[');
                for (std::size_t i = 0; i < list.size(); ++i) {
                    if (i) out += item_sep;
                    if (indented) newline(out, level + 1);
                    dump(out, list[i], level + 1);
                }
                if (indented) newline(out, level);
                out.push_back(']');
                return;
            }
            case Value::Kind::dict: {
                const auto& dict = *v.as_dict();
                if (dict.is_namespace) break;
                if (dict.items.empty()) { out += "{}"; return; }
                std::vector<const std::pair<std::string, Value>*> entries;
                for (const auto& item : dict.items) entries.push_back(&item);
                if (opt.sort_keys)
                    std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
                out.push_back('{');
                for (std::size_t i = 0; i < entries.size(); ++i) {
                    if (i) out += item_sep;
                    if (indented) newline(out, level + 1);
                    dump_string(out, entries[i]->first, opt.ensure_ascii);
                    out += opt.key_separator;
                    dump(out, entries[i]->second, level + 1);
                }
                if (indented) newline(out, level);
                out.push_back('}');
                return;
            }
            default: break;
        }
        fail("Object of type {} is not JSON serializable", v.type_name());
    }
};

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
    Dumper d{options, {}, false, {}};
    if (!options.indent_string.empty()) {
        d.indent_unit = options.indent_string;
        d.indented = true;
    } else if (options.indent >= 0) {
        d.indent_unit = std::string(static_cast<std::size_t>(options.indent), ' ');
        d.indented = true;
    }
    if (options.custom_separators) d.item_sep = options.item_separator;
    else d.item_sep = d.indented ? "," : ", ";
    std::string out;
    d.dump(out, value, 0);
    return out;
}

}  // namespace pagoda::chat::jinja
