// Jinja tests (`value is name(args)`), with Jinja 3.1's semantics.
#include <cmath>
#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_text.h"

namespace pagoda::chat::jinja {

namespace {

using TestFn = bool (*)(const Value&, CallArgs&);

const Value& test_arg(CallArgs& args, const char* name) {
    if (args.positional.size() != 1 || !args.named.empty()) fail("test '{}' takes exactly one argument", name);
    return args.positional[0];
}

void no_args(CallArgs& args, const char* name) {
    if (!args.positional.empty() || !args.named.empty()) fail("test '{}' takes no arguments", name);
}

bool t_defined(const Value& v, CallArgs& a) { no_args(a, "defined"); return !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs& a) { no_args(a, "undefined"); return v.is_undefined(); }
bool t_none(const Value& v, CallArgs& a) { no_args(a, "none"); return v.is_none(); }
bool t_string(const Value& v, CallArgs& a) { no_args(a, "string"); return v.is_string(); }
bool t_number(const Value& v, CallArgs& a) { no_args(a, "number"); return v.is_number(); }
bool t_integer(const Value& v, CallArgs& a) { no_args(a, "integer"); return v.is_int(); }
bool t_float(const Value& v, CallArgs& a) { no_args(a, "float"); return v.is_float(); }
bool t_boolean(const Value& v, CallArgs& a) { no_args(a, "boolean"); return v.is_bool(); }
bool t_true(const Value& v, CallArgs& a) { no_args(a, "true"); return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, CallArgs& a) { no_args(a, "false"); return v.is_bool() && !v.as_bool(); }
bool t_mapping(const Value& v, CallArgs& a) { no_args(a, "mapping"); return v.is_dict() && !v.as_dict()->is_namespace; }
bool t_iterable(const Value& v, CallArgs& a) {
    no_args(a, "iterable");
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict()->is_namespace);
}
bool t_sequence(const Value& v, CallArgs& a) {
    no_args(a, "sequence");
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict()->is_namespace);
}
bool t_callable(const Value& v, CallArgs& a) { no_args(a, "callable"); return v.is_callable(); }
bool t_eq(const Value& v, CallArgs& a) { return values_equal(v, test_arg(a, "equalto")); }
bool t_ne(const Value& v, CallArgs& a) { return !values_equal(v, test_arg(a, "ne")); }
bool t_lt(const Value& v, CallArgs& a) { return values_less(v, test_arg(a, "lt")); }
bool t_gt(const Value& v, CallArgs& a) { return values_less(test_arg(a, "gt"), v); }
bool t_le(const Value& v, CallArgs& a) { return !values_less(test_arg(a, "le"), v); }
bool t_ge(const Value& v, CallArgs& a) { return !values_less(v, test_arg(a, "ge")); }
// Jinja computes these with Python's %, so floats work too (1.25 is neither odd nor even).
double py_mod(const Value& v, const Value& d) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number() || !d.is_number()) fail("unsupported operand type(s) for %: '{}' and '{}'", v.type_name(), d.type_name());
    if (d.to_double() == 0.0) fail("integer division or modulo by zero");
    if (!v.is_float() && !d.is_float()) {
        const std::int64_t x = v.to_int(), y = d.to_int();
        if (y == -1) return 0.0;
        std::int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return static_cast<double>(r);
    }
    double r = std::fmod(v.to_double(), d.to_double());
    if (r != 0 && ((r < 0) != (d.to_double() < 0))) r += d.to_double();
    return r;
}
bool t_odd(const Value& v, CallArgs& a) { no_args(a, "odd"); return py_mod(v, Value(static_cast<std::int64_t>(2))) == 1.0; }
bool t_even(const Value& v, CallArgs& a) { no_args(a, "even"); return py_mod(v, Value(static_cast<std::int64_t>(2))) == 0.0; }
bool t_divisibleby(const Value& v, CallArgs& a) { return py_mod(v, test_arg(a, "divisibleby")) == 0.0; }
bool t_in(const Value& v, CallArgs& a) { return contains(test_arg(a, "in"), v); }
bool t_sameas(const Value& v, CallArgs& a) {
    const Value& other = test_arg(a, "sameas");
    if (v.kind() != other.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == other.as_bool();
    if (v.is_list()) return v.as_list() == other.as_list();
    if (v.is_dict()) return v.as_dict() == other.as_dict();
    return values_equal(v, other);
}
bool t_lower(const Value& v, CallArgs& a) {
    no_args(a, "lower");
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    return py_lower(s) == s && py_upper(s) != s;
}
bool t_upper(const Value& v, CallArgs& a) {
    no_args(a, "upper");
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    return py_upper(s) == s && py_lower(s) != s;
}
bool t_escaped(const Value&, CallArgs& a) { no_args(a, "escaped"); return false; }
bool t_filter(const Value& v, CallArgs& a) { no_args(a, "filter"); return v.is_string() && has_filter(v.as_string()); }
bool t_test(const Value& v, CallArgs& a) { no_args(a, "test"); return v.is_string() && has_test(v.as_string()); }

const std::unordered_map<std::string, TestFn>& tests() {
    static const std::unordered_map<std::string, TestFn> table = {
        {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"string", t_string},
        {"number", t_number},     {"integer", t_integer},     {"float", t_float},       {"boolean", t_boolean},
        {"true", t_true},         {"false", t_false},         {"mapping", t_mapping},   {"iterable", t_iterable},
        {"sequence", t_sequence}, {"callable", t_callable},   {"equalto", t_eq},        {"eq", t_eq},
        {"==", t_eq},             {"ne", t_ne},               {"!=", t_ne},             {"lt", t_lt},
        {"lessthan", t_lt},       {"<", t_lt},                {"gt", t_gt},             {"greaterthan", t_gt},
        {">", t_gt},              {"le", t_le},               {"<=", t_le},             {"ge", t_ge},
        {">=", t_ge},             {"odd", t_odd},             {"even", t_even},         {"divisibleby", t_divisibleby},
        {"in", t_in},             {"sameas", t_sameas},       {"lower", t_lower},       {"upper", t_upper},
        {"escaped", t_escaped},   {"filter", t_filter},       {"test", t_test},
    };
    return table;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) != 0; }

bool apply_test(const std::string& name, const Value& value, CallArgs& args) {
    const auto it = tests().find(name);
    if (it == tests().end()) fail("no test named '{}'", name);
    return it->second(value, args);
}

}  // namespace pagoda::chat::jinja
