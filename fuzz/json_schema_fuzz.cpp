// libFuzzer entry for the JSON-schema -> grammar compiler: the first byte chooses between the rest
// as raw JSON text (what a client sends in response_format) and a schema generated from the bytes
// out of the keywords the compiler knows; both objects' key orders (json and ordered_json) are
// compiled. The grammar then meets the matcher and the token mask as in gbnf_fuzz.
// Oracles: refusals are pagoda::Error (SchemaError); json_schema_to_gbnf's text parses as GBNF;
// the mask agrees with the matcher.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz/grammar_checks.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    FuzzedDataProvider p(data, size);
    nlohmann::ordered_json schema;
    if (p.ConsumeBool()) {
        schema = nlohmann::ordered_json::parse(p.ConsumeRandomLengthString(64 * 1024), nullptr, false);
        if (schema.is_discarded()) return 0;
    } else {
        fuzz::JsonGen gen(p);
        // As a client sends it: valid UTF-8 (invalid bytes the generator made become U+FFFD).
        schema = nlohmann::ordered_json::parse(gen.schema(5).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    const std::string input = p.ConsumeRemainingBytesAsString();
    std::shared_ptr<const grammar::Grammar> g;
    try {
        (void)grammar::compile_json_schema(nlohmann::json(schema));
        const std::string text = grammar::json_schema_to_gbnf(schema);
        g = grammar::compile_json_schema(schema);
        try {
            (void)grammar::parse_gbnf(text);
        } catch (const Error& e) {
            std::fprintf(stderr, "fuzz: json_schema_to_gbnf() text does not parse: %s\n", e.what());
            std::abort();
        }
    } catch (const Error&) {
        return 0;
    } catch (const std::exception& e) {
        fuzz::unexpected("json schema", e);
    }
    fuzz::exercise_grammar(g, input);
    return 0;
}
