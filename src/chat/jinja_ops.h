// Python semantics for Jinja values: operators (+ - * / // % ** ~, comparisons, in), attribute and
// item access (obj.name tries Python attributes such as dict methods before keys; obj[key] tries
// keys first; misses give undefined), slicing, iteration and calls. Errors are pagoda::Error with
// Python's wording ("can only concatenate str (not \"int\") to str"); integers are 64-bit and
// overflow is an error.
#pragma once
#include <string>

#include "chat/jinja_value.h"

namespace pagoda::chat::jinja {

Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);  // none: omitted
List iterate(const Value& value);  // Python iteration: list items, dict keys, string characters
bool contains(const Value& container, const Value& item);
Value call_value(const Value& callee, CallArgs& args);
Value unary_operation(const std::string& op, const Value& operand);             // "-", "+"
Value binary_operation(const std::string& op, const Value& a, const Value& b);  // all but and/or
[[noreturn]] void fail_undefined(const Value& undefined);

}  // namespace pagoda::chat::jinja
