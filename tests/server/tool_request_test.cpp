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
#include "server/openai_response.h"

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
                for (const auto& tc : d["tool_calls"]) msg["tool_calls"].push_back(tc);
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
        std::vector<std::string> pieces;
        for (size_t i = 0; i < out.size();) {
            const size_t n = 1 + rng() % 7;
            pieces.push_back(out.substr(i, n));
            i += n;
        }
        auto [response, streamed] = run(ctx, pieces);
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
