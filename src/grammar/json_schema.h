// JSON Schema -> grammar, for structured output. Every output the grammar admits is JSON that
// validates against the schema; what the compiler cannot guarantee it refuses with a SchemaError
// naming the keyword and where it is (a JSON pointer), never ignores.
// Enforced: type (one or an array), enum, const, properties / required / additionalProperties (false,
//   true or a schema; absent means no other properties are generated), items / minItems / maxItems,
//   anyOf, oneOf (only when its branches provably cannot overlap), allOf with one entry, $ref to
//   #/$defs/..., #/definitions/... or any JSON pointer into the document (recursion allowed), string
//   minLength / maxLength, pattern (see regex_to_gbnf.h; not together with the length bounds).
// Accepted as annotations: title, description, $schema, $id, $comment, examples, default,
//   deprecated, readOnly, writeOnly, and $defs / definitions as containers.
// Choices that keep outputs finite: JSON white space is at
//   most one space or a newline and 16 spaces/tabs between tokens; numbers have at most 16 integer
//   digits, 16 fraction digits and 3 exponent digits.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

struct SchemaError : Error {
    SchemaError(const std::string& message, std::string keyword, std::string path)
        : Error(message), keyword(std::move(keyword)), path(std::move(path)) {}
    std::string keyword;  // the schema keyword at fault
    std::string path;     // JSON pointer of the schema holding it ("" for the root)
};

// Properties are generated in the order the schema object holds them: the document's order with
// ordered_json, by name with nlohmann::json (whose objects are sorted maps).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
std::string json_schema_to_gbnf(const nlohmann::json& schema);
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema);
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::json& schema);
// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace pagoda::grammar
