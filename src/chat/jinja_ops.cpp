// Python semantics of Jinja's operators and of attribute / item / slice access on Values.
#include "chat/jinja_ops.h"

#include <cmath>
#include <limits>

#include "chat/jinja_builtins.h"
#include "chat/jinja_text.h"

namespace pagoda::chat::jinja {

void fail_undefined(const Value& undefined) {
    const std::string& hint = undefined.undefined_hint();
    fail("{}", hint.empty() ? std::string("value is undefined") : hint);
}

namespace {

std::string object_name(const Value& v) {
    if (v.is_none()) return "None";
    return "'" + v.type_name() + " object'";
}

bool all_digits(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s) if (c < '0' || c > '9') return false;
    return true;
}

std::int64_t add_checked(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) fail("integer overflow");
    return r;
}
std::int64_t sub_checked(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r)) fail("integer overflow");
    return r;
}
std::int64_t mul_checked(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) fail("integer overflow");
    return r;
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
    fail("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

void reject_undefined(const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
}

constexpr std::size_t kMaxBuiltString = 64u << 20;

Value repeat(const Value& seq, std::int64_t times) {
    if (times <= 0) return seq.is_string() ? Value(std::string()) : Value(List{});
    if (seq.is_string()) {
        const auto& s = seq.as_string();
        if (!s.empty() && static_cast<std::size_t>(times) > kMaxBuiltString / s.size()) fail("string repetition too large");
        std::string out;
        out.reserve(s.size() * static_cast<std::size_t>(times));
        for (std::int64_t i = 0; i < times; ++i) out += s;
        return Value(std::move(out));
    }
    const auto& l = *seq.as_list();
    if (!l.empty() && static_cast<std::size_t>(times) > (kMaxBuiltString / 16) / l.size()) fail("list repetition too large");
    List out;
    for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), l.begin(), l.end());
    return seq.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
}

// Python's float floor division (float_floor_div): derived from fmod so that 100 // 0.1 == 999.0.
double py_floor_div(double vx, double wx) {
    double mod = std::fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0)) div -= 1.0;
    }
    if (div == 0.0) return std::copysign(0.0, vx / wx);
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return floordiv;
}

double py_fmod(double a, double b) {
    double r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    reject_undefined(a, b);
    const bool numbers = a.is_number() && b.is_number();
    const bool floats = numbers && (a.is_float() || b.is_float());
    if (op == "+") {
        if (numbers) {
            if (floats) return Value(a.to_double() + b.to_double());
            return Value(add_checked(a.to_int(), b.to_int()));
        }
        if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
        if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
            List out = *a.as_list();
            out.insert(out.end(), b.as_list()->begin(), b.as_list()->end());
            return a.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
        }
        if (a.is_string()) fail("can only concatenate str (not \"{}\") to str", b.type_name());
        if (a.is_list()) fail("can only concatenate {} (not \"{}\") to {}", a.type_name(), b.type_name(), a.type_name());
        unsupported("+", a, b);
    }
    if (op == "-") {
        if (!numbers) unsupported("-", a, b);
        if (floats) return Value(a.to_double() - b.to_double());
        return Value(sub_checked(a.to_int(), b.to_int()));
    }
    if (op == "*") {
        if (numbers) {
            if (floats) return Value(a.to_double() * b.to_double());
            return Value(mul_checked(a.to_int(), b.to_int()));
        }
        if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.to_int());
        if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.to_int());
        unsupported("*", a, b);
    }
    if (op == "%" && a.is_string())
        fail("printf-style string formatting ('...' % values) is not supported in chat templates; use ~ or format filters");
    if (!numbers) unsupported(op.c_str(), a, b);
    if (op == "/") {
        if (b.to_double() == 0.0) fail("division by zero");
        return Value(a.to_double() / b.to_double());
    }
    if (op == "//") {
        if (floats) {
            if (b.to_double() == 0.0) fail("float floor division by zero");
            return Value(py_floor_div(a.to_double(), b.to_double()));
        }
        const std::int64_t x = a.to_int(), y = b.to_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (x == std::numeric_limits<std::int64_t>::min() && y == -1) fail("integer overflow");
        std::int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value(q);
    }
    if (op == "%") {
        if (floats) {
            if (b.to_double() == 0.0) fail("float modulo");
            return Value(py_fmod(a.to_double(), b.to_double()));
        }
        const std::int64_t x = a.to_int(), y = b.to_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (y == -1) return Value(static_cast<std::int64_t>(0));
        std::int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value(r);
    }
    if (op == "**") {
        if (!floats && b.to_int() >= 0) {
            std::int64_t result = 1, base = a.to_int(), e = b.to_int();
            while (e > 0) {
                if (e & 1) result = mul_checked(result, base);
                e >>= 1;
                if (e) base = mul_checked(base, base);
            }
            return Value(result);
        }
        if (a.to_double() == 0.0 && b.to_double() < 0) fail("0.0 cannot be raised to a negative power");
        const double r = std::pow(a.to_double(), b.to_double());
        if (std::isinf(r) && std::isfinite(a.to_double()) && std::isfinite(b.to_double()))
            fail("(34, 'Numerical result out of range')");
        if (std::isnan(r) && !std::isnan(a.to_double()) && !std::isnan(b.to_double()))
            fail("a negative number raised to a fractional power is complex; complex numbers are not supported");
        return Value(r);
    }
    fail("unknown operator '{}'", op);
}

// Python slice index normalisation (PySlice_AdjustIndices).
List slice_indices(std::int64_t length, const Value& start_v, const Value& stop_v, const Value& step_v) {
    auto as_index = [](const Value& v, const char* what) -> std::optional<std::int64_t> {
        if (v.is_none() || v.is_undefined()) return std::nullopt;
        if (!v.is_int() && !v.is_bool()) fail("slice {} must be an integer or None, got {}", what, v.type_name());
        return v.to_int();
    };
    const std::int64_t step = as_index(step_v, "step").value_or(1);
    if (step == 0) fail("slice step cannot be zero");
    auto adjust = [&](std::optional<std::int64_t> idx, std::int64_t dflt) {
        if (!idx) return dflt;
        std::int64_t i = *idx;
        if (i < 0) {
            i += length;
            if (i < 0) i = step < 0 ? -1 : 0;
        } else if (i >= length) {
            i = step < 0 ? length - 1 : length;
        }
        return i;
    };
    const std::int64_t start = adjust(as_index(start_v, "start"), step < 0 ? length - 1 : 0);
    const std::int64_t stop = adjust(as_index(stop_v, "stop"), step < 0 ? -1 : length);
    List idx;
    if (step > 0)
        for (std::int64_t i = start; i < stop; i += step) idx.emplace_back(i);
    else
        for (std::int64_t i = start; i > stop; i += step) idx.emplace_back(i);
    return idx;
}


}  // namespace

// ---- shared helpers ----------------------------------------------------------------------------

Value get_attribute(const Value& object, const std::string& name) {
    if (object.is_undefined()) fail_undefined(object);
    if (all_digits(name)) return get_item(object, Value(static_cast<std::int64_t>(std::stoll(name))));
    if (object.is_dict()) {
        const auto& dict = *object.as_dict();
        if (!dict.is_namespace) {
            Value method = method_of(object, name);  // Python attributes win over keys for `.name`
            if (!method.is_undefined()) return method;
        }
        if (const Value* v = dict.find(name)) return *v;
        return Value::undefined(object_name(object) + " has no attribute '" + name + "'");
    }
    Value method = method_of(object, name);
    if (!method.is_undefined()) return method;
    return Value::undefined(object_name(object) + " has no attribute '" + name + "'");
}

Value get_item(const Value& object, const Value& key) {
    if (object.is_undefined()) fail_undefined(object);
    if (object.is_dict() && key.is_string()) {
        if (const Value* v = object.as_dict()->find(key.as_string())) return *v;
        if (!object.as_dict()->is_namespace) {
            Value method = method_of(object, key.as_string());
            if (!method.is_undefined()) return method;
        }
        return Value::undefined(object_name(object) + " has no attribute '" + key.as_string() + "'");
    }
    if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
        std::int64_t i = key.to_int();
        if (object.is_list()) {
            const auto& list = *object.as_list();
            const auto n = static_cast<std::int64_t>(list.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return list[static_cast<std::size_t>(i)];
        } else {
            const std::u32string text = utf8_decode(object.as_string());
            const auto n = static_cast<std::int64_t>(text.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return Value(utf8_encode(std::u32string_view(text).substr(static_cast<std::size_t>(i), 1)));
        }
        return Value::undefined(object_name(object) + " has no element " + std::to_string(key.to_int()));
    }
    if (key.is_string()) return get_attribute(object, key.as_string());
    return Value::undefined(object_name(object) + " has no element " + key.repr());
}

List iterate(const Value& value) {
    switch (value.kind()) {
        case Value::Kind::undefined: return {};
        case Value::Kind::list: return *value.as_list();
        case Value::Kind::dict: {
            List keys;
            if (value.as_dict()->is_namespace) fail("'Namespace' object is not iterable");
            for (const auto& [k, v] : value.as_dict()->items) keys.emplace_back(k);
            return keys;
        }
        case Value::Kind::string: {
            List chars;
            for (char32_t cp : utf8_decode(value.as_string())) chars.emplace_back(utf8_encode(std::u32string(1, cp)));
            return chars;
        }
        default: fail("'{}' object is not iterable", value.type_name());
    }
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Value::Kind::undefined: return false;
        case Value::Kind::string:
            if (item.is_undefined()) fail_undefined(item);
            if (!item.is_string()) fail("'in <string>' requires string as left operand, not {}", item.type_name());
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Kind::list:
            for (const auto& v : *container.as_list())
                if (values_equal(v, item)) return true;
            return false;
        case Value::Kind::dict:
            if ((item.is_list() && !item.is_tuple()) || item.is_dict()) fail("unhashable type: '{}'", item.type_name());
            if (!item.is_string()) return false;
            return container.as_dict()->find(item.as_string()) != nullptr;
        default: fail("argument of type '{}' is not iterable", container.type_name());
    }
}

Value call_value(const Value& callee, CallArgs& args) {
    if (callee.is_undefined()) fail_undefined(callee);
    if (!callee.is_callable()) fail("'{}' object is not callable", callee.type_name());
    return callee.as_callable()->fn(args);
}

Value slice_value(const Value& obj, const Value& a, const Value& b, const Value& c) {
    if (obj.is_undefined()) fail_undefined(obj);
    if (obj.is_list()) {
        const auto& list = *obj.as_list();
        List out;
        for (const auto& i : slice_indices(static_cast<std::int64_t>(list.size()), a, b, c))
            out.push_back(list[static_cast<std::size_t>(i.as_int())]);
        return obj.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
    }
    if (obj.is_string()) {
        const std::u32string text = utf8_decode(obj.as_string());
        std::u32string out;
        for (const auto& i : slice_indices(static_cast<std::int64_t>(text.size()), a, b, c))
            out.push_back(text[static_cast<std::size_t>(i.as_int())]);
        return Value(utf8_encode(out));
    }
    // Jinja compiles slices to a plain Python subscript, so slicing anything else is an error.
    if (obj.is_dict()) fail("unhashable type: 'slice'");
    fail("'{}' object is not subscriptable", obj.type_name());
}

Value unary_operation(const std::string& op, const Value& v) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number()) fail("bad operand type for unary {}: '{}'", op, v.type_name());
    if (op == "+") return v.is_bool() ? Value(v.to_int()) : v;
    if (v.is_float()) return Value(-v.as_float());
    return Value(sub_checked(0, v.to_int()));
}

Value binary_operation(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") return Value(a.str() + b.str());
    if (op == "==") return Value(values_equal(a, b));
    if (op == "!=") return Value(!values_equal(a, b));
    if (op == "in") return Value(contains(b, a));
    if (op == "not in") return Value(!contains(b, a));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
        reject_undefined(a, b);
        if (op == "<") return Value(values_less(a, b));
        if (op == ">") return Value(values_less(b, a));
        if (op == "<=") return Value(!values_less(b, a));
        return Value(!values_less(a, b));
    }
    return arithmetic(op, a, b);
}

}  // namespace pagoda::chat::jinja
