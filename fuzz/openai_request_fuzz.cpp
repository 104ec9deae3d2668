// libFuzzer entry for JSON -> OpenAI request parsing, structured: the bytes drive a generator of
// request bodies with random subsets of the documented fields (response_format json_schema into the
// grammar compiler, GBNF `grammar`, tools / tool_choice, messages with tool calls...) for all three
// endpoints and /infill (with a vocabulary that has FIM tokens), run through the gateway's pipeline with a builtin chat template the bytes pick.
// Oracle: every refusal is an ApiError with a 4xx status; nothing else may escape.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "server/api_error.h"

using namespace pagoda;
using namespace pagoda::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider p(data, size);
    fuzz::JsonGen gen(p);
    const auto& templates = fuzz::builtin_templates();
    const chat::ChatTemplate* tmpl = p.ConsumeIntegralInRange<int>(0, 15) == 0
                                         ? nullptr
                                         : &templates[p.ConsumeIntegralInRange<size_t>(0, templates.size() - 1)];
    const Endpoint endpoint =
        p.PickValueInArray({Endpoint::completions, Endpoint::chat_completions, Endpoint::embeddings, Endpoint::infill});
    const nlohmann::json body = gen.request_body(endpoint);
    try {
        // The server receives the body as bytes: round-trip it as http_session.cpp would parse it.
        const nlohmann::json parsed = parse_json_body(dump_json(body));
        if (endpoint == Endpoint::embeddings) fuzz::run_embedding_pipeline(parsed, fuzz::small_tokenizer());
        else if (endpoint == Endpoint::infill) fuzz::run_completion_pipeline(parsed, endpoint, tmpl, fuzz::fim_tokenizer());
        else fuzz::run_completion_pipeline(parsed, endpoint, tmpl, fuzz::small_tokenizer());
    } catch (const ApiError& e) {
        if (e.status < 400 || e.status >= 500) {
            std::fprintf(stderr, "fuzz: refusal with status %d: %s\n", e.status, e.what());
            std::abort();
        }
        (void)dump_json(e.body());
    } catch (const std::exception& e) {
        fuzz::unexpected("openai request", e);
    }
    return 0;
}
