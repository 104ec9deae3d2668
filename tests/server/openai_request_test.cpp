// Request-body validation: accepted shapes, and OpenAI-shaped errors naming the field.
#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/openai_request.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {
ApiError error_of(const std::string& body, Endpoint ep = Endpoint::completions) {
    try {
        parse_completion_request(parse_json_body(body), ep);
    } catch (const ApiError& e) {
        return e;
    }
    return ApiError(0, "no error", "");
}
}  // namespace

TEST(OpenAiRequest, CompletionFields) {
    auto p = parse_completion_request(json::parse(R"({"model":"m","prompt":"hi","n":2,"max_tokens":7,"stop":"\n",
        "temperature":0,"top_p":0.5,"seed":42,"logprobs":3,"presence_penalty":1.5,"frequency_penalty":-1,
        "logit_bias":{"17":-100,"3":5.5},"stream":true,"stream_options":{"include_usage":true},"user":"x",
        "echo":false})"),
                                      Endpoint::completions);
    EXPECT_EQ(p.model, "m");
    ASSERT_EQ(p.prompts.size(), 1u);
    EXPECT_EQ(std::get<std::string>(p.prompts[0]), "hi");
    EXPECT_EQ(p.n, 2);
    EXPECT_EQ(p.max_tokens, 7);
    EXPECT_EQ(p.stop, std::vector<std::string>{"\n"});
    EXPECT_EQ(p.temperature, 0.0f);
    EXPECT_EQ(p.top_p, 0.5f);
    EXPECT_EQ(p.seed, 42u);
    EXPECT_EQ(p.logprobs, 3);
    EXPECT_EQ(p.presence_penalty, 1.5f);
    EXPECT_EQ(p.frequency_penalty, -1.0f);
    EXPECT_EQ(p.logit_bias.at(17), -100.0f);
    EXPECT_EQ(p.logit_bias.at(3), 5.5f);
    EXPECT_TRUE(p.stream);
    EXPECT_TRUE(p.include_usage);
}

TEST(OpenAiRequest, PromptShapes) {
    auto ids = parse_completion_request(json::parse(R"({"prompt":[1,2,3]})"), Endpoint::completions);
    EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompts[0]), (std::vector<int32_t>{1, 2, 3}));
    auto many = parse_completion_request(json::parse(R"({"prompt":["a",[5,6]],"n":3})"), Endpoint::completions);
    ASSERT_EQ(many.prompts.size(), 2u);
    EXPECT_EQ(std::get<std::string>(many.prompts[0]), "a");
    auto whole = parse_completion_request(json::parse(R"({"prompt":"x","max_tokens":3.0})"), Endpoint::completions);
    EXPECT_EQ(whole.max_tokens, 3);  // JavaScript numbers
}

TEST(OpenAiRequest, VllmExtensionsAndStopLists) {
    auto p = parse_completion_request(json::parse(R"({"prompt":[1],"top_k":40,"min_p":0.05,"repetition_penalty":1.1,
        "ignore_eos":true,"stop_token_ids":[9,2],"stop":["a","bc"]})"),
                                      Endpoint::completions);
    EXPECT_EQ(p.top_k, 40);
    EXPECT_FLOAT_EQ(p.min_p, 0.05f);
    EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
    EXPECT_TRUE(p.ignore_eos);
    EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{9, 2}));
    EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "bc"}));
    EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt":[1],"top_k":-1})"), Endpoint::completions).top_k, 0)
        << "vLLM: -1 means off";
}

TEST(OpenAiRequest, DefaultsAndNulls) {
    // null reads as "not given"; a one-element array of token arrays is one prompt.
    auto p = parse_completion_request(json::parse(R"({"prompt":[[4,5]],"logprobs":null,"temperature":null})"),
                                      Endpoint::completions);
    ASSERT_EQ(p.prompts.size(), 1u);
    EXPECT_EQ(std::get<std::vector<int32_t>>(p.prompts[0]), (std::vector<int32_t>{4, 5}));
    EXPECT_FALSE(p.max_tokens.has_value());
    EXPECT_EQ(p.max_tokens_param, "max_tokens");
    EXPECT_EQ(p.temperature, 1.0f);
    EXPECT_EQ(p.top_p, 1.0f);
    EXPECT_EQ(p.n, 1);
    EXPECT_EQ(p.logprobs, -1);
    EXPECT_FALSE(p.seed.has_value());
    EXPECT_FALSE(p.echo);
    EXPECT_FALSE(p.stream);
    EXPECT_TRUE(p.stop.empty());
    // A negative seed is a valid 64-bit seed (two's complement).
    EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt":[1],"seed":-1})"), Endpoint::completions).seed,
              ~uint64_t(0));
}

TEST(OpenAiRequest, ChatFields) {
    auto p = parse_completion_request(json::parse(R"({"messages":[{"role":"system","content":"s"},
        {"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":9,"max_tokens":3,
        "logprobs":true,"top_logprobs":2})"),
                                      Endpoint::chat_completions);
    EXPECT_EQ(p.messages.size(), 2u);
    EXPECT_EQ(p.max_tokens, 9);  // max_completion_tokens wins
    EXPECT_EQ(p.max_tokens_param, "max_completion_tokens");
    EXPECT_EQ(p.logprobs, 2);
    auto no_lp = parse_completion_request(json::parse(R"({"messages":[{"role":"user","content":"x"}]})"),
                                          Endpoint::chat_completions);
    EXPECT_EQ(no_lp.logprobs, -1);
}

TEST(OpenAiRequest, ErrorsAreOpenAiShaped) {
    ApiError e = error_of(R"({"prompt":"x","temperature":"hot"})");
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.body(), json::parse(R"({"error":{"message":"'temperature' must be a number, got string",
        "type":"invalid_request_error","param":"temperature","code":"invalid_type"}})"));
    EXPECT_EQ(error_of(R"({"prompt":"x","temperature":3})").body()["error"]["message"],
              "'temperature' must be between 0 and 2");
    EXPECT_EQ(error_of(R"({"prompt":"x","n":0})").param, "n");
    EXPECT_EQ(error_of(R"({"prompt":"x","n":1.5})").param, "n");
    EXPECT_EQ(error_of(R"({"prompt":"x","max_tokens":-1})").param, "max_tokens");
    EXPECT_EQ(error_of(R"({"prompt":"x","top_p":0})").param, "top_p");
    EXPECT_EQ(error_of(R"({"prompt":"x","stop":[1]})").param, "stop[0]");
    EXPECT_EQ(error_of(R"({"prompt":"x","logit_bias":{"abc":1}})").param, "logit_bias");
    EXPECT_EQ(error_of(R"({"prompt":"x","logit_bias":{"5":101}})").param, "logit_bias.5");
    EXPECT_EQ(error_of(R"({"prompt":"x","stream":"yes"})").param, "stream");
    EXPECT_EQ(error_of(R"({"prompt":"x","suffix":3})").param, "suffix");
    EXPECT_EQ(error_of(R"({"prompt":"x","suffix":"s","echo":true})").code, "unsupported_parameter");
    EXPECT_EQ(error_of(R"({"prompt":"x","n":2,"best_of":3})").param, "best_of");
    EXPECT_EQ(error_of(R"({"prompt":[1,-2]})").param, "prompt[1]");
    EXPECT_EQ(error_of(R"({"prompt":[]})").param, "prompt");
    EXPECT_EQ(error_of(R"({})").code, "missing_required_parameter");
    EXPECT_EQ(error_of(R"([1,2])").param, "body");
    EXPECT_EQ(error_of(R"({"prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})").param,
              "stop");
    EXPECT_EQ(error_of(R"({"prompt":"x","stop":[""]})").param, "stop");
    EXPECT_EQ(error_of(R"({"prompt":["a","b"],"n":100})").param, "n");
    EXPECT_EQ(error_of(R"({"prompt":"x","logprobs":21})").param, "logprobs");
    EXPECT_EQ(error_of(R"({"prompt":"x","presence_penalty":3})").param, "presence_penalty");
    EXPECT_EQ(error_of(R"({"prompt":"x","repetition_penalty":0})").param, "repetition_penalty");
    EXPECT_EQ(error_of(R"({"prompt":"x","seed":"s"})").param, "seed");
    EXPECT_EQ(error_of(R"({"prompt":"x","echo":true,"logprobs":1})").status, 0);  // the prompt's logprobs too
    EXPECT_EQ(error_of(R"({"prompt":"x","prompt_logprobs":21})").param, "prompt_logprobs");
    EXPECT_EQ(error_of(R"({"prompt":"x","prompt_logprobs":-1})").param, "prompt_logprobs");
    EXPECT_EQ(error_of(R"({"prompt":[1,"a"]})").param, "prompt[1]");
    EXPECT_EQ(error_of(R"({"prompt":[1],"stop_token_ids":[-1]})").param, "stop_token_ids[0]");
}

TEST(OpenAiRequest, ChatErrors) {
    const auto chat = Endpoint::chat_completions;
    EXPECT_EQ(error_of(R"({"messages":[]})", chat).param, "messages");
    EXPECT_EQ(error_of(R"({"messages":"hi"})", chat).param, "messages");
    EXPECT_EQ(error_of(R"({"messages":[{"content":"x"}]})", chat).param, "messages[0].role");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":5}]})", chat).param, "messages[0].content");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", chat).param,
              "messages[0].content[0].image_url");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})", chat).param,
              "messages[0].content[0]");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", chat).param, "top_logprobs");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", chat).param,
              "top_logprobs");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})", chat).param,
              "response_format.type");
}

TEST(OpenAiRequest, StructuredOutputBecomesAGrammar) {
    const auto chat = Endpoint::chat_completions;
    const std::string msg = R"("messages":[{"role":"user","content":"x"}])";
    EXPECT_EQ(parse_completion_request(json::parse("{" + msg + R"(,"response_format":{"type":"text"}})"), chat).grammar,
              nullptr);
    EXPECT_NE(parse_completion_request(json::parse("{" + msg + R"(,"response_format":{"type":"json_object"}})"), chat).grammar,
              nullptr);
    EXPECT_NE(parse_completion_request(json::parse(R"({"prompt":"x","response_format":{"type":"json_schema",
        "json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}}}}}})"),
                                       Endpoint::completions)
                  .grammar,
              nullptr);
    EXPECT_NE(parse_completion_request(json::parse(R"({"prompt":"x","grammar":"root ::= \"yes\" | \"no\""})"),
                                       Endpoint::completions)
                  .grammar,
              nullptr);
}

TEST(OpenAiRequest, TheSameSchemaGivesTheSameCompiledGrammar) {
    const std::string body = R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":
        {"type":"object","properties":{"q":{"type":"integer"}}}}}})";
    auto a = parse_completion_request(json::parse(body), Endpoint::completions).grammar;
    auto b = parse_completion_request(json::parse(body), Endpoint::completions).grammar;
    EXPECT_EQ(a.get(), b.get());  // so the engine's mask cache for it stays warm
}

TEST(OpenAiRequest, StructuredOutputErrorsNameTheFieldAndKeyword) {
    const auto chat = Endpoint::chat_completions;
    const std::string msg = R"({"messages":[{"role":"user","content":"x"}],)";
    auto e = error_of(msg + R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":
        {"type":"object","properties":{"age":{"type":"integer","minimum":0}}}}}})", chat);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "response_format.json_schema.schema");
    EXPECT_EQ(e.code, "unsupported_parameter");
    EXPECT_NE(std::string(e.what()).find("'minimum'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("#/properties/age"), std::string::npos) << e.what();
    EXPECT_EQ(error_of(msg + R"("response_format":{"type":"json_schema"}})", chat).param, "response_format.json_schema");
    EXPECT_EQ(error_of(msg + R"("response_format":{"type":"json_schema","json_schema":{"schema":3}}})", chat).param,
              "response_format.json_schema.schema");
    EXPECT_EQ(error_of(msg + R"("response_format":{"type":"json_schema","json_schema":{"strict":"yes"}}})", chat).param,
              "response_format.json_schema.strict");
    auto g = error_of(R"({"prompt":"x","grammar":"root ::= (\"a\""})");
    EXPECT_EQ(g.param, "grammar");
    EXPECT_NE(std::string(g.what()).find("line 1, column 10"), std::string::npos) << g.what();
    EXPECT_EQ(error_of(R"({"prompt":"x","grammar":7})").param, "grammar");
    EXPECT_EQ(error_of(R"({"prompt":"x","grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})").param,
              "grammar");
}

TEST(OpenAiRequest, MalformedBodies) {
    EXPECT_EQ(error_of("{bad").code, "invalid_json");
    EXPECT_EQ(error_of("").code, "invalid_json");
    EXPECT_EQ(error_of("{\"prompt\":\"\xff\xfe\"}").code, "invalid_json");  // invalid UTF-8
    EXPECT_EQ(error_of("{\"prompt\":\"x\"} trailing").code, "invalid_json");
}

// The body keeps its keys in the order sent (parse_json_body gives ordered JSON), so a schema's
// properties are generated in the schema's order, not by name.
TEST(OpenAiRequest, SchemaPropertiesFollowTheSchemasOrder) {
    auto accepts = [](const CompletionParams& p, std::string_view text) {
        pagoda::grammar::Matcher m(p.grammar);
        return m.accept(text) && m.can_end();
    };
    const std::string schema = R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},
        "required":["zeta","alpha"],"additionalProperties":false})";
    const std::string in_order = R"({"zeta":1,"alpha":2})", by_name = R"({"alpha":2,"zeta":1})";
    for (const std::string& body :
         {R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)" + schema + "}}}",
          R"({"prompt":"x","guided_json":)" + schema + "}", R"({"prompt":"x","json_schema":)" + schema + "}"}) {
        const auto ordered = parse_completion_request(parse_json_body(body), Endpoint::completions);
        EXPECT_TRUE(accepts(ordered, in_order)) << body;
        EXPECT_FALSE(accepts(ordered, by_name)) << body;
        // A nlohmann::json body holds its keys sorted: the properties come by name.
        const auto sorted = parse_completion_request(json::parse(body), Endpoint::completions);
        EXPECT_TRUE(accepts(sorted, by_name)) << body;
        EXPECT_FALSE(accepts(sorted, in_order)) << body;
    }
    // guided_json as JSON text keeps the text's order whatever holds the body.
    const std::string text = R"({"prompt":"x","guided_json":)" + json(schema).dump() + "}";
    EXPECT_TRUE(accepts(parse_completion_request(json::parse(text), Endpoint::completions), in_order));
    // The chat endpoint alike.
    const auto chat = parse_completion_request(
        parse_json_body(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
            "json_schema":{"name":"n","schema":)" + schema + "}}}"),
        Endpoint::chat_completions);
    EXPECT_TRUE(accepts(chat, in_order));
}
