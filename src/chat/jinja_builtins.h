// The builtin library of the Jinja interpreter: filters (`x | name`), tests (`x is name`), Python
// methods on str / dict / list values (`s.strip()`, `d.items()`), and the global functions chat
// templates use (range, namespace, dict, raise_exception, strftime_now). Behaviour follows Jinja
// 3.1 and Python; `tojson` is Hugging Face's (json.dumps with ensure_ascii=False, key order kept).
// Implemented in jinja_filters.cpp, jinja_test_predicates.cpp and jinja_methods.cpp.
#pragma once
#include <ctime>
#include <string>

#include "chat/jinja_eval.h"

namespace pagoda::chat::jinja {

Value apply_filter(const std::string& name, const Value& value, CallArgs& args);
bool apply_test(const std::string& name, const Value& value, CallArgs& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

// Bound method `name` of a str, dict or list value; undefined when the type has no such method.
Value method_of(const Value& object, const std::string& name);

// A fresh frame for one render's variables, whose parent holds the global functions (built once
// and shared); strftime_now formats `now` (local time).
std::shared_ptr<Frame> new_globals(std::time_t now);

// Argument helpers shared by filters, methods and globals: Python-style positional-or-keyword
// binding with defaults; errors name the function.
class ArgReader {
public:
    ArgReader(std::string function, CallArgs& args, std::vector<std::string> names);
    // The argument at position i / named names[i]; `fallback` when absent.
    Value get(std::size_t i, Value fallback = Value::undefined()) const;
    bool has(std::size_t i) const;

private:
    std::string function_;
    std::vector<Value> bound_;
    std::vector<bool> present_;
};

}  // namespace pagoda::chat::jinja
