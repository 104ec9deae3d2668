#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "grammar/matcher.h"

namespace pagoda::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    Matcher m(g);
    return m.accept(text) && m.can_end();
}

// A random sentence of the grammar: a walk over bytes, choosing among those the matcher takes and
// leaning towards closing brackets and quotes once long, so that it ends.
std::string random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
    static const std::string alphabet =
        " \n\t{}[]\",:-+.eE0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_@/\\";
    Matcher m(g);
    std::string out;
    for (int step = 0; step < 4000; ++step) {
        if (m.can_end() && (!m.can_continue() || rng() % 4 == 0)) return out;
        std::vector<char> options, closing;
        for (char c : alphabet) {
            Matcher copy = m;
            if (copy.accept(std::string_view(&c, 1))) {
                options.push_back(c);
                if (c == '"' || c == ']' || c == '}' || c == 'n' || c == 't' || c == 'f') closing.push_back(c);
            }
        }
        if (options.empty()) break;
        const auto& pool = out.size() > 150 && !closing.empty() ? closing : options;
        const char c = pool[rng() % pool.size()];
        EXPECT_TRUE(m.accept(std::string_view(&c, 1)));
        out += c;
    }
    ADD_FAILURE() << "no sentence ended: " << out;
    return out;
}

std::string refusal(const std::string& schema) {
    try {
        compile_json_schema(ojson::parse(schema));
    } catch (const SchemaError& e) {
        return e.keyword + " @" + e.path;
    }
    return "";
}

TEST(JsonSchema, ObjectWithRequiredAndOptionalPropertiesInOrder) {
    auto g = compile_json_schema(ojson::parse(R"({
        "type": "object", "title": "Person", "description": "x",
        "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer"},
                       "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2}},
        "required": ["name"], "additionalProperties": false})"));
    EXPECT_TRUE(accepts(g, R"({"name":"bob"})"));
    EXPECT_TRUE(accepts(g, R"({ "name" : "bob" , "age" : -12, "tags": ["a", 3] })"));
    EXPECT_TRUE(accepts(g, R"({"name":"bob","tags":[]})"));
    EXPECT_FALSE(accepts(g, R"({"age":1})"));                  // name is required
    EXPECT_FALSE(accepts(g, R"({"age":1,"name":"bob"})"));     // properties order
    EXPECT_FALSE(accepts(g, R"({"name":"bobbyx"})"));          // maxLength
    EXPECT_FALSE(accepts(g, R"({"name":"bob","x":1})"));       // no additional properties
    EXPECT_FALSE(accepts(g, R"({"name":"bob","age":1.5})"));   // integer
    EXPECT_FALSE(accepts(g, R"({"name":"bob","tags":["a","b","a"]})"));  // maxItems
    EXPECT_FALSE(accepts(g, R"({"name":"bob","tags":["c"]})"));          // enum
    EXPECT_FALSE(accepts(g, "{\"name\":\"bob\"" + std::string(40, ' ') + "}"));  // bounded white space

    std::mt19937 rng(1);
    for (int i = 0; i < 50; ++i) {
        const std::string s = random_sentence(g, rng);
        const json v = json::parse(s);
        ASSERT_TRUE(v.is_object()) << s;
        ASSERT_TRUE(v.contains("name") && v["name"].is_string() && v["name"].get<std::string>().size() <= 5) << s;
        if (v.contains("age")) {
            EXPECT_TRUE(v["age"].is_number_integer()) << s;
        }
        if (v.contains("tags")) {
            EXPECT_LE(v["tags"].size(), 2u) << s;
        }
    }
}

TEST(JsonSchema, AdditionalPropertiesNeverRepeatADeclaredName) {
    auto g = compile_json_schema(ojson::parse(R"({"type": "object", "properties": {"ab": {"type": "null"}},
        "additionalProperties": {"type": "boolean"}})"));
    EXPECT_TRUE(accepts(g, R"({"ab":null,"a":true,"abc":false,"b":true})"));
    EXPECT_TRUE(accepts(g, R"({"x":true})"));
    EXPECT_FALSE(accepts(g, R"({"ab":null,"ab":true})"));
    EXPECT_FALSE(accepts(g, R"({"x":null})"));
    EXPECT_TRUE(accepts(compile_json_schema(ojson::parse(R"({"type":"object"})")), R"({"k":[1,{"z":"q"}],"j":null})"));
}

TEST(JsonSchema, TypesEnumsConstAndUnions) {
    auto g = compile_json_schema(ojson::parse(R"({"type": ["integer", "null", "boolean"]})"));
    for (const char* ok : {"0", "-7", "123", "null", "true", "false", " 12", "\n  12"}) EXPECT_TRUE(accepts(g, ok)) << ok;
    for (const char* bad : {"01", "1.5", "\"x\"", "-", "nul", "1e3"}) EXPECT_FALSE(accepts(g, bad)) << bad;
    auto number = compile_json_schema(ojson::parse(R"({"type": "number"})"));
    for (const char* ok : {"0", "-0.5", "1e10", "2.5E-3"}) EXPECT_TRUE(accepts(number, ok)) << ok;
    EXPECT_FALSE(accepts(number, "12345678901234567890"));  // more than 16 digits
    auto c = compile_json_schema(ojson::parse(R"({"const": {"a": [1, "x"]}})"));
    EXPECT_TRUE(accepts(c, R"({"a":[1,"x"]})"));
    auto any = compile_json_schema(ojson::parse(R"({"anyOf": [{"type": "string", "minLength": 2}, {"type": "array",
        "items": {"$ref": "#/$defs/n"}, "minItems": 1}], "$defs": {"n": {"type": "number"}}})"));
    EXPECT_TRUE(accepts(any, R"("ab")"));
    EXPECT_TRUE(accepts(any, R"([1, 2.5])"));
    EXPECT_FALSE(accepts(any, R"("a")"));
    EXPECT_FALSE(accepts(any, R"([])"));
    auto one = compile_json_schema(ojson::parse(R"({"oneOf": [{"type": "string"}, {"const": 3}, {"type": "object"}]})"));
    EXPECT_TRUE(accepts(one, "3"));
    EXPECT_TRUE(accepts(one, "{}"));
}

TEST(JsonSchema, RecursiveDefinitions) {
    auto g = compile_json_schema(ojson::parse(R"({"$ref": "#/definitions/node", "definitions": {"node": {
        "type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
        "required": ["v"]}}})"));
    EXPECT_TRUE(accepts(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
    EXPECT_FALSE(accepts(g, R"({"v":1,"kids":[{}]})"));
}

TEST(JsonSchema, PatternsBecomeGrammars) {
    auto g = compile_json_schema(ojson::parse(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}(x|yz)?$"})"));
    EXPECT_TRUE(accepts(g, R"("AB-123")"));
    EXPECT_TRUE(accepts(g, R"("QQ-000yz")"));
    EXPECT_FALSE(accepts(g, R"("AB-12")"));
    EXPECT_FALSE(accepts(g, R"("ab-123")"));
    auto unanchored = compile_json_schema(ojson::parse(R"({"pattern": "a\"b"})"));
    EXPECT_TRUE(accepts(unanchored, R"("xx a\"b yy")"));
    EXPECT_FALSE(accepts(unanchored, R"("ab")"));
    auto dot = compile_json_schema(ojson::parse(R"({"type": "string", "pattern": "^.[^a-c\\\\]+$"})"));
    EXPECT_TRUE(accepts(dot, R"("\\zz")"));   // '.' may be a backslash (escaped in JSON)
    EXPECT_FALSE(accepts(dot, R"("zb")"));
    EXPECT_FALSE(accepts(dot, R"("z\\")"));
    EXPECT_EQ(refusal(R"({"type":"string","pattern":"(a)\\1"})"), "pattern @");
    EXPECT_EQ(refusal(R"j({"type":"string","pattern":"a(?=b)"})j"), "pattern @");
    EXPECT_EQ(refusal(R"({"type":"string","pattern":"\\bword"})"), "pattern @");
}

TEST(JsonSchema, RefusesWhatItCannotEnforceNamingTheKeyword) {
    EXPECT_EQ(refusal(R"({"type":"integer","minimum":0})"), "minimum @");
    EXPECT_EQ(refusal(R"({"type":"object","properties":{"a":{"type":"string","format":"email"}}})"), "format @/properties/a");
    EXPECT_EQ(refusal(R"({"type":"object","patternProperties":{}})"), "patternProperties @");
    EXPECT_EQ(refusal(R"({"type":"array","uniqueItems":true})"), "uniqueItems @");
    EXPECT_EQ(refusal(R"({"type":"array","items":[{"type":"string"}]})"), "items @");
    EXPECT_EQ(refusal(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})"), "oneOf @");
    EXPECT_EQ(refusal(R"({"oneOf":[{"type":"string"},{}]})"), "oneOf @");
    EXPECT_EQ(refusal(R"({"$ref":"#/$defs/missing"})"), "$ref @");
    EXPECT_EQ(refusal(R"({"$ref":"http://example.com/s.json"})"), "$ref @");
    EXPECT_EQ(refusal(R"({"type":"object","properties":{},"required":["a"]})"), "required @");
    EXPECT_EQ(refusal(R"({"type":"string","minLength":3,"maxLength":2})"), "minLength @");
    EXPECT_EQ(refusal(R"({"type":"strin"})"), "type @");
    EXPECT_EQ(refusal(R"({"allOf":[{"type":"string"},{"minLength":1}]})"), "allOf @");
    EXPECT_EQ(refusal(R"({"$ref":"#"})"), "$ref @");  // a loop that consumes nothing
    EXPECT_EQ(refusal(R"(false)"), "false @");
    EXPECT_EQ(refusal(R"({"type":"string","$schema":"https://json-schema.org/draft/2020-12/schema","examples":["x"],
        "default":"y","title":"t"})"), "");
}

// Random schemas built from every keyword (known, unknown, malformed values) and random patterns:
// each compiles or is a SchemaError; nothing else escapes and nothing crashes.
TEST(JsonSchema, FuzzedSchemasCompileOrAreRefused) {
    std::mt19937 rng(17);
    const std::vector<std::string> keys = {"type", "properties", "required", "additionalProperties", "items", "minItems",
                                           "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern",
                                           "minLength", "maxLength", "$defs", "title", "format", "not", "minimum"};
    const std::vector<ojson> atoms = {"string", "object", "array", "integer", "number", "null", "boolean", "#/$defs/a",
                                      "#", 0, 3, -1, 1e9, true, false, nullptr, "^[a-z]+$", "(a|b)*c{2,3}", "[^\\d]\\w+",
                                      "a(?:b|", ojson::array(), ojson::object()};
    std::function<ojson(int)> gen = [&](int depth) -> ojson {
        if (depth > 3 || rng() % 4 == 0) return atoms[rng() % atoms.size()];
        if (rng() % 5 == 0) {
            ojson a = ojson::array();
            for (int i = int(rng() % 3); i >= 0; --i) a.push_back(gen(depth + 1));
            return a;
        }
        ojson o = ojson::object();
        for (int i = int(rng() % 4); i >= 0; --i) o[keys[rng() % keys.size()]] = gen(depth + 1);
        if (rng() % 3 == 0) o["$defs"] = {{"a", gen(depth + 1)}};
        return o;
    };
    int compiled = 0;
    for (int i = 0; i < 3000; ++i) {
        const ojson schema = gen(0);
        try {
            auto g = compile_json_schema(schema);
            Matcher m(g);
            m.accept("{\"a\": [1, \"x\"]}");
            ++compiled;
        } catch (const SchemaError&) {
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not a SchemaError: " << e.what() << " for " << schema.dump();
        }
    }
    EXPECT_GT(compiled, 100);
}

}  // namespace
}  // namespace pagoda::grammar
