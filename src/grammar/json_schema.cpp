#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <set>

#include "grammar/gbnf_parser.h"
#include "grammar/regex_to_gbnf.h"
#include "tokenizer/utf8.h"

namespace pagoda::grammar {
namespace {

using json = nlohmann::ordered_json;

inline constexpr int kMaxSchemaDepth = 64;

// The building blocks, defined on first use. White space is bounded so a model cannot spend its
// whole budget on it; numbers are bounded so a digit loop ends.
const std::map<std::string, std::string>& primitives() {
    static const std::map<std::string, std::string> p = {
        {"ws", R"(([ ] | [\n] [ \t]{0,16})?)"},
        {"hex", R"([0-9a-fA-F])"},
        // \u escapes of surrogates are left out: a lone one is not a character, and a pair would
        // count as two characters against minLength where JSON Schema counts one.
        {"char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] hex{3} | [dD] [0-7] hex{2})))"},
        {"plain", R"([^"\\\x00-\x1F])"},
        {"string", R"("\"" char* "\"")"},
        {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))"},
        {"number", R"(integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)"},
        {"boolean", R"("true" | "false")"},
        {"null", R"("null")"},
        {"value", R"(object | array | string | number | boolean | null)"},
        {"object", R"("{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}")"},
        {"array", R"("[" ws (value ws ("," ws value ws)*)? "]")"},
    };
    return p;
}

const std::set<std::string>& annotations() {
    static const std::set<std::string> a = {"title",    "description", "$schema",  "$id",       "$comment", "examples",
                                            "default",  "deprecated",  "readOnly", "writeOnly", "$defs",    "definitions"};
    return a;
}

const std::set<std::string>& supported() {
    static const std::set<std::string> s = {"type",  "enum",  "const", "properties", "required", "additionalProperties",
                                            "items", "minItems", "maxItems", "anyOf", "oneOf", "allOf",
                                            "$ref",  "pattern", "minLength", "maxLength"};
    return s;
}

std::string literal(std::string_view bytes) {
    std::string out = "\"";
    for (unsigned char c : bytes) {
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c < 0x20) out += fmt::format("\\x{:02X}", c);
        else out += char(c);
    }
    return out + "\"";
}

bool is_integer_value(const json& v) {
    if (v.is_number_integer()) return true;
    return v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>());
}

// The JSON type names `v` satisfies.
std::set<std::string> types_of(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return {"null"};
        case json::value_t::boolean: return {"boolean"};
        case json::value_t::string: return {"string"};
        case json::value_t::array: return {"array"};
        case json::value_t::object: return {"object"};
        default: return is_integer_value(v) ? std::set<std::string>{"number", "integer"} : std::set<std::string>{"number"};
    }
}

class SchemaCompiler {
public:
    explicit SchemaCompiler(const json& root) : root_(root) {}

    std::string run() {
        const std::string top = visit(root_, "", 0);
        std::string out = "root ::= ws " + top + "\n";
        use("ws");
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }

private:
    [[noreturn]] void refuse(const std::string& keyword, const std::string& path, const std::string& why) const {
        throw SchemaError(fmt::format("schema keyword '{}' at '{}': {}", keyword, path.empty() ? "#" : "#" + path, why),
                          keyword, path);
    }

    // Makes the primitive `name` (and what it uses) part of the output; returns its name.
    std::string use(const std::string& name) {
        if (defined_.insert(name).second) {
            const std::string& body = primitives().at(name);
            rules_.push_back({name, body});
            for (const auto& [other, unused] : primitives())
                if (other != name && body.find(other) != std::string::npos) use(other);
        }
        return name;
    }

    // A rule for `body`, shared with any identical one.
    std::string rule(const std::string& hint, const std::string& body) {
        auto it = by_body_.find(body);
        if (it != by_body_.end()) return it->second;
        const std::string name = fmt::format("{}{}", hint, ++counter_);
        by_body_.emplace(body, name);
        rules_.push_back({name, body});
        return name;
    }

    static std::string join(const std::vector<std::string>& alts) {
        std::string out;
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out;
    }

    std::string visit(const json& s, const std::string& path, int depth) {
        if (depth > kMaxSchemaDepth) refuse("$ref", path, "schemas nest too deeply");
        if (s.is_boolean()) {
            if (!s.get<bool>()) refuse("false", path, "the schema false admits no value");
            return use("value");
        }
        if (!s.is_object()) refuse("type", path, "a schema must be an object or a boolean");
        for (auto it = s.begin(); it != s.end(); ++it)
            if (!annotations().count(it.key()) && !supported().count(it.key()))
                refuse(it.key(), path, "this keyword is not supported, so it cannot be enforced");

        std::vector<std::string> constraints;  // supported keywords present
        for (auto it = s.begin(); it != s.end(); ++it)
            if (supported().count(it.key())) constraints.push_back(it.key());
        auto only = [&](const std::string& keyword, std::set<std::string> allowed) {
            allowed.insert(keyword);
            for (const auto& k : constraints)
                if (!allowed.count(k)) refuse(keyword, path, fmt::format("'{}' together with '{}' is not supported", keyword, k));
        };

        if (s.contains("$ref")) {
            only("$ref", {});
            return ref(s["$ref"], path, depth);
        }
        if (s.contains("allOf")) {
            only("allOf", {});
            const json& all = s["allOf"];
            if (!all.is_array() || all.size() != 1) refuse("allOf", path, "only an allOf with exactly one schema is supported");
            return visit(all[0], path + "/allOf/0", depth + 1);
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            only(key, {});
            const json& branches = s[key];
            if (!branches.is_array() || branches.empty()) refuse(key, path, "must be a non-empty array of schemas");
            if (std::string(key) == "oneOf") check_disjoint(branches, path);
            std::vector<std::string> alts;
            for (size_t i = 0; i < branches.size(); ++i)
                alts.push_back(visit(branches[i], fmt::format("{}/{}/{}", path, key, i), depth + 1));
            return rule("alt", join(alts));
        }

        std::set<std::string> types = declared_types(s, path);
        if (s.contains("enum") || s.contains("const")) {
            const bool is_enum = s.contains("enum");
            const std::string key = is_enum ? "enum" : "const";
            only(key, {"type"});
            const json values = is_enum ? s["enum"] : json::array({s["const"]});
            if (!values.is_array() || values.empty()) refuse(key, path, "must be a non-empty array");
            std::vector<std::string> alts;
            for (const json& v : values) {
                const auto vt = types_of(v);
                if (!types.empty() && std::none_of(vt.begin(), vt.end(), [&](const std::string& t) { return types.count(t); }))
                    continue;  // excluded by `type`
                alts.push_back(literal(v.dump()));
            }
            if (alts.empty()) refuse(key, path, "no value is of the schema's type");
            return rule("enum", join(alts));
        }
        if (types.empty()) {
            // No type: the keywords present imply the kinds of value they constrain.
            for (const auto& k : constraints) {
                if (k == "properties" || k == "required" || k == "additionalProperties") types.insert("object");
                if (k == "items" || k == "minItems" || k == "maxItems") types.insert("array");
                if (k == "pattern" || k == "minLength" || k == "maxLength") types.insert("string");
            }
            if (types.empty()) return use("value");
        }
        if (types.count("integer") && types.count("number")) types.erase("integer");
        std::vector<std::string> alts;
        for (const auto& t : types) alts.push_back(typed(t, s, path, depth));
        return alts.size() == 1 ? alts[0] : rule("any", join(alts));
    }

    std::set<std::string> declared_types(const json& s, const std::string& path) {
        static const std::set<std::string> known = {"string", "number", "integer", "boolean", "null", "object", "array"};
        std::set<std::string> types;
        if (!s.contains("type")) return types;
        const json& t = s["type"];
        const json list = t.is_array() ? t : json::array({t});
        for (const json& name : list) {
            if (!name.is_string() || !known.count(name.get<std::string>()))
                refuse("type", path, fmt::format("unknown type {}", name.dump()));
            types.insert(name.get<std::string>());
        }
        if (types.empty()) refuse("type", path, "an empty list of types admits no value");
        return types;
    }

    std::string typed(const std::string& type, const json& s, const std::string& path, int depth) {
        if (type == "string") return string_type(s, path);
        if (type == "object") return object_type(s, path, depth);
        if (type == "array") return array_type(s, path, depth);
        return use(type);  // number, integer, boolean, null
    }

    uint32_t count(const json& s, const char* key, const std::string& path, uint32_t fallback) {
        if (!s.contains(key)) return fallback;
        const json& v = s[key];
        if (!is_integer_value(v) || v.get<double>() < 0) refuse(key, path, "must be a non-negative integer");
        if (v.get<double>() > kMaxRepetition) refuse(key, path, fmt::format("values above {} are not supported", kMaxRepetition));
        return uint32_t(v.get<double>());
    }

    static std::string repeat(uint32_t min, uint32_t max) {
        return max == kUnbounded ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    }

    std::string string_type(const json& s, const std::string& path) {
        const uint32_t min = count(s, "minLength", path, 0), max = count(s, "maxLength", path, kUnbounded);
        if (min > max) refuse("minLength", path, "is greater than maxLength");
        if (s.contains("pattern")) {
            if (s.contains("minLength") || s.contains("maxLength"))
                refuse(s.contains("minLength") ? "minLength" : "maxLength", path, "together with 'pattern' is not supported");
            if (!s["pattern"].is_string()) refuse("pattern", path, "must be a string");
            use("char");
            std::string body;
            try {
                body = regex_to_gbnf(s["pattern"].get<std::string>(), "char");
            } catch (const SchemaError&) {
                throw;
            } catch (const Error& e) {
                refuse("pattern", path, e.what());
            }
            return rule("pattern", "\"\\\"\" " + body + " \"\\\"\"");
        }
        if (min == 0 && max == kUnbounded) return use("string");
        use("char");
        return rule("str", "\"\\\"\" char" + repeat(min, max) + " \"\\\"\"");
    }

    // A rule for one "key": value member.
    std::string member(const std::string& name, const std::string& value) {
        use("ws");
        return rule("kv", literal(json(name).dump()) + " ws \":\" ws " + value + " ws");
    }

    std::string object_type(const json& s, const std::string& path, int depth) {
        std::vector<std::pair<std::string, std::string>> props;  // name, member rule
        const bool has_props = s.contains("properties");
        if (has_props) {
            const json& p = s["properties"];
            if (!p.is_object()) refuse("properties", path, "must be an object");
            for (auto it = p.begin(); it != p.end(); ++it) {
                props.push_back({it.key(), member(it.key(), visit(it.value(), path + "/properties/" + it.key(), depth + 1))});
            }
        }
        std::set<std::string> required;
        if (s.contains("required")) {
            const json& r = s["required"];
            if (!r.is_array()) refuse("required", path, "must be an array of property names");
            for (const json& name : r) {
                if (!name.is_string()) refuse("required", path, "must be an array of property names");
                if (std::none_of(props.begin(), props.end(), [&](const auto& p) { return p.first == name.get<std::string>(); }))
                    refuse("required", path, fmt::format("required property '{}' is not in 'properties'", name.get<std::string>()));
                required.insert(name.get<std::string>());
            }
        }
        // Additional members: absent means none when `properties` is given (what structured-output
        // APIs mean), any when it is not ({"type": "object"}).
        std::string extra;
        const json* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
        if (ap && ap->is_boolean()) {
            if (ap->get<bool>()) extra = use("value");
        } else if (ap) {
            extra = visit(*ap, path + "/additionalProperties", depth + 1);
        } else if (!has_props) {
            extra = use("value");
        }
        std::string extra_member;
        if (!extra.empty()) {
            std::set<std::string> names;
            for (const auto& p : props) names.insert(p.first);
            use("ws");
            extra_member = rule("extra", other_key(names) + " ws \":\" ws " + extra + " ws");
        }
        // first[k]: members k.. when nothing came before; rest[k]: the same after some member.
        const size_t n = props.size();
        std::vector<std::string> first(n + 1), rest(n + 1);
        rest[n] = extra.empty() ? "\"\"" : "(\",\" ws " + extra_member + ")*";
        first[n] = extra.empty() ? "\"\"" : "(" + extra_member + " " + rule("more", rest[n]) + ")?";
        for (size_t k = n; k-- > 0;) {
            const std::string& kv = props[k].second;
            const std::string r = rule("more", rest[k + 1]), f = rule("members", first[k + 1]);
            const bool req = required.count(props[k].first) != 0;
            rest[k] = "\",\" ws " + kv + " " + r + (req ? "" : " | " + r);
            first[k] = kv + " " + r + (req ? "" : " | " + f);
        }
        use("ws");
        return rule("obj", "\"{\" ws " + rule("members", first[0]) + " \"}\"");
    }

    // A JSON string that is none of `names` (so an extra member never repeats a declared one). Its
    // characters are plain (no escapes), so a name cannot come back spelled with escapes.
    std::string other_key(const std::set<std::string>& names) {
        use("plain");
        if (names.empty()) return rule("key", "\"\\\"\" plain* \"\\\"\"");
        struct Node {
            std::map<uint32_t, Node> next;
            bool end = false;
        };
        Node root;
        for (const auto& name : names) {
            Node* n = &root;
            for (size_t i = 0; i < name.size();) {
                const auto d = tokenizer::utf8_decode(name, i);
                n = &n->next[uint32_t(d.codepoint)];
                i += d.length;
            }
            n->end = true;
        }
        std::function<std::string(const Node&)> walk = [&](const Node& n) {
            std::string excluded = "[^\"\\\\\\x00-\\x1F";
            std::vector<std::string> alts;
            for (const auto& [cp, child] : n.next) {
                const std::string c = fmt::format("\\U{:08X}", cp);
                excluded += c;
                alts.push_back("[" + c + "] " + walk(child));
            }
            alts.push_back(excluded + "] plain* \"\\\"\"");
            if (!n.end) alts.push_back("\"\\\"\"");
            return rule("key", join(alts));
        };
        return rule("key", "\"\\\"\" " + walk(root));
    }

    std::string array_type(const json& s, const std::string& path, int depth) {
        const uint32_t min = count(s, "minItems", path, 0), max = count(s, "maxItems", path, kUnbounded);
        if (min > max) refuse("minItems", path, "is greater than maxItems");
        std::string item = use("value");
        if (s.contains("items")) {
            const json& it = s["items"];
            if (it.is_boolean() && !it.get<bool>()) {
                if (min > 0) refuse("items", path, "false with minItems above 0 admits no value");
                return rule("arr", "\"[\" ws \"]\"");
            }
            if (it.is_array()) refuse("items", path, "an array of schemas (tuple form) is not supported");
            item = visit(it, path + "/items", depth + 1);
        }
        use("ws");
        if (max == 0) return rule("arr", "\"[\" ws \"]\"");
        const std::string next = "(\",\" ws " + item + " ws)";
        if (min == 0)
            return rule("arr", "\"[\" ws (" + item + " ws " + next + repeat(0, max == kUnbounded ? max : max - 1) + ")? \"]\"");
        return rule("arr", "\"[\" ws " + item + " ws " + next + repeat(min - 1, max == kUnbounded ? max : max - 1) + " \"]\"");
    }

    std::string ref(const json& target, const std::string& path, int depth) {
        if (!target.is_string() || target.get<std::string>().rfind('#', 0) != 0)
            refuse("$ref", path, "only references into this schema ('#/...') are supported");
        const std::string pointer = target.get<std::string>().substr(1);
        auto it = refs_.find(pointer);
        if (it != refs_.end()) return it->second;
        const json* resolved = nullptr;
        try {
            resolved = &root_.at(json::json_pointer(pointer));
        } catch (const json::exception&) {
            refuse("$ref", path, fmt::format("'{}' does not resolve", target.get<std::string>()));
        }
        // Named before it is compiled, so a recursive schema refers to itself by name.
        const std::string name = fmt::format("ref{}", ++counter_);
        refs_.emplace(pointer, name);
        const std::string body = visit(*resolved, pointer, depth + 1);
        rules_.push_back({name, body});
        return name;
    }

    // oneOf needs exactly one branch to match; only branches that cannot overlap are accepted:
    // different types (integer counts as number), or constants that differ.
    void check_disjoint(const json& branches, const std::string& path) {
        std::vector<std::set<std::string>> kinds;
        std::vector<std::optional<std::set<std::string>>> constants;
        for (const json& raw : branches) {
            const json* b = &raw;
            for (int hops = 0; b->is_object() && b->contains("$ref") && hops < 16; ++hops) {
                const auto& r = (*b)["$ref"];
                if (!r.is_string() || r.get<std::string>().rfind('#', 0) != 0) break;
                try {
                    b = &root_.at(json::json_pointer(r.get<std::string>().substr(1)));
                } catch (const json::exception&) {
                    break;
                }
            }
            std::set<std::string> k;
            std::optional<std::set<std::string>> c;
            if (b->is_object() && (b->contains("enum") || b->contains("const"))) {
                const json values = b->contains("enum") ? (*b)["enum"] : json::array({(*b)["const"]});
                c.emplace();
                if (values.is_array())
                    for (const json& v : values) {
                        c->insert(v.dump());
                        for (const auto& t : types_of(v)) k.insert(t == "integer" ? "number" : t);
                    }
            }
            if (b->is_object() && b->contains("type")) {
                k.clear();
                for (const auto& t : declared_types(*b, path)) k.insert(t == "integer" ? "number" : t);
            } else if (!c) {
                k = {"any"};
            }
            kinds.push_back(k);
            constants.push_back(c);
        }
        for (size_t i = 0; i < kinds.size(); ++i)
            for (size_t j = i + 1; j < kinds.size(); ++j) {
                if (constants[i] && constants[j]) {
                    for (const auto& v : *constants[i])
                        if (constants[j]->count(v)) refuse("oneOf", path, "two branches share a constant value");
                    continue;
                }
                bool overlap = kinds[i].count("any") || kinds[j].count("any") || kinds[i].empty() || kinds[j].empty();
                for (const auto& t : kinds[i]) overlap = overlap || kinds[j].count(t);
                if (overlap)
                    refuse("oneOf", path,
                           fmt::format("branches {} and {} may both match a value, which oneOf forbids and a grammar "
                                       "cannot exclude; use anyOf, or give the branches different types",
                                       i, j));
            }
    }

    const json& root_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::map<std::string, std::string> by_body_, refs_;
    std::set<std::string> defined_;
    int counter_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema) { return SchemaCompiler(schema).run(); }

std::string json_schema_to_gbnf(const nlohmann::json& schema) { return json_schema_to_gbnf(json(schema)); }

std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::json& schema) { return compile_json_schema(json(schema)); }

std::shared_ptr<const Grammar> compile_json_schema(const json& schema) {
    const std::string gbnf = json_schema_to_gbnf(schema);
    try {
        return parse_gbnf(gbnf);
    } catch (const SchemaError&) {
        throw;
    } catch (const Error& e) {
        // A recursive schema that never consumes anything (a $ref loop) shows up here.
        throw SchemaError(fmt::format("the schema does not compile to a usable grammar: {}", e.what()), "$ref", "");
    }
}

std::shared_ptr<const Grammar> json_object_grammar() {
    static const std::shared_ptr<const Grammar> g = compile_json_schema(json::parse(R"({"type": "object"})"));
    return g;
}

}  // namespace pagoda::grammar
