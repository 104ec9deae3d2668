// Anthropic Messages bodies -> the chat request they stand for: an exact golden of every block and
// field that is translated, the refusals (each a 400 naming the Anthropic field), the renaming of
// the chat parser's errors, and docs/api.md's Messages field table against the code's list.
#include "server/anthropic_request.h"

#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "fixtures.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

ApiError error_of(const json& body, MessagesRoute route = MessagesRoute::messages) {
    try {
        translate_anthropic_request(body, route);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "", "");
}

json base() {
    return {{"model", "m"}, {"max_tokens", 16}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

json with(json body, const std::string& key, json value) {
    body[key] = std::move(value);
    return body;
}

}  // namespace

TEST(AnthropicRequest, TranslatesEveryBlockAndFieldIntoTheChatRequest) {
    const json body = json::parse(R"({
      "model": "m", "max_tokens": 100,
      "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
      "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "Need the tool.", "signature": "sig"},
          {"type": "text", "text": "Checking."},
          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
          {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "down"}], "is_error": true},
          {"type": "text", "text": "And tomorrow?"}]}
      ],
      "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
      "thinking": {"type": "enabled", "budget_tokens": 50},
      "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 40, "stream": true,
      "metadata": {"user_id": "u1"}, "service_tier": "auto"
    })");
    const AnthropicRequest r = translate_anthropic_request(body, MessagesRoute::messages);
    const json want = json::parse(R"({
      "model": "m", "max_tokens": 100,
      "messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}]},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}], "reasoning_content": "Need the tool.",
         "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "Error: "}, {"type": "text", "text": "down"}]},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}
      ],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}],
      "tool_choice": "required", "parallel_tool_calls": false,
      "chat_template_kwargs": {"enable_thinking": true}, "thinking_token_budget": 50,
      "stop": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 40, "stream": true
    })");
    EXPECT_EQ(r.chat_body, want) << r.chat_body.dump(2);
    EXPECT_EQ(r.thinking, true);
    EXPECT_EQ(r.message_origin, (std::vector<std::string>{"system", "messages[0]", "messages[1]",
                                                          "messages[2].content[0]", "messages[2].content[1]",
                                                          "messages[2]"}));
    // The translation is a body the chat parser accepts as it is.
    EXPECT_NO_THROW(parse_completion_request(r.chat_body, Endpoint::chat_completions));
}

TEST(AnthropicRequest, ToolChoicesAndThinkingOff) {
    auto chat = [](json tool_choice) {
        json b = with(base(), "tools", json::array({{{"name", "f"}, {"input_schema", {{"type", "object"}}}}}));
        return translate_anthropic_request(with(b, "tool_choice", std::move(tool_choice)), MessagesRoute::messages)
            .chat_body;
    };
    EXPECT_EQ(chat({{"type", "auto"}})["tool_choice"], "auto");
    EXPECT_EQ(chat({{"type", "none"}})["tool_choice"], "none");
    EXPECT_EQ(chat({{"type", "tool"}, {"name", "f"}})["tool_choice"],
              json::parse(R"({"type": "function", "function": {"name": "f"}})"));
    EXPECT_FALSE(chat({{"type", "auto"}}).contains("parallel_tool_calls"));
    const AnthropicRequest off = translate_anthropic_request(with(base(), "thinking", {{"type", "disabled"}}),
                                                             MessagesRoute::messages);
    EXPECT_EQ(off.thinking, false);
    EXPECT_EQ(off.chat_body["chat_template_kwargs"], json::parse(R"({"enable_thinking": false})"));
    EXPECT_FALSE(translate_anthropic_request(base(), MessagesRoute::messages).thinking.has_value());
}

TEST(AnthropicRequest, CountTokensTakesThePromptFieldsOnly) {
    json body = base();
    body.erase("max_tokens");
    const AnthropicRequest r = translate_anthropic_request(body, MessagesRoute::count_tokens);
    EXPECT_EQ(r.chat_body, json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})"));
    for (const char* name : {"max_tokens", "stream", "stop_sequences", "temperature"}) {
        ApiError e = error_of(with(body, name, 1), MessagesRoute::count_tokens);
        EXPECT_EQ(e.status, 400) << name;
        EXPECT_EQ(e.param, name);
        EXPECT_EQ(e.code, "unsupported_parameter");
    }
}

TEST(AnthropicRequest, RefusesWhatIsNotServedNamingTheField) {
    const json img = json::parse(R"([{"role": "user", "content": [{"type": "image", "source": {}}]}])");
    const json prefill_space = json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b "}])");
    const json prefill_call = json::parse(
        R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "text", "text": "b"},
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}])");
    const json redacted = json::parse(
        R"([{"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}, {"role": "user", "content": "a"}])");
    const json user_tool_use = json::parse(
        R"([{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}])");
    const json extra_key = json::parse(R"([{"role": "user", "content": "a", "name": "bob"}])");
    const json citations = json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "a", "citations": []}]}])");
    const json system_role = json::parse(R"([{"role": "system", "content": "a"}])");
    struct Case {
        json body;
        std::string param;
    };
    const std::vector<Case> cases = {
        {with(base(), "container", "c"), "container"},
        {with(base(), "mcp_servers", json::array()), "mcp_servers"},
        {with(base(), "context_management", json::object()), "context_management"},
        {with(base(), "frequency_penalty", 1), "frequency_penalty"},  // OpenAI's, not Anthropic's
        {with(base(), "messages", img), "messages[0].content[0].source.type"},
        {with(base(), "messages", prefill_space), "messages[1].content"},
        {with(base(), "messages", prefill_call), "messages[1]"},
        {with(base(), "messages", redacted), "messages[0].content[0]"},
        {with(base(), "messages", user_tool_use), "messages[0].content[0].type"},
        {with(base(), "messages", extra_key), "messages[0].name"},
        {with(base(), "messages", citations), "messages[0].content[0].citations"},
        {with(base(), "messages", system_role), "messages[0].role"},
        {with(base(), "messages", json::array()), "messages"},
        {with(base(), "tools", json::parse(R"([{"type": "web_search_20250305", "name": "web_search"}])")), "tools[0].type"},
        {with(base(), "tools", json::parse(R"([{"name": "f"}])")), "tools[0].input_schema"},
        {with(base(), "tool_choice", {{"type", "required"}}), "tool_choice.type"},
        {with(base(), "tool_choice", "auto"), "tool_choice"},
        {with(base(), "thinking", {{"type", "enabled"}}), "thinking.budget_tokens"},
        {with(base(), "thinking", {{"type", "enabled"}, {"budget_tokens", 16}}), "thinking.budget_tokens"},
        {with(base(), "thinking", {{"type", "adaptive"}}), "thinking.type"},
        {with(base(), "temperature", 1.5), "temperature"},
        {with(base(), "top_p", -0.1), "top_p"},
        {with(base(), "metadata", {{"user_id", 1}}), "metadata.user_id"},
        {with(base(), "metadata", {{"tag", "x"}}), "metadata.tag"},
        {with(base(), "service_tier", "priority"), "service_tier"},
        {with(base(), "system", json::parse(R"([{"type": "image"}])")), "system[0].type"},
        {with(base(), "stop_sequences", "END"), "stop_sequences"},
        {json::parse(R"({"messages": [{"role": "user", "content": "a"}]})"), "max_tokens"},
    };
    for (const auto& c : cases) {
        const ApiError e = error_of(c.body);
        EXPECT_EQ(e.status, 400) << c.body.dump();
        EXPECT_EQ(e.param, c.param) << c.body.dump() << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
    }
    EXPECT_EQ(error_of(json::array()).status, 400);
}

TEST(AnthropicRequest, ChatParserErrorsAreNamedByTheAnthropicField) {
    AnthropicRequest r = translate_anthropic_request(
        with(base(), "system", "s"), MessagesRoute::messages);  // chat messages: system, messages[0]
    EXPECT_EQ(r.param("stop"), "stop_sequences");
    EXPECT_EQ(r.param("stop[2]"), "stop_sequences[2]");
    EXPECT_EQ(r.param("tools[3].function.parameters"), "tools[3].input_schema");
    EXPECT_EQ(r.param("tools[0].function.name"), "tools[0].name");
    EXPECT_EQ(r.param("chat_template_kwargs"), "thinking");
    EXPECT_EQ(r.param("parallel_tool_calls"), "tool_choice.disable_parallel_tool_use");
    EXPECT_EQ(r.param("messages[0].content"), "system");
    EXPECT_EQ(r.param("messages[1].role"), "messages[0]");
    EXPECT_EQ(r.param("messages[7]"), "messages[7]");  // out of range: left as it is
    EXPECT_EQ(r.param("max_tokens"), "max_tokens");
    // And the chat parser does refuse these, so the renaming has work to do.
    try {
        parse_completion_request(
            translate_anthropic_request(with(base(), "stop_sequences", json::array({""})), MessagesRoute::messages)
                .chat_body,
            Endpoint::chat_completions);
        ADD_FAILURE() << "an empty stop sequence was accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(r.param(e.param).rfind("stop_sequences", 0), 0u) << e.param;
    }
}

// docs/api.md's Messages table (rows "| `name` | yes/— | yes/— | use | why |", between the
// messages-fields markers) is anthropic_request_fields().
TEST(AnthropicRequest, DocsTableIsTheCodesList) {
    std::ifstream in(pagoda::test::source_dir() + "/docs/api.md");
    ASSERT_TRUE(in) << "docs/api.md not found";
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string doc = ss.str();
    const size_t begin = doc.find("<!-- messages-fields:begin -->"), end = doc.find("<!-- messages-fields:end -->");
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    std::istringstream lines(doc.substr(begin, end - begin));
    const std::regex row(R"(^\| `([a-z_]+)` \| (yes|—) \| (yes|—) \| (honoured|no-op|refused) \|.*)");
    std::vector<std::string> documented;
    std::string line;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (!std::regex_match(line, m, row)) continue;
        documented.push_back(m[1]);
        const RequestField* f = nullptr;
        for (const auto& x : anthropic_request_fields())
            if (x.name == m[1].str()) f = &x;
        ASSERT_NE(f, nullptr) << "docs/api.md lists '" << m[1] << "', which the code does not know";
        EXPECT_EQ(f->completions, m[2] == "yes") << m[1];
        EXPECT_EQ(f->chat, m[3] == "yes") << m[1];
        EXPECT_EQ(field_use_name(f->use), m[4].str()) << m[1];
    }
    for (const auto& f : anthropic_request_fields())
        EXPECT_NE(std::find(documented.begin(), documented.end(), std::string(f.name)), documented.end())
            << "docs/api.md's Messages table lacks '" << f.name << "'";
    EXPECT_EQ(documented.size(), anthropic_request_fields().size()) << "a field is listed twice";
}

// A final assistant message is a prefill: the chat template leaves that turn open and the model
// continues its text, as Anthropic's API does.
TEST(AnthropicRequest, FinalAssistantMessageIsContinued) {
    for (const char* content : {R"("{\"answer\":")", R"([{"type": "text", "text": "{\"answer\":"}])"}) {
        json body = with(base(), "messages",
                         json::parse(std::string(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": )") +
                                     content + "}]"));
        const AnthropicRequest r = translate_anthropic_request(body, MessagesRoute::messages);
        EXPECT_EQ(r.chat_body.at("continue_final_message"), true) << content;
        EXPECT_EQ(r.chat_body.at("add_generation_prompt"), false) << content;
        EXPECT_EQ(r.chat_body.at("messages").back().at("role"), "assistant") << content;
    }
    // Not a prefill: the last message is the user's.
    const AnthropicRequest plain = translate_anthropic_request(base(), MessagesRoute::messages);
    EXPECT_FALSE(plain.chat_body.contains("continue_final_message"));
    // Thinking cannot come before a prefill.
    json thinking = with(base(), "messages",
                         json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])"));
    thinking["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
    thinking["max_tokens"] = 2048;
    const ApiError e = error_of(thinking, MessagesRoute::messages);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "thinking");
}

// From the ordered body (as the server parses it), a tool's input_schema keeps its properties'
// order in the chat body, so a forced call's arguments follow it.
TEST(AnthropicRequest, InputSchemasKeepTheirPropertiesOrder) {
    const auto body = parse_json_body(R"({"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"}],
        "tools":[{"name":"f","input_schema":{"type":"object","properties":{"zeta":{"type":"integer"},
        "alpha":{"type":"integer"}}}}]})");
    const AnthropicRequest r = translate_anthropic_request(json(body), MessagesRoute::messages, &body);
    const std::string shown = r.chat_body["tools"][0]["function"]["parameters"].dump();
    EXPECT_LT(shown.find("zeta"), shown.find("alpha")) << shown;
}
