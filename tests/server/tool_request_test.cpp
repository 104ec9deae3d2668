// Tool calling on the server side: tools / tool_choice / parallel_tool_calls / tool messages
// validation, the forced-call grammar of each format (accepts calls whose arguments fit the schema,
// and only those), template rendering of tools and tool calls, and the response assembler turning
// output into tool_calls with streaming pieces that add up to the whole response.
#include "server/tool_request.h"

#include <gtest/gtest.h>
#include <random>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/anthropic_response.h"
#include "server/openai_response.h"
#include "server/responses_events.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "noop"}}
])");

json chat_body(json extra) {
    json b = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"tools", kTools}};
    if (extra.is_object()) b.update(extra);
    return b;
}

ApiError error_of(const json& body, const chat::ChatTemplate* tmpl = nullptr) {
    try {
        CompletionParams p = parse_completion_request(body, Endpoint::chat_completions);
        if (tmpl) apply_tools(p, tmpl);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}

bool accepts(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
    grammar::Matcher m(g);
    return m.accept(text) && m.can_end();
}

}  // namespace

TEST(ToolRequest, ParsesToolChoice) {
    auto p = parse_completion_request(chat_body({}), Endpoint::chat_completions);
    EXPECT_EQ(p.tool_choice, ToolChoice::automatic);
    EXPECT_TRUE(p.parallel_tool_calls);
    p = parse_completion_request(chat_body({{"tool_choice", "required"}, {"parallel_tool_calls", false}}),
                                 Endpoint::chat_completions);
    EXPECT_EQ(p.tool_choice, ToolChoice::required);
    EXPECT_FALSE(p.parallel_tool_calls);
    p = parse_completion_request(chat_body({{"tool_choice", {{"type", "function"}, {"function", {{"name", "noop"}}}}}}),
                                 Endpoint::chat_completions);
    EXPECT_EQ(p.tool_choice, ToolChoice::function);
    EXPECT_EQ(p.tool_choice_function, "noop");
    p = parse_completion_request(chat_body({{"tool_choice", "none"}}), Endpoint::chat_completions);
    EXPECT_EQ(p.tool_choice, ToolChoice::none);
}

TEST(ToolRequest, RefusesBadToolFields) {
    struct Case {
        json body;
        std::string param;
    } cases[] = {
        {chat_body({{"tools", {{{"type", "retrieval"}}}}}), "tools[0].type"},
        {chat_body({{"tools", {{{"type", "function"}}}}}), "tools[0].function"},
        {chat_body({{"tools", {{{"type", "function"}, {"function", {{"name", "has space"}}}}}}}), "tools[0].function.name"},
        {chat_body({{"tools", {{{"type", "function"}, {"function", {{"name", "a"}, {"parameters", "x"}}}}}}}),
         "tools[0].function.parameters"},
        {chat_body({{"tools", {kTools[1], kTools[1]}}}), "tools[1].function.name"},
        {chat_body({{"tools", "x"}}), "tools"},
        {chat_body({{"tool_choice", "always"}}), "tool_choice"},
        {chat_body({{"tool_choice", 3}}), "tool_choice"},
        {chat_body({{"tool_choice", {{"type", "function"}, {"function", {{"name", "missing"}}}}}}), "tool_choice"},
        {json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tool_choice", "required"}}, "tool_choice"},
        {chat_body({{"parallel_tool_calls", "yes"}}), "parallel_tool_calls"},
        {chat_body({{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}), "tool_choice"},
        {chat_body({{"messages", {{{"role", "tool"}, {"content", "sunny"}}}}}), "messages[0].tool_call_id"},
        {chat_body({{"messages", {{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array()}}}}}),
         "messages[0].tool_calls"},
        {chat_body({{"messages", {{{"role", "assistant"}, {"content", nullptr},
                                   {"tool_calls", {{{"id", "c"}, {"function", {{"name", "f"}, {"arguments", {{"a", 1}}}}}}}}}}}}),
         "messages[0].tool_calls[0].function.arguments"},
        {chat_body({{"chat_template_kwargs", {{"messages", 1}}}}), "chat_template_kwargs.messages"},
        {chat_body({{"chat_template_kwargs", "x"}}), "chat_template_kwargs"},
    };
    for (const auto& c : cases) {
        ApiError e = error_of(c.body);
        EXPECT_EQ(e.status, 400) << c.body.dump();
        EXPECT_EQ(e.param, c.param) << c.body.dump();
    }
}

TEST(ToolRequest, TemplatesWithoutToolsAndUnenforceableSchemasAreRefused) {
    const auto llama2 = chat::ChatTemplate::builtin("llama2");
    ApiError e = error_of(chat_body({}), &llama2);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "tools");
    const auto chatml = chat::ChatTemplate::builtin("chatml");
    json tools = {{{"type", "function"},
                   {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"minimum", 3}}}}}}}}}}};
    e = error_of(chat_body({{"tools", tools}, {"tool_choice", "required"}}), &chatml);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "tools[0].function.parameters");
    EXPECT_EQ(e.code, "unsupported_parameter");
    // Not forced: nothing is enforced, so nothing is refused.
    EXPECT_EQ(error_of(chat_body({{"tools", tools}}), &chatml).status, 0);
}

TEST(ToolRequest, ForcedGrammarsAcceptOnlyCallsThatFitTheSchema) {
    using F = chat::ToolCallFormat;
    auto g = tool_call_grammar(F::hermes, kTools, "", true);
    EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
    EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                           "\"get_weather\", \"arguments\": {\"city\": \"x\", \"days\": 3}}\n</tool_call>"));
    EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>"));
    EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(accepts(g, "hello"));

    g = tool_call_grammar(F::hermes, kTools, "get_weather", false);
    EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\"}}\n</tool_call>\n"
                            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"b\"}}\n</tool_call>"));

    g = tool_call_grammar(F::mistral, kTools, "", true);
    EXPECT_TRUE(accepts(g, R"([{"name": "noop", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "x"}}])"));
    g = tool_call_grammar(F::llama3_json, kTools, "get_weather", false);
    EXPECT_TRUE(accepts(g, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
    EXPECT_FALSE(accepts(g, R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));
}

TEST(ToolRequest, ChatmlRendersToolsAndToolCallsHermesStyle) {
    const auto chatml = chat::ChatTemplate::builtin("chatml");
    const json messages = json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null,
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    ])");
    chat::ChatRenderOptions ro;
    ro.tools = kTools;
    const std::string text = chatml.render(messages, ro);
    EXPECT_NE(text.find("<|im_start|>system\nBe brief.\n\n# Tools"), std::string::npos) << text;
    EXPECT_NE(text.find("\"name\": \"get_weather\", \"parameters\""), std::string::npos) << text;
    EXPECT_NE(text.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                        "\"Paris\"}}\n</tool_call><|im_end|>"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>"), std::string::npos) << text;
    EXPECT_EQ(text.find("Be brief.<|im_end|>"), std::string::npos) << "the system message is merged into the tools block";
    // Without tools, chatml is unchanged.
    EXPECT_EQ(chatml.render(json::parse(R"([{"role": "user", "content": "hi"}])"), chat::ChatRenderOptions{}),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

namespace {

engine::Delta delta(std::string text, bool last = false) {
    engine::Delta d;
    d.text = std::move(text);
    if (last) {
        d.finish_reason = engine::FinishReason::stop;
        d.request_done = true;
    }
    return d;
}

// `text` cut into pieces of 1 to 7 bytes (UTF-8 sequences and tags split anywhere).
std::vector<std::string> random_pieces(const std::string& text, std::mt19937& rng) {
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
        const size_t n = 1 + rng() % 7;
        pieces.push_back(text.substr(i, n));
        i += n;
    }
    return pieces;
}

// Streams `pieces` through an assembler; returns {response, reassembled message from the chunks}.
std::pair<json, json> run(ResponseContext ctx, const std::vector<std::string>& pieces) {
    ResponseAssembler a(ctx, 1);
    json msg = {{"content", ""}, {"reasoning_content", ""}, {"tool_calls", json::array()}};
    std::string finish;
    for (size_t i = 0; i < pieces.size(); ++i)
        for (const json& chunk : a.add(0, delta(pieces[i], i + 1 == pieces.size()))) {
            const json& ch = chunk["choices"][0];
            const json& d = ch["delta"];
            if (d.contains("content")) msg["content"] = msg["content"].get<std::string>() + d["content"].get<std::string>();
            if (d.contains("reasoning_content"))
                msg["reasoning_content"] = msg["reasoning_content"].get<std::string>() + d["reasoning_content"].get<std::string>();
            if (d.contains("tool_calls"))
                for (const auto& tc : d["tool_calls"]) {
                    if (tc.contains("id")) {  // a call's first delta: OpenAI's whole header
                        EXPECT_EQ(tc["type"], "function");
                        EXPECT_TRUE(tc["function"]["name"].is_string());
                        EXPECT_TRUE(tc["function"]["arguments"].is_string());
                        EXPECT_EQ(tc["index"], msg["tool_calls"].size());
                        msg["tool_calls"].push_back(tc);
                        continue;
                    }
                    EXPECT_EQ(tc.size(), 2u) << tc.dump() << ": later deltas carry index and arguments only";
                    json& call = msg["tool_calls"].at(tc["index"].get<size_t>());
                    call["function"]["arguments"] =
                        call["function"]["arguments"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
                }
            if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        }
    msg["finish_reason"] = finish;
    return {a.response(), msg};
}

}  // namespace

TEST(ToolResponse, CallsAndReasoningStreamToWhatTheResponseHolds) {
    ResponseContext ctx{.endpoint = Endpoint::chat_completions, .id = "chatcmpl-t", .created = 1, .model = "m"};
    ctx.split_reasoning = true;
    ctx.tool_format = chat::ToolCallFormat::hermes;
    const std::string out =
        "<think>need weather</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
    std::mt19937 rng(3);
    for (int iter = 0; iter < 50; ++iter) {
        auto [response, streamed] = run(ctx, random_pieces(out, rng));
        const json& m = response["choices"][0]["message"];
        EXPECT_EQ(m["content"], "Checking.");
        EXPECT_EQ(m["reasoning_content"], "need weather");
        ASSERT_EQ(m["tool_calls"].size(), 2u);
        EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
        EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
        EXPECT_EQ(m["tool_calls"][0]["type"], "function");
        EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
        EXPECT_EQ(streamed["content"], m["content"]);
        EXPECT_EQ(streamed["reasoning_content"], m["reasoning_content"]);
        EXPECT_EQ(streamed["finish_reason"], "tool_calls");
        ASSERT_EQ(streamed["tool_calls"].size(), 2u);
        for (size_t k = 0; k < 2; ++k) {
            EXPECT_EQ(streamed["tool_calls"][k]["index"], k);
            EXPECT_EQ(streamed["tool_calls"][k]["id"], m["tool_calls"][k]["id"]);
            EXPECT_EQ(streamed["tool_calls"][k]["function"], m["tool_calls"][k]["function"]);
        }
    }
    // Not parallel: the first call only.
    ctx.parallel_tool_calls = false;
    auto [response, streamed] = run(ctx, {out});
    EXPECT_EQ(response["choices"][0]["message"]["tool_calls"].size(), 1u);
    // Only calls: content is null.
    auto [r2, s2] = run(ctx, {"<tool_call>{\"name\": \"noop\"}</tool_call>"});
    EXPECT_TRUE(r2["choices"][0]["message"]["content"].is_null());
    EXPECT_FALSE(r2["choices"][0]["message"].contains("reasoning_content"));
}

// MiniMax-M2: the prompt ends with <think>\n (reasoning_open), the reasoning closes, then content and
// two calls in one <minimax:tool_call> block, values typed by the tools' schemas; streamed in random
// pieces the chunks add up to the response.
TEST(ToolResponse, MinimaxReasoningAndCallsStreamToWhatTheResponseHolds) {
    ResponseContext ctx{.endpoint = Endpoint::chat_completions, .id = "chatcmpl-t", .created = 1, .model = "m"};
    ctx.split_reasoning = true;
    ctx.reasoning_open = true;
    ctx.tool_format = chat::ToolCallFormat::minimax_m2;
    ctx.tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}, {"type": "function", "function": {"name": "noop"}}])");
    const std::string out =
        "The user wants weather.\n</think>\n\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
        "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">2</parameter>\n</invoke>\n"
        "<invoke name=\"noop\">\n</invoke>\n</minimax:tool_call>";
    std::mt19937 rng(5);
    for (int iter = 0; iter < 50; ++iter) {
        auto [response, streamed] = run(ctx, random_pieces(out, rng));
        const json& m = response["choices"][0]["message"];
        EXPECT_EQ(m["content"], "Checking.");
        EXPECT_EQ(m["reasoning_content"], "The user wants weather.\n");
        ASSERT_EQ(m["tool_calls"].size(), 2u);
        EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
        EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris","days":2})");
        EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "noop");
        EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], "{}");
        EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
        EXPECT_EQ(streamed["content"], m["content"]);
        EXPECT_EQ(streamed["reasoning_content"], m["reasoning_content"]);
        ASSERT_EQ(streamed["tool_calls"].size(), 2u);
        for (size_t k = 0; k < 2; ++k) EXPECT_EQ(streamed["tool_calls"][k]["function"], m["tool_calls"][k]["function"]);
    }
}

namespace {

const json kXmlTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object", "properties": {"unit": {"enum": ["C", "F"]}}}},
     "required": ["city"]}}},
  {"type": "function", "function": {"name": "noop"}}
])");

// A forced call: the grammar accepts it, and the parser reads back the name and arguments.
void expect_forced(chat::ToolCallFormat format, const std::string& only, bool parallel, const std::string& text,
                   const std::vector<std::pair<std::string, std::string>>& calls) {
    const auto g = tool_call_grammar(format, kXmlTools, only, parallel);
    EXPECT_TRUE(accepts(g, text)) << text;
    const chat::ParsedToolCalls r = chat::parse_tool_calls(text, format, kXmlTools);
    EXPECT_EQ(r.content, "") << text;
    ASSERT_EQ(r.calls.size(), calls.size()) << text;
    for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(r.calls[i].name, calls[i].first);
        EXPECT_EQ(r.calls[i].arguments, calls[i].second);
    }
}

}  // namespace

TEST(ToolRequest, ForcedGrammarsOfTheTaggedFormats) {
    using F = chat::ToolCallFormat;
    // Qwen3-Coder: XML parameters, typed by the schema (the required city always, the others optional).
    expect_forced(F::qwen3_coder, "", true,
                  "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
                  "</parameter>\n<parameter=opts>\n{\"unit\": \"F\"}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
                  "<function=noop>\n</function>\n</tool_call>",
                  {{"get_weather", R"({"city":"Paris","days":3,"opts":{"unit":"F"}})"}, {"noop", "{}"}});
    auto g = tool_call_grammar(F::qwen3_coder, kXmlTools, "get_weather", false);
    EXPECT_FALSE(accepts(g, "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"))
        << "city is required";
    EXPECT_FALSE(accepts(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n<parameter=days>\n"
                            "three\n</parameter>\n</function>\n</tool_call>"))
        << "days is an integer";
    EXPECT_FALSE(accepts(g, "<tool_call>\n<function=noop>\n</function>\n</tool_call>"));
    const json enum_tools = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"unit": {"type": "string", "enum": ["C", "F"]}}, "required": ["unit"]}}}])");
    g = tool_call_grammar(F::qwen3_coder, enum_tools, "", false);
    EXPECT_TRUE(accepts(g, "<tool_call>\n<function=f>\n<parameter=unit>\nF\n</parameter>\n</function>\n</tool_call>"));
    EXPECT_FALSE(accepts(g, "<tool_call>\n<function=f>\n<parameter=unit>\nK\n</parameter>\n</function>\n</tool_call>"))
        << "a string enum is enforced";

    // MiniMax-M2: the same typed parameters as <parameter name="P">VALUE</parameter>, a block a call.
    expect_forced(F::minimax_m2, "", true,
                  "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
                  "<parameter name=\"days\">3</parameter>\n<parameter name=\"opts\">{\"unit\": \"F\"}</parameter>\n"
                  "</invoke>\n</minimax:tool_call>\n<minimax:tool_call>\n<invoke name=\"noop\">\n</invoke>\n</minimax:tool_call>",
                  {{"get_weather", R"({"city":"Paris","days":3,"opts":{"unit":"F"}})"}, {"noop", "{}"}});
    g = tool_call_grammar(F::minimax_m2, kXmlTools, "get_weather", false);
    EXPECT_FALSE(accepts(g, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"days\">3</parameter>\n"
                            "</invoke>\n</minimax:tool_call>"))
        << "city is required";
    EXPECT_FALSE(accepts(g, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">x</parameter>\n"
                            "<parameter name=\"days\">three</parameter>\n</invoke>\n</minimax:tool_call>"))
        << "days is an integer";

    expect_forced(F::deepseek_v3, "", true,
                  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```"
                  "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>noop\n```json\n{}\n```<｜tool▁call▁end｜>"
                  "<｜tool▁calls▁end｜>",
                  {{"get_weather", R"({"city":"Oslo"})"}, {"noop", "{}"}});
    g = tool_call_grammar(F::deepseek_v3, kXmlTools, "noop", false);
    EXPECT_FALSE(accepts(g, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                            "{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"));

    expect_forced(F::harmony, "get_weather", false,
                  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\", \"days\": 2}<|call|>",
                  {{"get_weather", R"({"city":"Rome","days":2})"}});
    expect_forced(F::harmony, "", true,
                  "<|channel|>commentary to=functions.noop <|constrain|>json<|message|>{}<|call|><|start|>assistant"
                  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"x\"}<|call|>",
                  {{"noop", "{}"}, {"get_weather", R"({"city":"x"})"}});
    // Gemma 4: the forced arguments are JSON, which its parser reads beside Gemma's own notation.
    expect_forced(F::gemma4, "", true,
                  "<|tool_call>call:get_weather{\"city\": \"Oslo\", \"days\": 4}<tool_call|><|tool_call>call:noop{}<tool_call|>",
                  {{"get_weather", R"({"city":"Oslo","days":4})"}, {"noop", "{}"}});
    g = tool_call_grammar(F::gemma4, kXmlTools, "get_weather", false);
    EXPECT_FALSE(accepts(g, "<|tool_call>call:get_weather{}<tool_call|>")) << "city is required";
    g = tool_call_grammar(F::harmony, kXmlTools, "", true);
    EXPECT_FALSE(accepts(g, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>"))
        << "city is required";
}

// Token-size pieces through the assembler, then through the Responses and Messages translators: the
// arguments arrive as several deltas in each API, and add up to the final arguments.
TEST(ToolResponse, ArgumentsStreamAsDeltasInEveryApi) {
    using F = chat::ToolCallFormat;
    const std::pair<F, std::string> outputs[] = {
        {F::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 10}}\n</tool_call>"},
        {F::qwen3_coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n10\n"
                         "</parameter>\n</function>\n</tool_call>"},
        {F::deepseek_v3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
                         "\"Paris\", \"days\": 10}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
        {F::harmony, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", "
                     "\"days\": 10}<|call|>"},
        {F::gemma4, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:10}<tool_call|>"},
        {F::minimax_m2, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
                        "<parameter name=\"days\">10</parameter>\n</invoke>\n</minimax:tool_call>"},
    };
    for (const auto& [format, out] : outputs) {
        ResponseContext ctx{.endpoint = Endpoint::chat_completions, .id = "chatcmpl-t", .created = 1, .model = "m"};
        ctx.tool_format = format;
        ctx.tools = kXmlTools;
        ResponseAssembler a(ctx, 1);
        ResponsesStream responses(ResponsesContext{.id = "resp_t", .model = "m"});
        MessageBuilder messages("msg_t", "m", 1);
        size_t chat_pieces = 0, responses_pieces = 0, anthropic_pieces = 0;
        std::string responses_args, anthropic_args;
        for (size_t i = 0; i < out.size(); i += 4) {
            for (const json& chunk : a.add(0, delta(out.substr(i, 4), i + 4 >= out.size()))) {
                for (const json& tc : chunk["choices"][0]["delta"].value("tool_calls", json::array()))
                    chat_pieces += !tc["function"]["arguments"].get<std::string>().empty();
                for (const json& e : responses.feed(chunk))
                    if (e["type"] == "response.function_call_arguments.delta") {
                        ++responses_pieces;
                        responses_args += e["delta"].get<std::string>();
                    }
                for (const json& e : messages.add_chunk(chunk))
                    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "input_json_delta") {
                        ++anthropic_pieces;
                        anthropic_args += e["delta"]["partial_json"].get<std::string>();
                    }
            }
        }
        const json response = a.response();
        const std::string args = response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
        const char* name = chat::tool_call_format_name(format);
        EXPECT_EQ(json::parse(args), json::parse(R"({"city": "Paris", "days": 10})")) << name;
        EXPECT_GE(chat_pieces, 3u) << name;
        EXPECT_GE(responses_pieces, 3u) << name;
        EXPECT_GE(anthropic_pieces, 3u) << name;
        EXPECT_EQ(responses_args, args) << name;
        EXPECT_EQ(anthropic_args, args) << name;
        bool done = false;
        for (const json& e : responses.close(a.usage(), std::nullopt))
            if (e["type"] == "response.function_call_arguments.done") {
                EXPECT_EQ(e["arguments"], args) << name;
                done = true;
            }
        EXPECT_TRUE(done) << name;
        messages.finish(1, 1);
        EXPECT_EQ(messages.message()["content"][0]["input"], json::parse(args)) << name;
    }
}

// Content between calls keeps its place: the Responses translator opens items in output order.
TEST(ToolResponse, ContentBetweenCallsIsItsOwnChunk) {
    ResponseContext ctx{.endpoint = Endpoint::chat_completions, .id = "chatcmpl-t", .created = 1, .model = "m"};
    ctx.tool_format = chat::ToolCallFormat::hermes;
    ResponseAssembler a(ctx, 1);
    const auto chunks = a.add(0, delta("<tool_call>{\"name\": \"noop\", \"arguments\": {}}</tool_call> and then "
                                       "<tool_call>{\"name\": \"noop\", \"arguments\": {\"a\": 1}}</tool_call>",
                                       true));
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    EXPECT_FALSE(chunks[0]["choices"][0]["delta"].contains("content"));
    EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "and then");
    EXPECT_EQ(chunks[1]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
    EXPECT_EQ(chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
    EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_TRUE(chunks[0]["choices"][0]["finish_reason"].is_null());
}

// A forced call's arguments follow the parameters schema's property order as sent (the body is
// parsed into ordered JSON), and the template shows the tools in that order too.
TEST(ToolRequest, ForcedArgumentsFollowTheSchemasPropertyOrder) {
    const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"required",
        "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"],
        "additionalProperties":false}}}]})";
    const auto chatml = chat::ChatTemplate::builtin("chatml");
    CompletionParams p = parse_completion_request(parse_json_body(body), Endpoint::chat_completions);
    apply_tools(p, &chatml);
    const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": ";
    EXPECT_TRUE(accepts(p.grammar, call + R"({"zeta": 1, "alpha": 2})" + "}\n</tool_call>"));
    EXPECT_FALSE(accepts(p.grammar, call + R"({"alpha": 2, "zeta": 1})" + "}\n</tool_call>"));
    const std::string shown = p.tools.dump();
    EXPECT_LT(shown.find("zeta"), shown.find("alpha")) << shown;
}
