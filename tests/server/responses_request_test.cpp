// POST /v1/responses bodies: what is parsed, what is refused with a 400 naming the field (hosted
// tools, fields not acted on, non-text parts), the translation of items into the chat request the
// chat pipeline serves, the renaming of that pipeline's errors, and docs/api.md's field table.
#include "server/responses_request.h"

#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>

#include "fixtures.h"
#include "server/image_parts.h"
#include "server/openai_request.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

ApiError error_of(const json& body) {
    try {
        parse_responses_request(body);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}

void expect_refused(const json& body, const std::string& param, int status = 400) {
    const ApiError e = error_of(body);
    EXPECT_EQ(e.status, status) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump() << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(param.substr(0, param.find('['))), std::string::npos) << e.what();
}

}  // namespace

TEST(ResponsesRequest, AStringInputIsOneUserMessage) {
    const ResponsesRequest r = parse_responses_request(json::parse(R"({"input":"hi","instructions":"be brief",
        "max_output_tokens":16,"temperature":0.5,"top_p":0.9,"stream":true,"store":false,"metadata":{"k":"v"},
        "user":"u1","reasoning":{"summary":"auto"}})"));
    EXPECT_EQ(r.input_items, json::parse(R"([{"type":"message","role":"user","content":"hi"}])"));
    EXPECT_EQ(r.instructions, "be brief");
    EXPECT_EQ(r.max_output_tokens, 16);
    EXPECT_EQ(r.temperature, 0.5);
    EXPECT_EQ(r.top_p, 0.9);
    EXPECT_TRUE(r.stream);
    EXPECT_FALSE(r.store);
    EXPECT_EQ(r.metadata, json::parse(R"({"k":"v"})"));
    EXPECT_EQ(r.user, "u1");
    EXPECT_EQ(r.reasoning_summary, "auto");
    EXPECT_TRUE(parse_responses_request(json{{"input", "x"}}).store);  // OpenAI's default
}

TEST(ResponsesRequest, FieldsNotActedOnAreRefusedByName) {
    expect_refused({{"input", "a"}, {"some_future_field", 1}}, "some_future_field");
    expect_refused({{"input", "a"}, {"conversation", "c"}}, "conversation");
    expect_refused({{"input", "a"}, {"prompt", {{"id", "p"}}}}, "prompt");
    expect_refused({{"input", "a"}, {"max_tool_calls", 2}}, "max_tool_calls");
    expect_refused({{"input", "a"}, {"top_logprobs", 2}}, "top_logprobs");
    expect_refused({{"input", "a"}, {"reasoning", {{"effort", "extreme"}}}}, "reasoning.effort");
    EXPECT_EQ(parse_responses_request(json{{"input", "a"}, {"reasoning", {{"effort", "low"}}}}).reasoning_effort, "low");
    EXPECT_EQ(responses_chat_body(parse_responses_request(json{{"input", "a"}, {"reasoning", {{"effort", "high"}}}}),
                                  json::array())["reasoning_effort"],
              "high");
    expect_refused({{"input", "a"}, {"reasoning", {{"summary", "concise"}}}}, "reasoning.summary");
    expect_refused({{"input", "a"}, {"text", {{"verbosity", "low"}}}}, "text.verbosity");
    expect_refused({{"input", "a"}, {"truncation", "auto"}}, "truncation");
    expect_refused({{"input", "a"}, {"background", true}}, "background");
    expect_refused({{"input", "a"}, {"include", {"reasoning.encrypted_content"}}}, "include");
    expect_refused({{"input", "a"}, {"service_tier", "flex"}}, "service_tier");
    expect_refused({{"input", "a"}, {"stream_options", {{"include_obfuscation", true}}}}, "stream_options.include_obfuscation");
    // The no-ops at their no-op values, and nulls, pass.
    EXPECT_EQ(error_of(json::parse(R"({"input":"a","truncation":"disabled","background":false,"include":[],
        "service_tier":"auto","user":"u","safety_identifier":"s","prompt_cache_key":"k","conversation":null,
        "stream_options":{"include_obfuscation":false},"reasoning":{"effort":null,"summary":null}})")).status, 0);
}

TEST(ResponsesRequest, HostedToolsAreRefusedNamingTheirType) {
    for (const char* type : {"web_search", "web_search_preview", "file_search", "code_interpreter", "computer_use_preview",
                             "image_generation", "mcp", "local_shell"}) {
        const ApiError e = error_of({{"input", "a"}, {"tools", json::array({{{"type", "function"}, {"name", "f"}},
                                                                            {{"type", type}}})}});
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "tools[1].type");
        EXPECT_NE(std::string(e.what()).find(type), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("hosted tool"), std::string::npos) << e.what();
    }
    expect_refused({{"input", "a"}, {"tools", json::array({{{"type", "custom"}, {"name", "f"}}})}}, "tools[0].type");
    expect_refused({{"input", "a"}, {"tool_choice", {{"type", "web_search_preview"}}}}, "tool_choice.type");
    expect_refused({{"input", "a"}, {"tool_choice", {{"type", "allowed_tools"}}}}, "tool_choice.type");
}

TEST(ResponsesRequest, InputItemsAreCheckedAndRefusedByName) {
    expect_refused(json::object(), "input");
    expect_refused({{"input", 3}}, "input");
    expect_refused({{"input", json::array({{{"role", "tool"}, {"content", "x"}}})}}, "input[0].role");
    expect_refused({{"input", json::parse(R"([{"role":"user","content":[{"type":"input_image","image_url":"u"}]}])")}},
                   "input[0].content[0].image_url.url");
    expect_refused({{"input", json::parse(R"([{"role":"user","content":[{"type":"input_file","file_id":"f"}]}])")}},
                   "input[0].content[0].type");
    expect_refused({{"input", json::parse(R"([{"role":"user","content":"a","name":"bob"}])")}}, "input[0].name");
    expect_refused({{"input", json::parse(R"([{"type":"function_call","name":"f","arguments":"{}"}])")}},
                   "input[0].call_id");
    expect_refused({{"input", json::parse(R"([{"type":"function_call_output","call_id":"c"}])")}}, "input[0].output");
    expect_refused({{"input", json::parse(R"([{"type":"item_reference","id":"x"}])")}}, "input[0]");
    expect_refused({{"input", json::parse(R"([{"type":"web_search_call","id":"x"}])")}}, "input[0].type");
    expect_refused({{"input", json::parse(R"([{"type":"reasoning","encrypted_content":"zz","summary":[]}])")}},
                   "input[0].encrypted_content");
    // previous_response_id alone is enough (the stored conversation is the input).
    EXPECT_EQ(error_of({{"previous_response_id", "resp_1"}}).status, 0);
}

TEST(ResponsesRequest, ItemsBecomeTheChatMessagesOfTheSameConversation) {
    const json items = json::parse(R"([
        {"role":"developer","content":"rules"},
        {"type":"message","role":"user","content":[{"type":"input_text","text":"What is "},{"type":"input_text","text":"2+2?"}]},
        {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"add them"}]},
        {"type":"message","role":"assistant","id":"msg_1","status":"completed",
         "content":[{"type":"output_text","text":"Calling.","annotations":[]}]},
        {"type":"function_call","call_id":"c1","name":"add","arguments":"{\"a\":2,\"b\":2}"},
        {"type":"function_call","call_id":"c2","name":"log","arguments":"{}"},
        {"type":"function_call_output","call_id":"c1","output":"4"},
        {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"ok"}]},
        {"type":"reasoning","summary":[{"type":"summary_text","text":"cut off"}]},
        {"role":"user","content":"thanks"}])");
    EXPECT_EQ(responses_items_to_messages(items), json::parse(R"([
        {"role":"developer","content":"rules"},
        {"role":"user","content":"What is 2+2?"},
        {"role":"assistant","content":"Calling.","reasoning_content":"add them","tool_calls":[
            {"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":2}"}},
            {"id":"c2","type":"function","function":{"name":"log","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"4","name":"add"},
        {"role":"tool","tool_call_id":"c2","content":"ok","name":"log"},
        {"role":"user","content":"thanks"}])"));
}

TEST(ResponsesRequest, TheChatBodyCarriesEverySettingUnderItsChatName) {
    const json body = json::parse(R"({"model":"m","instructions":"sys","input":"hi","max_output_tokens":9,
        "temperature":0,"top_p":0.5,"stream":true,"parallel_tool_calls":false,
        "tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}],
        "tool_choice":{"type":"function","name":"f"},
        "text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}}})");
    const ResponsesRequest r = parse_responses_request(body);
    const json chat = responses_chat_body(r, r.input_items);
    EXPECT_EQ(chat, json::parse(R"({"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}],
        "tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}],
        "parallel_tool_calls":false,"tool_choice":{"type":"function","function":{"name":"f"}},
        "response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}},
        "max_completion_tokens":9,"temperature":0.0,"top_p":0.5,"stream":true})"));
    // The chat parser's rules apply as they are: a forced call and a JSON schema do not go together;
    // either alone is taken.
    EXPECT_THROW(parse_completion_request(chat, Endpoint::chat_completions), ApiError);
    json without_format = chat;
    without_format.erase("response_format");
    EXPECT_NO_THROW(parse_completion_request(without_format, Endpoint::chat_completions));
    json without_choice = chat;
    without_choice.erase("tool_choice");
    EXPECT_NO_THROW(parse_completion_request(without_choice, Endpoint::chat_completions));
    const json object_format = responses_chat_body(
        parse_responses_request(json::parse(R"({"input":"a","text":{"format":{"type":"json_object"}}})")), json::array());
    EXPECT_EQ(object_format["response_format"], json::parse(R"({"type":"json_object"})"));
}

TEST(ResponsesRequest, ChatPipelineErrorsNameTheResponsesFields) {
    auto mapped = [](const json& body) {
        const ResponsesRequest r = parse_responses_request(body);
        try {
            parse_completion_request(responses_chat_body(r, r.input_items), Endpoint::chat_completions);
        } catch (const ApiError& e) {
            return map_chat_error(e);
        }
        return ApiError(0, "no error", "");
    };
    ApiError e = mapped(json::parse(R"({"input":"a","text":{"format":{"type":"json_schema","schema":{"type":"nonsense"}}}})"));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "text.format.schema");
    EXPECT_NE(std::string(e.what()).find("'text.format.schema'"), std::string::npos) << e.what();
    e = mapped(json::parse(R"({"input":"a","tools":[{"type":"function","name":"bad name"}]})"));
    EXPECT_EQ(e.param, "tools[0].name");
    e = mapped(json::parse(R"({"input":"a","tools":[{"type":"function","name":"f","parameters":[1]}]})"));
    EXPECT_EQ(e.param, "tools[0].parameters");
    e = mapped(json::parse(R"({"input":"a","tool_choice":"required"})"));
    EXPECT_EQ(e.param, "tool_choice");
    EXPECT_EQ(map_chat_error(ApiError::invalid("'max_completion_tokens' is 9", "max_completion_tokens")).param,
              "max_output_tokens");
    EXPECT_EQ(map_chat_error(ApiError::invalid("the prompt has 9 tokens", "messages")).param, "input");
}

// An error in a chat message names the Responses item it came from, by the index the client sent:
// merged assistant output (named by the item that opened it), instructions and stored items shift
// the message indices.
TEST(ResponsesRequest, ChatMessageErrorsNameTheOriginalInputItem) {
    const json input = json::parse(R"([
        {"role":"user","content":"a"},
        {"type":"reasoning","summary":[{"type":"summary_text","text":"t"}]},
        {"role":"assistant","content":[{"type":"output_text","text":"b"}]},
        {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
        {"type":"function_call_output","call_id":"c1","output":"r"},
        {"role":"user","content":[{"type":"input_text","text":"see"},
                                  {"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}])");
    const ResponsesRequest r = parse_responses_request(json{{"input", input}, {"instructions", "be brief"}});
    json conversation = json::parse(R"([{"role":"user","content":"old"},
                                        {"role":"assistant","content":[{"type":"output_text","text":"o"}]}])");
    const size_t stored = conversation.size();
    for (const json& item : r.input_items) conversation.push_back(item);
    const std::vector<MessageOrigin> origins = responses_message_origins(r, conversation, stored);
    const json messages = json(responses_chat_body(r, conversation))["messages"];
    ASSERT_EQ(origins.size(), messages.size());
    std::vector<std::string> paths;
    for (const auto& o : origins) paths.push_back(o.path);
    EXPECT_EQ(paths, (std::vector<std::string>{"instructions", "previous_response_id", "previous_response_id",
                                               "input[0]", "input[2]", "input[4]", "input[5]"}));

    // The image part as the gateway finds it (and names it when it does not decode).
    const auto parts = image_parts(messages);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].where, "messages[6].content[1]");
    ApiError e = map_chat_error(
        ApiError::invalid(fmt::format("'{}' is not a decodable image", parts[0].where), parts[0].where), origins);
    EXPECT_EQ(e.param, "input[5].content[1]");
    EXPECT_EQ(std::string(e.what()), "'input[5].content[1]' is not a decodable image");
    // Below a merged or translated message only the item is named.
    EXPECT_EQ(map_chat_error(ApiError::invalid("x", "messages[4].tool_calls[0].function.name"), origins).param, "input[2]");
    EXPECT_EQ(map_chat_error(ApiError::invalid("x", "messages[5].content"), origins).param, "input[4]");
    EXPECT_EQ(map_chat_error(ApiError::invalid("x", "messages[0].content"), origins).param, "instructions");
    // Without origins (or past them), the input as a whole.
    EXPECT_EQ(map_chat_error(ApiError::invalid("x", "messages[6].content[1]")).param, "input");
    EXPECT_EQ(map_chat_error(ApiError::invalid("x", "messages[9]"), origins).param, "input");
}

// docs/api.md's Responses field table (rows "| `name` | use | why |" between its markers) is
// responses_fields().
TEST(ResponsesRequest, DocsTableIsTheCodesList) {
    std::ifstream in(pagoda::test::source_dir() + "/docs/api.md");
    ASSERT_TRUE(in) << "docs/api.md not found";
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string doc = ss.str();
    const size_t begin = doc.find("<!-- responses-fields:begin -->"), end = doc.find("<!-- responses-fields:end -->");
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    std::istringstream lines(doc.substr(begin, end - begin));
    const std::regex row(R"(^\| `([a-z_]+)` \| (honoured|no-op|refused) \|.*)");
    std::vector<std::string> documented;
    std::string line;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (!std::regex_match(line, m, row)) continue;
        documented.push_back(m[1]);
        const ResponsesField* f = nullptr;
        for (const auto& x : responses_fields())
            if (x.name == m[1].str()) f = &x;
        ASSERT_NE(f, nullptr) << "docs/api.md lists '" << m[1] << "', which the code does not know";
        EXPECT_EQ(field_use_name(f->use), m[2].str()) << m[1];
    }
    for (const auto& f : responses_fields())
        EXPECT_NE(std::find(documented.begin(), documented.end(), std::string(f.name)), documented.end())
            << "docs/api.md's Responses field table lacks '" << f.name << "'";
    EXPECT_EQ(documented.size(), responses_fields().size()) << "a field is listed twice";
}

// From the ordered body (as the server parses it), a function's parameters and text.format's
// schema keep their properties' order: the chat body, and so the grammar, follow it.
TEST(ResponsesRequest, SchemasKeepTheirPropertiesOrder) {
    const std::string schema = R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},
        "required":["zeta","alpha"],"additionalProperties":false})";
    const auto body = parse_json_body(R"({"input":"hi","tools":[{"type":"function","name":"f","parameters":)" + schema +
                                      R"(}],"text":{"format":{"type":"json_schema","name":"n","schema":)" + schema + "}}}");
    const ResponsesRequest r = parse_responses_request(json(body), &body);
    const auto chat = responses_chat_body(r, json::parse(R"([{"role":"user","content":"hi"}])"));
    for (const std::string& shown : {chat["tools"][0]["function"]["parameters"].dump(),
                                    chat["response_format"]["json_schema"]["schema"].dump()})
        EXPECT_LT(shown.find("zeta"), shown.find("alpha")) << shown;
    // Without the ordered body the keys are sorted.
    const ResponsesRequest sorted = parse_responses_request(json(body));
    const std::string by_name = sorted.tools[0]["parameters"].dump();
    EXPECT_GT(by_name.find("zeta"), by_name.find("alpha")) << by_name;
}
