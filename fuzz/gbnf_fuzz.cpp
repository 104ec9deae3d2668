// libFuzzer entry for the GBNF parser, the grammar compiler, the matcher and the token mask: the
// text is a grammar (the part before the first NUL byte) and the bytes after it are fed to the
// matcher; masks over stories260K's vocabulary are computed along the way.
// Oracles: refusals are pagoda::Error; to_gbnf() of a compiled grammar parses again; every token
// a mask allows is accepted by the matcher from that state (checked for a sample of tokens).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "fuzz/grammar_checks.h"
#include "grammar/gbnf_parser.h"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* begin = reinterpret_cast<const char*>(data);
    const char* nul = static_cast<const char*>(std::memchr(begin, 0, size));
    const std::string_view text(begin, nul ? size_t(nul - begin) : size);
    const std::string_view input = nul ? std::string_view(nul + 1, size - text.size() - 1) : std::string_view();
    std::shared_ptr<const grammar::Grammar> g;
    try {
        g = grammar::parse_gbnf(text);
    } catch (const Error&) {
        return 0;
    } catch (const std::exception& e) {
        fuzz::unexpected("gbnf parse", e);
    }
    try {
        (void)grammar::parse_gbnf(g->to_gbnf());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz: to_gbnf() of a compiled grammar does not parse: %s\n%s\n", e.what(), g->to_gbnf().c_str());
        std::abort();
    }
    fuzz::exercise_grammar(g, input);
    return 0;
}
