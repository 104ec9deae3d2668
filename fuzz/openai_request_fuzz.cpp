// libFuzzer entry for JSON -> OpenAI request parsing, structured: the bytes drive a generator of
// request bodies with random subsets of the documented fields (response_format json_schema into the
// grammar compiler, GBNF `grammar`, tools / tool_choice, messages with tool calls...) for all three
// endpoints, and /v1/responses bodies (items, Responses tools, text.format, reasoning) through their
// translation into the chat pipeline, with a builtin chat template the bytes pick. Responses inputs
// also drive the Responses event translator with generated chat chunks.
// Oracle: every refusal is an ApiError with a 4xx status; nothing else may escape. The translator
// never throws, numbers its events 0, 1, 2, ..., and each item's deltas add up to the item's text.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "fuzz/fuzz_support.h"
#include "server/api_error.h"
#include "server/responses_events.h"

using namespace pagoda;
using namespace pagoda::server;

namespace {

// Generated chat chunks through a ResponsesStream: the events' invariants.
void check_events(fuzz::JsonGen& gen, FuzzedDataProvider& p) {
    ResponsesContext ctx;
    ctx.id = "resp_fuzz";
    if (p.ConsumeBool()) ctx.reasoning_summary = "auto";
    ResponsesStream stream(ctx);
    std::vector<nlohmann::json> events = stream.opening();
    const int n = p.ConsumeIntegralInRange<int>(0, 12);
    for (int i = 0; i < n && p.remaining_bytes(); ++i)
        for (auto& e : stream.feed(gen.chat_chunk())) events.push_back(std::move(e));
    std::optional<std::string> error;
    if (p.ConsumeIntegralInRange<int>(0, 5) == 0) error = "failed";
    for (auto& e : stream.close({{"prompt_tokens", 3}, {"completion_tokens", 4}}, error)) events.push_back(std::move(e));
    std::map<std::string, std::string> text;  // item id -> its deltas, concatenated
    for (size_t i = 0; i < events.size(); ++i) {
        if (events[i]["sequence_number"] != i) std::abort();
        if (events[i].contains("delta")) text[events[i]["item_id"].get<std::string>()] += events[i]["delta"].get<std::string>();
        (void)responses_sse(events[i]);
    }
    for (const auto& item : stream.output()) {
        std::string whole;
        if (item["type"] == "function_call") whole = item["arguments"];
        else if (item["type"] == "message") whole = item["content"][0]["text"];
        else whole = item.contains("content") ? item["content"][0]["text"] : item["summary"][0]["text"];
        if (whole != text[item["id"].get<std::string>()]) std::abort();
    }
    if (events.back()["response"] != stream.response()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider p(data, size);
    fuzz::JsonGen gen(p);
    const auto& templates = fuzz::builtin_templates();
    const chat::ChatTemplate* tmpl = p.ConsumeIntegralInRange<int>(0, 15) == 0
                                         ? nullptr
                                         : &templates[p.ConsumeIntegralInRange<size_t>(0, templates.size() - 1)];
    const Endpoint endpoint =
        p.PickValueInArray({Endpoint::completions, Endpoint::chat_completions, Endpoint::embeddings, Endpoint::responses});
    const nlohmann::json body = endpoint == Endpoint::responses ? gen.responses_body() : gen.request_body(endpoint);
    try {
        // The server receives the body as bytes: round-trip it as http_session.cpp would parse it.
        const nlohmann::json parsed = parse_json_body(dump_json(body));
        if (endpoint == Endpoint::embeddings) fuzz::run_embedding_pipeline(parsed, fuzz::small_tokenizer());
        else if (endpoint == Endpoint::responses) fuzz::run_responses_pipeline(parsed, tmpl, fuzz::small_tokenizer());
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
    if (endpoint == Endpoint::responses) {
        try {
            check_events(gen, p);
        } catch (const std::exception& e) {
            fuzz::unexpected("responses events", e);
        }
    }
    return 0;
}
