// Jinja filters (`value | name(args)`).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_text.h"

namespace pagoda::chat::jinja {

namespace {

using FilterFn = Value (*)(const Value&, CallArgs&);

std::string text_of(const Value& v) { return v.str(); }

// Attribute paths as Jinja's make_attrgetter understands them: "a.b.0". With a fallback, an
// undefined step is replaced by it before the next step (Jinja applies `default` per step).
Value lookup_path(const Value& item, const Value& path, const Value* fallback = nullptr) {
    if (path.is_int()) {
        Value got = get_item(item, path);
        return got.is_undefined() && fallback ? *fallback : got;
    }
    const std::string spec = path.str();
    Value cur = item;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = spec.find('.', start);
        const std::string part = spec.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool digits = !part.empty();
        for (char c : part) digits = digits && c >= '0' && c <= '9';
        cur = digits ? get_item(cur, Value(static_cast<std::int64_t>(std::stoll(part)))) : get_item(cur, Value(part));
        if (cur.is_undefined() && fallback) cur = *fallback;
        if (dot == std::string::npos) return cur;
        start = dot + 1;
    }
}

// Jinja's ignore_case: string keys compare lower-cased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
    return v;
}

std::size_t length_of(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::undefined: return 0;
        case Value::Kind::string: return utf8_length(v.as_string());
        case Value::Kind::list: return v.as_list()->size();
        case Value::Kind::dict: return v.as_dict()->items.size();
        default: fail("object of type '{}' has no len()", v.type_name());
    }
}

Value f_trim(const Value& v, CallArgs& args) {
    ArgReader a("trim", args, {"chars"});
    std::optional<std::string> chars;
    if (a.has(0) && !a.get(0).is_none()) chars = a.get(0).str();
    return Value(py_strip(text_of(v), chars, true, true));
}

Value f_tojson(const Value& v, CallArgs& args) {
    // Hugging Face's binding: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
    ArgReader a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonDumpOptions opt;
    opt.ensure_ascii = a.get(0, Value(false)).truthy();
    const Value indent = a.get(1, Value::none());
    if (indent.is_string()) {
        opt.indent = 0;
        opt.indent_string = indent.as_string();
    } else if (indent.is_int() || indent.is_bool()) {
        opt.indent = static_cast<int>(std::max<std::int64_t>(0, std::min<std::int64_t>(indent.to_int(), 1024)));
    } else if (!indent.is_none() && !indent.is_undefined()) {
        fail("tojson indent must be an integer or a string, got {}", indent.type_name());
    }
    const Value separators = a.get(2, Value::none());
    if (separators.is_list()) {
        const auto& parts = *separators.as_list();
        if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
            fail("tojson separators must be a pair of strings");
        opt.custom_separators = true;
        opt.item_separator = parts[0].as_string();
        opt.key_separator = parts[1].as_string();
    }
    opt.sort_keys = a.get(3, Value(false)).truthy();
    if (v.is_undefined()) fail("Object of type Undefined is not JSON serializable");
    return Value(json_dumps(v, opt));
}

Value f_length(const Value& v, CallArgs& args) {
    ArgReader a("length", args, {});
    return Value(static_cast<std::int64_t>(length_of(v)));
}

Value f_upper(const Value& v, CallArgs& args) { ArgReader a("upper", args, {}); return Value(py_upper(text_of(v))); }
Value f_lower(const Value& v, CallArgs& args) { ArgReader a("lower", args, {}); return Value(py_lower(text_of(v))); }
Value f_capitalize(const Value& v, CallArgs& args) { ArgReader a("capitalize", args, {}); return Value(py_capitalize(text_of(v))); }
Value f_title(const Value& v, CallArgs& args) { ArgReader a("title", args, {}); return Value(jinja_title(text_of(v))); }

Value f_replace(const Value& v, CallArgs& args) {
    ArgReader a("replace", args, {"old", "new", "count"});
    const Value count = a.get(2, Value::none());
    return Value(py_replace(text_of(v), a.get(0).str(), a.get(1).str(), count.is_none() ? -1 : static_cast<long>(count.to_int())));
}

Value f_join(const Value& v, CallArgs& args) {
    ArgReader a("join", args, {"d", "attribute"});
    const std::string sep = a.get(0, Value("")).str();
    const Value attribute = a.get(1, Value::none());
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += (attribute.is_none() ? item : lookup_path(item, attribute)).str();
    }
    return Value(std::move(out));
}

Value f_default(const Value& v, CallArgs& args) {
    ArgReader a("default", args, {"default_value", "boolean"});
    const bool boolean = a.get(1, Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, Value(""));
    return v;
}

Value f_first(const Value& v, CallArgs& args) {
    ArgReader a("first", args, {});
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(const Value& v, CallArgs& args) {
    ArgReader a("last", args, {});
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_list(const Value& v, CallArgs& args) { ArgReader a("list", args, {}); return Value(iterate(v)); }
Value f_string(const Value& v, CallArgs& args) { ArgReader a("string", args, {}); return Value(text_of(v)); }
Value f_safe(const Value& v, CallArgs& args) { ArgReader a("safe", args, {}); return v; }

Value f_escape(const Value& v, CallArgs& args) {
    ArgReader a("escape", args, {});
    std::string out;
    for (char c : text_of(v)) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out.push_back(c);
        }
    }
    return Value(std::move(out));
}

std::optional<double> parse_python_float(const std::string& text) {
    const std::string s = py_strip(text, std::nullopt, true, true);
    if (s.empty()) return std::nullopt;
    std::string clean;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
            std::isdigit(static_cast<unsigned char>(s[i + 1])))
            continue;
        clean.push_back(s[i]);
    }
    char* end = nullptr;
    const double d = std::strtod(clean.c_str(), &end);
    if (end != clean.c_str() + clean.size()) return std::nullopt;
    const std::string lower = py_lower(clean);
    if (lower.find("0x") != std::string::npos) return std::nullopt;  // strtod accepts hex, Python does not
    return d;
}

Value f_int(const Value& v, CallArgs& args) {
    ArgReader a("int", args, {"default", "base"});
    const Value fallback = a.get(0, Value(static_cast<std::int64_t>(0)));
    const std::int64_t base = a.get(1, Value(static_cast<std::int64_t>(10))).to_int();
    if (v.is_undefined()) fail_undefined(v);  // int(Undefined) raises in Jinja
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(v.to_int());
    if (v.is_float()) {
        if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return fallback;
        return Value(static_cast<std::int64_t>(std::trunc(v.as_float())));
    }
    if (v.is_string()) {
        std::string s = py_strip(v.as_string(), std::nullopt, true, true);
        std::string clean;
        for (char c : s) if (c != '_') clean.push_back(c);
        if (!clean.empty() && base >= 2 && base <= 36) {
            errno = 0;
            char* end = nullptr;
            const long long n = std::strtoll(clean.c_str(), &end, static_cast<int>(base));
            if (errno == 0 && end == clean.c_str() + clean.size()) return Value(static_cast<std::int64_t>(n));
        }
        if (auto d = parse_python_float(v.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
            return Value(static_cast<std::int64_t>(std::trunc(*d)));
    }
    return fallback;
}

Value f_float(const Value& v, CallArgs& args) {
    ArgReader a("float", args, {"default"});
    const Value fallback = a.get(0, Value(0.0));
    if (v.is_undefined()) fail_undefined(v);  // float(Undefined) raises in Jinja
    if (v.is_number()) return Value(v.to_double());
    if (v.is_string()) {
        const std::string lower = py_lower(py_strip(v.as_string(), std::nullopt, true, true));
        if (lower == "nan" || lower == "+nan" || lower == "-nan") return Value(std::nan(""));
        if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") return Value(HUGE_VAL);
        if (lower == "-inf" || lower == "-infinity") return Value(-HUGE_VAL);
        if (auto d = parse_python_float(v.as_string())) return Value(*d);
    }
    return fallback;
}

Value f_items(const Value& v, CallArgs& args) {
    ArgReader a("items", args, {});
    if (v.is_undefined()) return Value(List{});
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, item] : v.as_dict()->items) out.push_back(Value::tuple(List{Value(k), item}));
    return Value(std::move(out));
}

// select / reject / selectattr / rejectattr share one implementation.
Value select_impl(const Value& v, CallArgs& args, bool by_attribute, bool keep_matching, const char* name) {
    std::size_t next = 0;
    Value attribute;
    if (by_attribute) {
        if (args.positional.empty()) fail("{}() needs an attribute name", name);
        attribute = args.positional[next++];
    }
    std::string test;
    if (next < args.positional.size()) test = args.positional[next++].str();
    CallArgs test_args;
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    test_args.named = args.named;
    if (!test.empty() && !has_test(test)) fail("no test named '{}'", test);
    List out;
    for (const auto& item : iterate(v)) {
        const Value subject = by_attribute ? lookup_path(item, attribute) : item;
        CallArgs call = test_args;
        const bool match = test.empty() ? subject.truthy() : apply_test(test, subject, call);
        if (match == keep_matching) out.push_back(item);
    }
    return Value(std::move(out));
}

Value f_select(const Value& v, CallArgs& args) { return select_impl(v, args, false, true, "select"); }
Value f_reject(const Value& v, CallArgs& args) { return select_impl(v, args, false, false, "reject"); }
Value f_selectattr(const Value& v, CallArgs& args) { return select_impl(v, args, true, true, "selectattr"); }
Value f_rejectattr(const Value& v, CallArgs& args) { return select_impl(v, args, true, false, "rejectattr"); }

Value f_map(const Value& v, CallArgs& args) {
    List out;
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [k, val] : args.named) {
        if (k == "attribute") attribute = &val;
        else if (k == "default") fallback = &val;
    }
    if (attribute) {
        if (!args.positional.empty()) fail("map() with attribute= takes no positional arguments");
        for (const auto& [k, val] : args.named)
            if (k != "attribute" && k != "default") fail("map() got an unexpected keyword argument '{}'", k);
        for (const auto& item : iterate(v)) {
            out.push_back(lookup_path(item, *attribute, fallback));
        }
        return Value(std::move(out));
    }
    if (args.positional.empty()) fail("map() needs a filter name or attribute=");
    const std::string filter = args.positional[0].str();
    if (!has_filter(filter)) fail("no filter named '{}'", filter);
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.named = args.named;
    for (const auto& item : iterate(v)) {
        CallArgs call = rest;
        out.push_back(apply_filter(filter, item, call));
    }
    return Value(std::move(out));
}

Value f_indent(const Value& v, CallArgs& args) {
    ArgReader a("indent", args, {"width", "first", "blank"});
    const Value width = a.get(0, Value(static_cast<std::int64_t>(4)));
    const std::string unit = width.is_string() ? width.as_string()
                                               : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(width.to_int(), 0, 4096)), ' ');
    const bool first = a.get(1, Value(false)).truthy();
    const bool blank = a.get(2, Value(false)).truthy();
    const std::vector<std::string> lines = py_splitlines(text_of(v) + "\n");
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += "\n";
            if (blank || !lines[i].empty()) out += unit;
        }
        out += lines[i];
    }
    if (first) out = unit + out;
    return Value(std::move(out));
}

double round_half_even(double x, std::int64_t digits) {
    if (!std::isfinite(x)) return x;
    if (digits >= 0) {
        // printf rounds the exact binary value half-to-even, as Python's round() does.
        char buf[512];
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<std::int64_t>(digits, 300)), x);
        return std::strtod(buf, nullptr);
    }
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
}

Value f_round(const Value& v, CallArgs& args) {
    ArgReader a("round", args, {"precision", "method"});
    const std::int64_t precision = a.get(0, Value(static_cast<std::int64_t>(0))).to_int();
    const std::string method = a.get(1, Value("common")).str();
    if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number()) fail("type {} doesn't define __round__ method", v.type_name());
    if (method == "common") {
        if (v.is_float()) return Value(round_half_even(v.as_float(), precision));
        if (precision >= 0) return Value(v.to_int());  // round(int, n>=0) is the int itself
        return Value(static_cast<std::int64_t>(round_half_even(v.to_double(), precision)));
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.to_double() * scale;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_unique(const Value& v, CallArgs& args) {
    ArgReader a("unique", args, {"case_sensitive", "attribute"});
    const bool case_sensitive = a.get(0, Value(false)).truthy();
    const Value attribute = a.get(1, Value::none());
    List out, seen;
    for (const auto& item : iterate(v)) {
        Value key = sort_key(attribute.is_none() ? item : lookup_path(item, attribute), case_sensitive);
        if ((key.is_list() && !key.is_tuple()) || key.is_dict()) fail("unhashable type: '{}'", key.type_name());
        bool dup = false;
        for (const auto& s : seen) dup = dup || values_equal(s, key);
        if (dup) continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return Value(std::move(out));
}

Value f_abs(const Value& v, CallArgs& args) {
    ArgReader a("abs", args, {});
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number()) fail("bad operand type for abs(): '{}'", v.type_name());
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    const std::int64_t i = v.to_int();
    if (i == INT64_MIN) fail("integer overflow");
    return Value(i < 0 ? -i : i);
}

Value f_sort(const Value& v, CallArgs& args) {
    ArgReader a("sort", args, {"reverse", "case_sensitive", "attribute"});
    const bool reverse = a.get(0, Value(false)).truthy();
    const bool case_sensitive = a.get(1, Value(false)).truthy();
    const Value attribute = a.get(2, Value::none());
    List items = iterate(v);
    std::vector<std::pair<Value, Value>> keyed;
    for (auto& item : items) keyed.emplace_back(sort_key(attribute.is_none() ? item : lookup_path(item, attribute), case_sensitive), item);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? values_less(y.first, x.first) : values_less(x.first, y.first);
    });
    List out;
    for (auto& [k, item] : keyed) out.push_back(item);
    return Value(std::move(out));
}

Value f_dictsort(const Value& v, CallArgs& args) {
    ArgReader a("dictsort", args, {"case_sensitive", "by", "reverse"});
    const bool case_sensitive = a.get(0, Value(false)).truthy();
    const std::string by = a.get(1, Value("key")).str();
    const bool reverse = a.get(2, Value(false)).truthy();
    if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
    if (!v.is_dict()) fail("dictsort expects a mapping, got {}", v.type_name());
    std::vector<std::pair<std::string, Value>> items = v.as_dict()->items;
    const bool by_key = by == "key";
    std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
        const Value kx = sort_key(by_key ? Value(x.first) : x.second, case_sensitive);
        const Value ky = sort_key(by_key ? Value(y.first) : y.second, case_sensitive);
        return reverse ? values_less(ky, kx) : values_less(kx, ky);
    });
    List out;
    for (auto& [k, item] : items) out.push_back(Value::tuple(List{Value(k), item}));
    return Value(std::move(out));
}

Value f_reverse(const Value& v, CallArgs& args) {
    ArgReader a("reverse", args, {});
    if (v.is_string()) {
        std::u32string t = utf8_decode(v.as_string());
        std::reverse(t.begin(), t.end());
        return Value(utf8_encode(t));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
}

Value min_max(const Value& v, CallArgs& args, bool want_max, const char* name) {
    ArgReader a(name, args, {"case_sensitive", "attribute"});
    const bool case_sensitive = a.get(0, Value(false)).truthy();
    const Value attribute = a.get(1, Value::none());
    List items = iterate(v);
    if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
    std::size_t best = 0;
    auto key = [&](std::size_t i) { return sort_key(attribute.is_none() ? items[i] : lookup_path(items[i], attribute), case_sensitive); };
    for (std::size_t i = 1; i < items.size(); ++i) {
        const bool better = want_max ? values_less(key(best), key(i)) : values_less(key(i), key(best));
        if (better) best = i;
    }
    return items[best];
}

Value f_min(const Value& v, CallArgs& args) { return min_max(v, args, false, "min"); }
Value f_max(const Value& v, CallArgs& args) { return min_max(v, args, true, "max"); }

Value f_sum(const Value& v, CallArgs& args) {
    ArgReader a("sum", args, {"attribute", "start"});
    const Value attribute = a.get(0, Value::none());
    Value total = a.get(1, Value(static_cast<std::int64_t>(0)));
    for (const auto& item : iterate(v)) {
        const Value x = attribute.is_none() ? item : lookup_path(item, attribute);
        if (!x.is_number() || !total.is_number()) fail("unsupported operand type(s) for +: '{}' and '{}'", total.type_name(), x.type_name());
        if (total.is_float() || x.is_float()) total = Value(total.to_double() + x.to_double());
        else {
            std::int64_t r;
            if (__builtin_add_overflow(total.to_int(), x.to_int(), &r)) fail("integer overflow");
            total = Value(r);
        }
    }
    return total;
}

Value f_attr(const Value& v, CallArgs& args) {
    ArgReader a("attr", args, {"name"});
    return get_attribute(v, a.get(0).str());
}

Value f_wordcount(const Value& v, CallArgs& args) {
    ArgReader a("wordcount", args, {});
    return Value(static_cast<std::int64_t>(py_split(text_of(v), std::nullopt, -1).size()));
}

const std::unordered_map<std::string, FilterFn>& filters() {
    static const std::unordered_map<std::string, FilterFn> table = {
        {"trim", f_trim},       {"tojson", f_tojson},         {"length", f_length},       {"count", f_length},
        {"upper", f_upper},     {"lower", f_lower},           {"capitalize", f_capitalize}, {"title", f_title},
        {"replace", f_replace}, {"join", f_join},             {"default", f_default},     {"d", f_default},
        {"first", f_first},     {"last", f_last},             {"list", f_list},           {"string", f_string},
        {"int", f_int},         {"float", f_float},           {"items", f_items},         {"select", f_select},
        {"reject", f_reject},   {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map},
        {"safe", f_safe},       {"escape", f_escape},         {"e", f_escape},            {"forceescape", f_escape},
        {"indent", f_indent},   {"round", f_round},           {"unique", f_unique},       {"abs", f_abs},
        {"sort", f_sort},       {"dictsort", f_dictsort},     {"reverse", f_reverse},     {"min", f_min},
        {"max", f_max},         {"sum", f_sum},               {"attr", f_attr},           {"wordcount", f_wordcount},
    };
    return table;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& value, CallArgs& args) {
    const auto it = filters().find(name);
    if (it == filters().end()) fail("no filter named '{}'", name);
    return it->second(value, args);
}

}  // namespace pagoda::chat::jinja
