// libFuzzer entry for JSON -> OpenAI request parsing, structured: the bytes drive a generator of
// request bodies with random subsets of the documented fields (response_format json_schema into the
// grammar compiler, GBNF `grammar`, tools / tool_choice, messages with tool calls...) for all three
// endpoints and /infill (with a vocabulary that has FIM tokens), and /v1/responses bodies (items, Responses tools, text.format, reasoning) through their
// translation into the chat pipeline, with a builtin chat template the bytes pick. Responses inputs
// also drive the Responses event translator with generated chat chunks. One input in five is an
// Anthropic Messages body instead (system, content blocks, tools, tool_choice, thinking,
// stop_sequences...), translated by anthropic_request.h and run through the same chat pipeline, as
// Gateway::start_messages() does. /v1/rerank and /v1/score bodies (documents as strings or text
// objects, text_1/text_2 as strings or lists, top_n, return_documents, stray fields) go through their
// parser, the rerank prompt form (a builtin chat template's, or a {query}/{document} form) and the
// tokenizer, and their responses are assembled from fuzzed yes/no logits: scores stay in [0, 1] and
// rerank results come best first.
// Chat inputs also drive the tool-call parser (every format, the generated tools typing Qwen3-Coder
// values) with a model output built from the formats' markers and the bytes, fed whole and in cuts.
// Oracle: every refusal is an ApiError with a 4xx status; nothing else may escape. The translator
// never throws, numbers its events 0, 1, 2, ..., and each item's deltas add up to the item's text.
// The tool-call parser never throws, names each call once in index order before its argument
// pieces, and gives the same content and calls whatever the cuts. The same outputs go through the
// reasoning splitters (<think> and gpt-oss's harmony), which must give the same split whatever the cuts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>

#include "core/error.h"
#include "fuzz/fuzz_support.h"
#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/rerank_prompt.h"
#include "server/rerank_response.h"
#include "server/responses_events.h"
#include "tokenizer/tokenizer.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

json anthropic_block(fuzz::JsonGen& gen, FuzzedDataProvider& p) {
    switch (p.ConsumeIntegralInRange<int>(0, 7)) {
        case 0: return {{"type", "text"}, {"text", gen.string()}};
        case 1: return {{"type", "tool_use"}, {"id", gen.string()}, {"name", gen.string()}, {"input", p.ConsumeBool() ? gen.value(2) : json::object()}};
        case 2: {
            json b = {{"type", "tool_result"}, {"tool_use_id", gen.string()}};
            b["content"] = p.ConsumeBool() ? json(gen.string()) : json::array({{{"type", "text"}, {"text", gen.string()}}});
            if (p.ConsumeBool()) b["is_error"] = gen.value(0);
            return b;
        }
        case 3: return {{"type", "thinking"}, {"thinking", gen.string()}, {"signature", ""}};
        case 4: return {{"type", "text"}, {"text", gen.string()}, {"cache_control", gen.value(1)}};
        case 5: return {{"type", gen.string()}, {gen.string(), gen.value(1)}};
        case 6:
            return {{"type", "image"},
                    {"source", {{"type", p.ConsumeBool() ? std::string("base64") : gen.string()},
                                {"media_type", gen.string()}, {"data", gen.string()}}}};
        default: return gen.value(2);
    }
}

json anthropic_body(fuzz::JsonGen& gen, FuzzedDataProvider& p) {
    json body = json::object();
    json messages = json::array();
    const int n_messages = p.ConsumeIntegralInRange<int>(0, 4);
    for (int i = 0; i < n_messages; ++i) {
        json m = {{"role", p.PickValueInArray({"user", "assistant", "system"})}};
        if (p.ConsumeBool()) m["content"] = gen.string();
        else {
            json blocks = json::array();
            const int n_blocks = p.ConsumeIntegralInRange<int>(0, 3);
            for (int j = 0; j < n_blocks; ++j) blocks.push_back(anthropic_block(gen, p));
            m["content"] = std::move(blocks);
        }
        messages.push_back(std::move(m));
    }
    body["messages"] = p.ConsumeIntegralInRange<int>(0, 15) == 0 ? gen.value(2) : messages;
    if (p.ConsumeBool()) body["max_tokens"] = p.ConsumeIntegralInRange<int>(-1, 3000);
    const int n = p.ConsumeIntegralInRange<int>(0, 8);
    for (int i = 0; i < n && p.remaining_bytes(); ++i) {
        switch (p.ConsumeIntegralInRange<int>(0, 9)) {
            case 0: body["system"] = p.ConsumeBool() ? json(gen.string()) : json::array({anthropic_block(gen, p)}); break;
            case 1: {
                json tools = json::array();
                const int k = p.ConsumeIntegralInRange<int>(0, 3);
                for (int j = 0; j < k; ++j)
                    tools.push_back(p.ConsumeBool() ? json{{"name", gen.string()}, {"input_schema", gen.schema(3)}} : gen.value(2));
                body["tools"] = std::move(tools);
                break;
            }
            case 2: {
                json choice = {{"type", p.PickValueInArray({"auto", "any", "tool", "none", "required"})}};
                if (p.ConsumeBool()) choice["name"] = gen.string();
                if (p.ConsumeBool()) choice["disable_parallel_tool_use"] = gen.value(0);
                body["tool_choice"] = std::move(choice);
                break;
            }
            case 3:
                body["thinking"] = p.ConsumeBool() ? json{{"type", "enabled"}, {"budget_tokens", p.ConsumeIntegralInRange<int>(-1, 3000)}}
                                                   : json{{"type", p.PickValueInArray({"disabled", "adaptive"})}};
                break;
            case 4: body["stop_sequences"] = p.ConsumeBool() ? json::array({gen.string()}) : gen.value(1); break;
            case 5: body[p.PickValueInArray({"temperature", "top_p", "top_k"})] = gen.number(); break;
            case 6: body["metadata"] = p.ConsumeBool() ? json{{"user_id", gen.string()}} : gen.value(1); break;
            case 7: body["model"] = p.ConsumeBool() ? json("fuzz-model") : gen.value(0); break;
            case 8: body["stream"] = gen.value(0); break;
            default: body[gen.string()] = gen.value(2); break;
        }
    }
    return body;
}

}  // namespace

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

// A model output made of the tool-call formats' markers, JSON pieces and generated text.
std::string tool_output(fuzz::JsonGen& gen, FuzzedDataProvider& p) {
    static const char* const atoms[] = {
        "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "{\"name\": \"f\", \"arguments\": ",
        "{\"name\": \"g\"", "\"parameters\": ", "{", "}", "[", "]", "\"", "\\", ",", ";", ":", " ", "\n", "null",
        "<function=f>", "<parameter=a>", "</parameter>", "</function>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
        "function<｜tool▁sep｜>f\n", "```json\n", "\n```", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>",
        "<|start|>assistant", "<|channel|>", "commentary to=functions.f ", " <|constrain|>json", "<|message|>",
        "<|call|>", "<|end|>", "<|return|>", "analysis", "final", " to=functions.g", "<think>", "</think>",
        "<|tool_call>", "<tool_call|>", "call:f", "<|\"|>", "<|channel>", "<channel|>", "thought\n"};
    std::string out;
    const int n = p.ConsumeIntegralInRange<int>(0, 24);
    for (int i = 0; i < n && p.remaining_bytes(); ++i) {
        switch (p.ConsumeIntegralInRange<int>(0, 3)) {
            case 0: out += gen.string(); break;
            case 1: out += gen.value(2).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); break;
            default: out += atoms[p.ConsumeIntegralInRange<size_t>(0, std::size(atoms) - 1)];
        }
    }
    return out;
}

void check_tool_calls(fuzz::JsonGen& gen, FuzzedDataProvider& p) {
    const auto format = p.PickValueInArray({chat::ToolCallFormat::hermes, chat::ToolCallFormat::llama3_json,
                                            chat::ToolCallFormat::mistral, chat::ToolCallFormat::qwen3_coder,
                                            chat::ToolCallFormat::deepseek_v3, chat::ToolCallFormat::harmony,
                                            chat::ToolCallFormat::gemma4});
    const nlohmann::json tools = p.ConsumeBool() ? gen.tools() : nlohmann::json();
    const std::string text = tool_output(gen, p);
    const chat::ParsedToolCalls whole = chat::parse_tool_calls(text, format, tools);
    chat::ToolCallParser parser(format, tools);
    chat::ParsedToolCalls streamed;
    auto add = [&](const chat::ToolCallParts& part) {
        streamed.content += part.content;
        for (const auto& d : part.calls) {
            const bool starts = !d.name.empty();
            if (d.index + (starts ? 0 : 1) != streamed.calls.size() || d.content_offset > part.content.size()) std::abort();
            chat::collect_tool_calls(streamed.calls, {d});
        }
    };
    for (size_t at = 0; at < text.size();) {
        const size_t n = p.remaining_bytes() ? p.ConsumeIntegralInRange<size_t>(1, 8) : text.size() - at;
        add(parser.feed(std::string_view(text).substr(at, n)));
        at += std::min(n, text.size() - at);
    }
    add(parser.finish());
    bool same = streamed.content == whole.content && streamed.calls.size() == whole.calls.size();
    for (size_t i = 0; same && i < whole.calls.size(); ++i)
        same = streamed.calls[i].name == whole.calls[i].name && streamed.calls[i].arguments == whole.calls[i].arguments;
    if (!same) {
        std::fprintf(stderr, "fuzz: streamed tool calls differ from the whole parse (%s): %s\n",
                     chat::tool_call_format_name(format), text.c_str());
        std::abort();
    }
}

// The reasoning splitters (<think>, Gemma 4's channel and harmony) on the same outputs: never throw, and give the same
// reasoning and content whatever the cuts; harmony's content then goes through its tool-call parser.
void check_reasoning_split(fuzz::JsonGen& gen, FuzzedDataProvider& p) {
    const auto format = p.PickValueInArray({chat::ReasoningFormat::deepseek, chat::ReasoningFormat::harmony,
                                            chat::ReasoningFormat::gemma4});
    const bool open = p.ConsumeBool();
    const std::string text = tool_output(gen, p);
    chat::ReasoningSplitter whole_splitter(format, open), splitter(format, open);
    chat::ReasoningParts whole = whole_splitter.feed(text), rest = whole_splitter.finish();
    whole.reasoning += rest.reasoning;
    whole.content += rest.content;
    chat::ReasoningParts streamed;
    auto add = [&](const chat::ReasoningParts& part) {
        streamed.reasoning += part.reasoning;
        streamed.content += part.content;
    };
    for (size_t at = 0; at < text.size();) {
        const size_t n = p.remaining_bytes() ? p.ConsumeIntegralInRange<size_t>(1, 8) : text.size() - at;
        add(splitter.feed(std::string_view(text).substr(at, n)));
        at += std::min(n, text.size() - at);
    }
    add(splitter.finish());
    if (streamed.reasoning != whole.reasoning || streamed.content != whole.content) {
        std::fprintf(stderr, "fuzz: streamed reasoning split differs from the whole (%d): %s\n", int(format), text.c_str());
        std::abort();
    }
    if (format == chat::ReasoningFormat::harmony) (void)chat::parse_tool_calls(whole.content, chat::ToolCallFormat::harmony);
}

json rerank_text_list(fuzz::JsonGen& gen, FuzzedDataProvider& p, bool objects) {
    if (p.ConsumeIntegralInRange<int>(0, 7) == 0) return gen.value(2);
    if (!objects && p.ConsumeBool()) return gen.string();
    json list = json::array();
    const int n = p.ConsumeIntegralInRange<int>(0, 5);
    for (int i = 0; i < n; ++i) {
        if (objects && p.ConsumeBool()) {
            json doc = {{"text", gen.string()}};
            if (p.ConsumeIntegralInRange<int>(0, 7) == 0) doc[gen.string()] = gen.value(1);
            list.push_back(std::move(doc));
        } else {
            list.push_back(gen.string());
        }
    }
    return list;
}

json rerank_body(fuzz::JsonGen& gen, FuzzedDataProvider& p, bool score) {
    json body = json::object();
    if (p.ConsumeBool()) body["model"] = p.ConsumeBool() ? json(gen.string()) : gen.value(0);
    if (score) {
        if (p.ConsumeIntegralInRange<int>(0, 9) != 0) body["text_1"] = rerank_text_list(gen, p, false);
        if (p.ConsumeIntegralInRange<int>(0, 9) != 0) body["text_2"] = rerank_text_list(gen, p, false);
    } else {
        if (p.ConsumeIntegralInRange<int>(0, 9) != 0) body["query"] = p.ConsumeBool() ? json(gen.string()) : gen.value(1);
        if (p.ConsumeIntegralInRange<int>(0, 9) != 0) body["documents"] = rerank_text_list(gen, p, true);
        if (p.ConsumeBool()) body["top_n"] = p.ConsumeBool() ? json(p.ConsumeIntegralInRange<int64_t>(-2, 8)) : gen.value(0);
        if (p.ConsumeBool()) body["return_documents"] = p.ConsumeBool() ? json(p.ConsumeBool()) : gen.value(0);
    }
    if (p.ConsumeIntegralInRange<int>(0, 7) == 0) {
        const auto& fields = rerank_request_fields();
        body[std::string(fields[p.ConsumeIntegralInRange<size_t>(0, fields.size() - 1)].name)] = gen.value(1);
    }
    if (p.ConsumeIntegralInRange<int>(0, 15) == 0) body[gen.string()] = gen.value(1);
    return body;
}

// As Gateway::start_rerank does up to the engine, then the response from fuzzed logits.
void run_rerank_pipeline(const json& body, bool score, const chat::ChatTemplate* tmpl, FuzzedDataProvider& p) {
    const RerankParams params = score ? parse_score_request(body) : parse_rerank_request(body);
    std::optional<RerankPrompt> form;
    try {
        if (tmpl) form = RerankPrompt::from_chat_template(*tmpl, "<s>", "</s>");
    } catch (const Error&) {
        // A template that cannot render the instruction: the gateway refuses rerank with its reason.
    }
    if (!form) form = RerankPrompt::from_form("q: {query} d: {document} {x}", "fuzz");
    const RerankPrompt& prompt = *form;
    RerankAssembler a("m", "rerank-x", 0, params);
    for (size_t i = 0; i < params.pairs.size(); ++i) {
        const std::vector<int32_t> ids = prompt.tokenize(*fuzz::small_tokenizer(), params.pairs[i].query, params.pairs[i].document);
        engine::Delta d;
        d.finish_reason = engine::FinishReason::stop;
        d.request_done = true;
        d.usage.prompt_tokens = int64_t(ids.size());
        d.token_logits = {p.ConsumeFloatingPointInRange<float>(-1e4f, 1e4f), p.ConsumeFloatingPointInRange<float>(-1e4f, 1e4f)};
        a.add(i, d);
    }
    if (!a.done()) fuzz::unexpected("rerank", std::runtime_error("the assembler is not done after every pair"));
    const json r = a.response();
    double previous = 2;
    for (const json& item : score ? r.at("data") : r.at("results")) {
        const double s = item.at(score ? "score" : "relevance_score").get<double>();
        if (!(s >= 0 && s <= 1)) fuzz::unexpected("rerank", std::runtime_error("a score outside [0, 1]"));
        if (!score && s > previous) fuzz::unexpected("rerank", std::runtime_error("results not best first"));
        previous = s;
    }
    (void)dump_json(r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider p(data, size);
    fuzz::JsonGen gen(p);
    const auto& templates = fuzz::builtin_templates();
    const chat::ChatTemplate* tmpl = p.ConsumeIntegralInRange<int>(0, 15) == 0
                                         ? nullptr
                                         : &templates[p.ConsumeIntegralInRange<size_t>(0, templates.size() - 1)];
    const bool anthropic = p.ConsumeIntegralInRange<int>(0, 4) == 0;
    const Endpoint endpoint =
        anthropic ? Endpoint::chat_completions
                  : p.PickValueInArray({Endpoint::completions, Endpoint::chat_completions, Endpoint::embeddings,
                                        Endpoint::responses, Endpoint::infill, Endpoint::rerank, Endpoint::score});
    const bool rerank = endpoint == Endpoint::rerank || endpoint == Endpoint::score;
    const nlohmann::json body = anthropic                          ? anthropic_body(gen, p)
                                : endpoint == Endpoint::responses ? gen.responses_body()
                                : rerank                          ? rerank_body(gen, p, endpoint == Endpoint::score)
                                                                  : gen.request_body(endpoint);
    try {
        if (anthropic) {
            const nlohmann::json parsed = parse_json_body(dump_json(body));
            const MessagesRoute route = p.ConsumeBool() ? MessagesRoute::messages : MessagesRoute::count_tokens;
            const AnthropicRequest request = translate_anthropic_request(parsed, route);
            try {
                fuzz::run_completion_pipeline(request.chat_body, Endpoint::chat_completions, tmpl, fuzz::small_tokenizer());
            } catch (const ApiError& e) {
                (void)request.param(e.param);  // as Gateway::start_messages names the field
                throw;
            }
            return 0;
        }
        // The server receives the body as bytes: round-trip it as http_session.cpp would parse it.
        const nlohmann::json parsed = parse_json_body(dump_json(body));
        if (rerank) run_rerank_pipeline(parsed, endpoint == Endpoint::score, tmpl, p);
        else if (endpoint == Endpoint::embeddings) fuzz::run_embedding_pipeline(parsed, fuzz::small_tokenizer());
        else if (endpoint == Endpoint::responses) fuzz::run_responses_pipeline(parsed, tmpl, fuzz::small_tokenizer());
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
    if (endpoint == Endpoint::chat_completions) {
        try {
            check_tool_calls(gen, p);
            check_reasoning_split(gen, p);
        } catch (const std::exception& e) {
            fuzz::unexpected("tool-call parser", e);
        }
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
