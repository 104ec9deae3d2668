// OpenAI completion bodies -> engine requests (types, ranges, defaults) and the response shape.
#include "engine/completion_request.h"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

using json = nlohmann::json;

std::string error_of(const json& body, const tokenizer::Tokenizer* tok = nullptr) {
    try {
        parse_completion_request(body, tok);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(CompletionRequest, ParsesEveryField) {
    json body = json::parse(R"({"prompt": [1, 2, 3], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
        "min_p": 0.05, "seed": 42, "stop": ["a", "bc"], "n": 3, "logprobs": 2, "presence_penalty": 0.5,
        "frequency_penalty": -0.5, "repetition_penalty": 1.1, "logit_bias": {"5": -100, "7": 2.5}, "priority": -3,
        "ignore_eos": true, "stop_token_ids": [9], "stream": true, "custom_id": "x1", "model": "m", "user": "u"})");
    auto c = parse_completion_request(body, nullptr);
    const Request& r = c.request;
    EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(r.stop.max_tokens, 7);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_EQ(r.stop.stop, (std::vector<std::string>{"a", "bc"}));
    EXPECT_EQ(r.n, 3);
    EXPECT_EQ(r.logprobs, 2);
    EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
    EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
    EXPECT_FLOAT_EQ(r.sampling.logit_bias.at(5), -100.0f);
    EXPECT_FLOAT_EQ(r.sampling.logit_bias.at(7), 2.5f);
    EXPECT_EQ(r.priority, -3);
    EXPECT_TRUE(r.stop.ignore_eos);
    EXPECT_EQ(r.stop.stop_token_ids, (std::vector<int32_t>{9}));
    EXPECT_TRUE(c.stream);
    EXPECT_EQ(c.custom_id, "x1");
    EXPECT_EQ(c.model, "m");
}

TEST(CompletionRequest, DefaultsFollowOpenAI) {
    auto c = parse_completion_request(json::parse(R"({"prompt": [[4, 5]], "stop": "x", "logprobs": null})"), nullptr);
    EXPECT_EQ(c.request.prompt, (std::vector<int32_t>{4, 5}));
    EXPECT_EQ(c.request.stop.max_tokens, 16);
    EXPECT_FLOAT_EQ(c.request.sampling.temperature, 1.0f);
    EXPECT_EQ(c.request.n, 1);
    EXPECT_EQ(c.request.logprobs, -1);
    EXPECT_EQ(c.request.stop.stop, (std::vector<std::string>{"x"}));
    EXPECT_FALSE(c.request.sampling.seed.has_value());
}

TEST(CompletionRequest, RejectsBadTypesAndRanges) {
    EXPECT_NE(error_of(json::parse(R"([1])")).find("JSON object"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({})")).find("'prompt' is required"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": "hi"})")).find("tokenizer"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": []})")).find("empty"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1, "a"]})")).find("token ids"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1, -4]})")).find("out of range"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": ["a", "b"]})")).find("one prompt"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "max_tokens": 0})")).find("'max_tokens'"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "max_tokens": 2.5})")).find("integer"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "temperature": "hot"})")).find("number"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "temperature": 2.5})")).find("[0, 2]"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "top_p": 0})")).find("top_p"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "logprobs": 21})")).find("'logprobs'"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "n": 0})")).find("'n'"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "stop": [1]})")).find("strings"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "stop": [""]})")).find("empty"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "logit_bias": {"x": 1}})")).find("not a token id"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "logit_bias": {"3": 101}})")).find("[-100, 100]"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "presence_penalty": 3})")).find("presence_penalty"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "seed": "s"})")).find("'seed'"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "echo": true})")).find("echo"), std::string::npos);
    EXPECT_NE(error_of(json::parse(R"({"prompt": [1], "stream": 1})")).find("true or false"), std::string::npos);
}

TEST(CompletionRequest, ResponseShapeAndUsage) {
    CompletionAccumulator acc(2);
    Delta d;
    d.index = 1;
    d.token_ids = {5};
    d.text = "hi";
    d.logprobs = {{5, -0.5f, {{5, -0.5f}, {6, -1.5f}}}};
    d.usage = {4, 2, 1};
    acc.add(d);
    d = {};
    d.index = 0;
    d.token_ids = {7};
    d.text = "yo";
    d.logprobs = {{7, -0.25f, {{7, -0.25f}, {5, -2.0f}}}};
    d.finish_reason = FinishReason::length;
    d.usage = {4, 2, 2};
    acc.add(d);
    d = {};
    d.index = 1;
    d.finish_reason = FinishReason::stop;
    d.request_done = true;
    d.usage = {4, 2, 2};
    acc.add(d);
    ASSERT_TRUE(acc.done());
    json j = completion_response("cmpl-1", 123, "m", acc, 1, nullptr);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["id"], "cmpl-1");
    EXPECT_EQ(j["created"], 123);
    EXPECT_EQ(j["choices"][0]["text"], "yo");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["choices"][1]["text"], "hi");
    EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
    EXPECT_EQ(j["choices"][1]["logprobs"]["tokens"], json::array({"5"}));
    EXPECT_FLOAT_EQ(j["choices"][1]["logprobs"]["token_logprobs"][0].get<float>(), -0.5f);
    EXPECT_FLOAT_EQ(j["choices"][1]["logprobs"]["top_logprobs"][0]["6"].get<float>(), -1.5f);
    EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
    EXPECT_EQ(j["usage"]["completion_tokens"], 2);
    EXPECT_EQ(j["usage"]["total_tokens"], 6);
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
    EXPECT_TRUE(completion_response("c", 0, "m", acc, -1, nullptr)["choices"][0]["logprobs"].is_null());
}

// `pagoda batch` on stories260K: input order kept, error lines for bad lines, greedy = golden text.
TEST(BatchCommand, Stories260K) {
    const std::string model = pagoda::test::fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    const std::string in = pagoda::test::temp_path("batch-in.jsonl"), out = pagoda::test::temp_path("batch-out.jsonl");
    {
        std::ofstream f(in);
        f << R"({"prompt": [1, 403, 407], "max_tokens": 5, "temperature": 0, "custom_id": "first"})" << "\n";
        f << "{not json\n";
        f << R"({"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stop": ["Lily"]})" << "\n";
        f << R"({"prompt": [1], "max_tokens": 4, "temperature": 1, "seed": 5, "n": 2})" << "\n";
        f << R"({"prompt": [1)";
        for (int i = 1; i < 2048; ++i) f << ", 1";
        f << R"(], "max_tokens": 4})" << "\n";  // 2048 tokens: no room left in the 2048-token context
    }
    const std::string cmd = pagoda::test::pagoda_binary() + " batch -m " + model + " -i " + in + " -o " + out +
                            " -t 1 --max-batched-tokens 8 --max-seqs 4 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream f(out);
    std::vector<json> lines;
    for (std::string line; std::getline(f, line);) lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), 5u);
    // Golden greedy continuation of [1 403 407] (stories260K_greedy_noprompt): 261 378 432 383 286.
    EXPECT_EQ(lines[0]["custom_id"], "first");
    EXPECT_EQ(lines[0]["id"], "cmpl-first");
    EXPECT_EQ(lines[0]["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(lines[0]["usage"]["completion_tokens"], 5);
    EXPECT_EQ(lines[0]["usage"]["prompt_tokens"], 3);
    EXPECT_TRUE(lines[1].contains("error"));
    EXPECT_EQ(lines[1]["line"], 2);
    EXPECT_EQ(lines[2]["choices"][0]["text"], ", there was a little girl named ");
    EXPECT_EQ(lines[2]["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(lines[3]["choices"].size(), 2u);
    EXPECT_EQ(lines[3]["usage"]["completion_tokens"], 8);
    EXPECT_TRUE(lines[4].contains("error"));  // cannot fit the context: rejected, others ran
}

}  // namespace
}  // namespace pagoda::engine
