// Python methods of str / dict / list values, the global functions, and argument binding.
#include <chrono>
#include <cmath>
#include <ctime>

#include "chat/jinja_builtins.h"
#include "chat/jinja_text.h"

namespace pagoda::chat::jinja {

ArgReader::ArgReader(std::string function, CallArgs& args, std::vector<std::string> names)
    : function_(std::move(function)), bound_(names.size()), present_(names.size(), false) {
    if (args.positional.size() > names.size())
        fail("{}() takes at most {} argument(s) ({} given)", function_, names.size(), args.positional.size());
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
        bound_[i] = args.positional[i];
        present_[i] = true;
    }
    for (auto& [name, value] : args.named) {
        std::size_t i = 0;
        while (i < names.size() && names[i] != name) ++i;
        if (i == names.size()) fail("{}() got an unexpected keyword argument '{}'", function_, name);
        if (present_[i]) fail("{}() got multiple values for argument '{}'", function_, name);
        bound_[i] = value;
        present_[i] = true;
    }
}

Value ArgReader::get(std::size_t i, Value fallback) const { return present_[i] ? bound_[i] : fallback; }
bool ArgReader::has(std::size_t i) const { return present_[i]; }

namespace {

std::string need_string(const Value& v, const char* function, const char* what) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_string()) fail("{}() {} must be str, not {}", function, what, v.type_name());
    return v.as_string();
}

std::optional<std::string> optional_string(const Value& v, const char* function) {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return need_string(v, function, "argument");
}

long optional_long(const Value& v, long fallback) {
    if (v.is_undefined() || v.is_none()) return fallback;
    return static_cast<long>(v.to_int());
}

List to_values(const std::vector<std::string>& parts) {
    List out;
    out.reserve(parts.size());
    for (const auto& p : parts) out.emplace_back(p);
    return out;
}

// startswith / endswith accept a string or a tuple (list) of strings.
bool affix_match(const std::string& s, const Value& affix, bool prefix, const char* function) {
    auto one = [&](const std::string& a) {
        if (a.size() > s.size()) return false;
        return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
    };
    if (affix.is_list()) {
        for (const auto& item : *affix.as_list())
            if (one(need_string(item, function, "tuple item"))) return true;
        return false;
    }
    return one(need_string(affix, function, "argument"));
}

Value bind(const Value& object, const std::string& name, std::function<Value(const Value&, CallArgs&)> fn) {
    return Value::callable(name, [object, fn = std::move(fn)](CallArgs& args) { return fn(object, args); });
}

Value string_method(const Value& self, const std::string& name) {
    using F = std::function<Value(const Value&, CallArgs&)>;
    F fn;
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const bool left = name != "rstrip", right = name != "lstrip";
        fn = [name, left, right](const Value& s, CallArgs& args) {
            ArgReader a(name, args, {"chars"});
            return Value(py_strip(s.as_string(), optional_string(a.get(0), name.c_str()), left, right));
        };
    } else if (name == "split" || name == "rsplit") {
        fn = [name](const Value& s, CallArgs& args) {
            ArgReader a(name, args, {"sep", "maxsplit"});
            auto sep = optional_string(a.get(0), name.c_str());
            if (sep && sep->empty()) fail("empty separator");
            const long maxsplit = optional_long(a.get(1), -1);
            return Value(to_values(name == "split" ? py_split(s.as_string(), sep, maxsplit)
                                                   : py_rsplit(s.as_string(), sep, maxsplit)));
        };
    } else if (name == "splitlines") {
        fn = [](const Value& s, CallArgs& args) {
            ArgReader a("splitlines", args, {});
            return Value(to_values(py_splitlines(s.as_string())));
        };
    } else if (name == "startswith" || name == "endswith") {
        const bool prefix = name == "startswith";
        fn = [name, prefix](const Value& s, CallArgs& args) {
            ArgReader a(name, args, {"prefix"});
            if (!a.has(0)) fail("{}() takes at least 1 argument (0 given)", name);
            return Value(affix_match(s.as_string(), a.get(0), prefix, name.c_str()));
        };
    } else if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        fn = [name](const Value& s, CallArgs& args) {
            ArgReader a(name, args, {});
            const std::string& t = s.as_string();
            if (name == "upper") return Value(py_upper(t));
            if (name == "lower") return Value(py_lower(t));
            if (name == "title") return Value(py_str_title(t));
            return Value(py_capitalize(t));
        };
    } else if (name == "replace") {
        fn = [](const Value& s, CallArgs& args) {
            ArgReader a("replace", args, {"old", "new", "count"});
            return Value(py_replace(s.as_string(), need_string(a.get(0), "replace", "argument 1"),
                                    need_string(a.get(1), "replace", "argument 2"), optional_long(a.get(2), -1)));
        };
    } else if (name == "find" || name == "count" || name == "rfind") {
        fn = [name](const Value& s, CallArgs& args) {
            ArgReader a(name, args, {"sub"});
            const std::string sub = need_string(a.get(0), name.c_str(), "argument");
            const std::string& t = s.as_string();
            if (name == "count") {
                if (sub.empty()) return Value(static_cast<std::int64_t>(utf8_length(t) + 1));
                std::int64_t n = 0;
                for (std::size_t at = t.find(sub); at != std::string::npos; at = t.find(sub, at + sub.size())) ++n;
                return Value(n);
            }
            const std::size_t at = name == "find" ? t.find(sub) : t.rfind(sub);
            if (at == std::string::npos) return Value(static_cast<std::int64_t>(-1));
            return Value(static_cast<std::int64_t>(utf8_length(std::string_view(t).substr(0, at))));
        };
    } else if (name == "join") {
        fn = [](const Value& s, CallArgs& args) {
            ArgReader a("join", args, {"iterable"});
            std::string out;
            bool first = true;
            for (const auto& item : iterate(a.get(0))) {
                if (!first) out += s.as_string();
                first = false;
                out += need_string(item, "join", "sequence item");
            }
            return Value(std::move(out));
        };
    } else if (name == "isspace" || name == "isdigit" || name == "isalpha" || name == "isalnum" ||
               name == "islower" || name == "isupper") {
        fn = [name](const Value& s, CallArgs& args) {
            ArgReader a(name, args, {});
            const std::u32string t = utf8_decode(s.as_string());
            if (t.empty()) return Value(false);
            bool cased = false, ok = true;
            for (char32_t c : t) {
                const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z', digit = c >= '0' && c <= '9';
                if (name == "isspace") ok = ok && py_isspace(c);
                else if (name == "isdigit") ok = ok && digit;
                else if (name == "isalpha") ok = ok && (lower || upper);
                else if (name == "isalnum") ok = ok && (lower || upper || digit);
                else if (name == "islower") { ok = ok && !upper; cased = cased || lower; }
                else { ok = ok && !lower; cased = cased || upper; }
            }
            if (name == "islower" || name == "isupper") ok = ok && cased;
            return Value(ok);
        };
    } else {
        return Value::undefined();
    }
    return bind(self, name, std::move(fn));
}

Value dict_method(const Value& self, const std::string& name) {
    using F = std::function<Value(const Value&, CallArgs&)>;
    F fn;
    if (name == "items" || name == "keys" || name == "values") {
        fn = [name](const Value& d, CallArgs& args) {
            ArgReader a(name, args, {});
            List out;
            for (const auto& [k, v] : d.as_dict()->items) {
                if (name == "items") out.push_back(Value::tuple(List{Value(k), v}));
                else if (name == "keys") out.emplace_back(k);
                else out.push_back(v);
            }
            return Value(std::move(out));
        };
    } else if (name == "get") {
        fn = [](const Value& d, CallArgs& args) {
            ArgReader a("get", args, {"key", "default"});
            const Value key = a.get(0);
            if (key.is_string())
                if (const Value* v = d.as_dict()->find(key.as_string())) return *v;
            return a.get(1, Value::none());
        };
    } else if (name == "copy") {
        fn = [](const Value& d, CallArgs& args) {
            ArgReader a("copy", args, {});
            return Value(std::make_shared<Dict>(*d.as_dict()));
        };
    } else if (name == "update" || name == "pop" || name == "popitem" || name == "setdefault" || name == "clear") {
        // ImmutableSandboxedEnvironment (what HF uses) refuses to mutate dicts.
        fn = [name](const Value&, CallArgs&) -> Value { fail("access to attribute '{}' of 'dict' object is unsafe.", name); };
    } else {
        return Value::undefined();
    }
    return bind(self, name, std::move(fn));
}

Value list_method(const Value& self, const std::string& name) {
    using F = std::function<Value(const Value&, CallArgs&)>;
    F fn;
    if (name == "index" || name == "count") {
        fn = [name](const Value& l, CallArgs& args) {
            ArgReader a(name, args, {"value"});
            const Value needle = a.get(0);
            std::int64_t n = 0;
            const auto& list = *l.as_list();
            for (std::size_t i = 0; i < list.size(); ++i) {
                if (!values_equal(list[i], needle)) continue;
                if (name == "index") return Value(static_cast<std::int64_t>(i));
                ++n;
            }
            if (name == "index") fail("{} is not in list", needle.repr());
            return Value(n);
        };
    } else if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
               name == "sort" || name == "reverse" || name == "clear") {
        fn = [name](const Value&, CallArgs&) -> Value { fail("access to attribute '{}' of 'list' object is unsafe.", name); };
    } else {
        return Value::undefined();
    }
    return bind(self, name, std::move(fn));
}

}  // namespace

Value method_of(const Value& object, const std::string& name) {
    if (object.is_string()) return string_method(object, name);
    if (object.is_dict() && !object.as_dict()->is_namespace) return dict_method(object, name);
    if (object.is_list()) return list_method(object, name);
    return Value::undefined();
}

namespace {

void install_functions(Frame& globals) {
    globals.set("range", Value::callable("range", [](CallArgs& args) -> Value {
        if (!args.named.empty()) fail("range() takes no keyword arguments");
        if (args.positional.empty() || args.positional.size() > 3)
            fail("range expected 1 to 3 arguments, got {}", args.positional.size());
        for (const auto& v : args.positional)
            if (!v.is_int() && !v.is_bool()) fail("'{}' object cannot be interpreted as an integer", v.type_name());
        std::int64_t start = 0, stop, step = 1;
        if (args.positional.size() == 1) {
            stop = args.positional[0].to_int();
        } else {
            start = args.positional[0].to_int();
            stop = args.positional[1].to_int();
            if (args.positional.size() == 3) step = args.positional[2].to_int();
        }
        if (step == 0) fail("range() arg 3 must not be zero");
        constexpr std::int64_t kMaxRange = 1'000'000;  // the sandbox refuses huge ranges too
        const double count = step > 0 ? std::ceil((static_cast<double>(stop) - start) / step)
                                      : std::ceil((static_cast<double>(start) - stop) / -static_cast<double>(step));
        if (count > kMaxRange) fail("range too big, maximum size for range is {}", kMaxRange);
        List out;
        if (step > 0)
            for (std::int64_t i = start; i < stop; i += step) out.emplace_back(i);
        else
            for (std::int64_t i = start; i > stop; i += step) out.emplace_back(i);
        return Value(std::move(out));
    }));
    globals.set("namespace", Value::callable("namespace", [](CallArgs& args) -> Value {
        auto ns = std::make_shared<Dict>();
        ns->is_namespace = true;
        register_namespace(ns);
        for (const auto& v : args.positional) {
            if (!v.is_dict()) fail("namespace() positional arguments must be dicts, got {}", v.type_name());
            for (const auto& [k, item] : v.as_dict()->items) ns->set(k, item);
        }
        for (const auto& [k, v] : args.named) ns->set(k, v);
        return Value(std::move(ns));
    }));
    globals.set("dict", Value::callable("dict", [](CallArgs& args) -> Value {
        auto d = std::make_shared<Dict>();
        for (const auto& v : args.positional) {
            if (!v.is_dict()) fail("dict() positional arguments must be dicts, got {}", v.type_name());
            for (const auto& [k, item] : v.as_dict()->items) d->set(k, item);
        }
        for (const auto& [k, v] : args.named) d->set(k, v);
        return Value(std::move(d));
    }));
    globals.set("raise_exception", Value::callable("raise_exception", [](CallArgs& args) -> Value {
        ArgReader a("raise_exception", args, {"message"});
        throw TemplateRaised(a.get(0).str());
    }));
}

}  // namespace

std::shared_ptr<Frame> new_globals(std::time_t now) {
    static const std::shared_ptr<Frame> functions = [] {
        auto frame = std::make_shared<Frame>();
        install_functions(*frame);
        return frame;
    }();
    auto globals = std::make_shared<Frame>();
    globals->parent = functions;
    globals->set("strftime_now", Value::callable("strftime_now", [now](CallArgs& args) -> Value {
        ArgReader a("strftime_now", args, {"format"});
        const std::string format = need_string(a.get(0), "strftime_now", "format");
        std::tm tm{};
        localtime_r(&now, &tm);
        std::string buf(256 + format.size() * 8, '\0');
        const std::size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
        buf.resize(n);
        return Value(std::move(buf));
    }));
    return globals;
}

}  // namespace pagoda::chat::jinja
