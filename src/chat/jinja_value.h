// The value type of the Jinja interpreter, modelled on the Python objects Jinja templates see:
// undefined, None, bool, int (64-bit; overflow is an error), float, str (UTF-8), list, dict (string
// keys, insertion order kept as in Python), namespace (a dict whose attributes `set` may assign),
// tuples (lists that print as (a, b) and never equal a list) and
// callables (macros, globals, bound methods). Lists, dicts and namespaces are shared by reference,
// as in Python. String conversion, truthiness, equality and ordering follow Python's rules.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::chat::jinja {

class Value;
using List = std::vector<Value>;

struct Dict {
    std::vector<std::pair<std::string, Value>> items;
    bool is_namespace = false;  // attribute access only (namespace() objects and `loop`)
    bool read_only = false;     // `loop`: `set loop.x = …` is refused as in Jinja

    const Value* find(std::string_view key) const;
    void set(const std::string& key, Value value);
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;
};

struct Callable {
    std::string name;
    std::function<Value(CallArgs&)> fn;
};

struct Undefined {
    std::string hint;  // what was looked up, for error messages ("'foo' is undefined")
};
struct None {};

class Value {
public:
    enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, callable };

    Value() : v_(Undefined{}) {}
    static Value undefined(std::string hint = {}) { Value v; v.v_ = Undefined{std::move(hint)}; return v; }
    static Value none() { Value v; v.v_ = None{}; return v; }
    Value(bool b) : v_(b) {}
    Value(int i) : v_(static_cast<std::int64_t>(i)) {}
    Value(std::int64_t i) : v_(i) {}
    Value(double d) : v_(d) {}
    Value(std::string s) : v_(std::move(s)) {}
    Value(const char* s) : v_(std::string(s)) {}
    // Containers remember how deeply they nest so that printing, comparing and destroying them
    // can never exhaust the stack; building one deeper than kMaxNesting is an error.
    static constexpr std::uint32_t kMaxNesting = 512;
    Value(List list) : v_(std::make_shared<List>(std::move(list))) { depth_ = nesting_of(*as_list()); }
    Value(std::shared_ptr<List> list) : v_(std::move(list)) { depth_ = nesting_of(*as_list()); }
    Value(std::shared_ptr<Dict> dict) : v_(std::move(dict)) { depth_ = nesting_of(*as_dict()); }
    Value(std::shared_ptr<Callable> fn) : v_(std::move(fn)) {}
    static Value callable(std::string name, std::function<Value(CallArgs&)> fn) {
        return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
    }
    static Value new_dict() { return Value(std::make_shared<Dict>()); }
    // A Python tuple: a list that prints as (a, b) and never equals a list.
    static Value tuple(List items) { Value v(std::move(items)); v.tuple_ = true; return v; }
    bool is_tuple() const { return tuple_; }

    Kind kind() const { return static_cast<Kind>(v_.index()); }
    bool is_undefined() const { return kind() == Kind::undefined; }
    bool is_none() const { return kind() == Kind::none; }
    bool is_bool() const { return kind() == Kind::boolean; }
    bool is_int() const { return kind() == Kind::integer; }
    bool is_float() const { return kind() == Kind::floating; }
    bool is_number() const { return is_int() || is_float() || is_bool(); }
    bool is_string() const { return kind() == Kind::string; }
    bool is_list() const { return kind() == Kind::list; }
    bool is_dict() const { return kind() == Kind::dict; }
    bool is_callable() const { return kind() == Kind::callable; }

    bool as_bool() const { return std::get<bool>(v_); }
    std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
    double as_float() const { return std::get<double>(v_); }
    const std::string& as_string() const { return std::get<std::string>(v_); }
    const std::shared_ptr<List>& as_list() const { return std::get<std::shared_ptr<List>>(v_); }
    const std::shared_ptr<Dict>& as_dict() const { return std::get<std::shared_ptr<Dict>>(v_); }
    const std::shared_ptr<Callable>& as_callable() const { return std::get<std::shared_ptr<Callable>>(v_); }
    const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

    // Numeric view of bool/int/float (bool is an int in Python).
    double to_double() const;
    std::int64_t to_int() const;  // bool or int only

    bool truthy() const;
    std::string str() const;   // Python str(); undefined renders as ""
    std::string repr() const { return repr_at(0); }  // Python repr()
    std::string type_name() const;  // Python type name for messages: 'str', 'list', 'dict', ...

    static Value from_json(const nlohmann::ordered_json& json);
    nlohmann::ordered_json to_json() const;  // throws pagoda::Error for undefined / callables

private:
    std::variant<Undefined, None, bool, std::int64_t, double, std::string, std::shared_ptr<List>,
                 std::shared_ptr<Dict>, std::shared_ptr<Callable>>
        v_;
    bool tuple_ = false;
    std::uint32_t depth_ = 0;  // 0 for scalars; 1 + deepest element for containers

    std::string repr_at(std::uint32_t level) const;  // level guards namespace cycles
    static std::uint32_t nesting_of(const List& items);
    static std::uint32_t nesting_of(const Dict& dict);

public:
    std::uint32_t depth() const { return depth_; }
};

bool values_equal(const Value& a, const Value& b);
// Python ordering (<). Throws pagoda::Error for types Python cannot order.
bool values_less(const Value& a, const Value& b);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as Python writes it.
struct JsonDumpOptions {
    bool ensure_ascii = false;
    int indent = -1;  // < 0: no indentation (single line)
    std::string indent_string;  // used when non-empty (json.dumps accepts a string indent)
    std::string item_separator;  // empty: Python's default for the chosen indent
    std::string key_separator = ": ";
    bool custom_separators = false;
    bool sort_keys = false;
};
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace pagoda::chat::jinja
