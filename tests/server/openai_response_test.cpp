// Deltas -> OpenAI chunks and responses, checked against hand-written JSON.
#include <gtest/gtest.h>

#include "server/openai_response.h"

using namespace pagoda::server;
using pagoda::engine::Delta;
using pagoda::engine::FinishReason;
using json = nlohmann::json;

namespace {
Delta delta(int index, std::string text, std::optional<FinishReason> finish = {}, bool done = false) {
    Delta d;
    d.index = index;
    d.text = std::move(text);
    d.finish_reason = finish;
    d.request_done = done;
    d.usage.prompt_tokens = 5;
    d.usage.cached_prompt_tokens = 2;
    d.usage.completion_tokens = 3;
    return d;
}
}  // namespace

TEST(OpenAiResponse, ChatStreamChunksAndFinalResponse) {
    ResponseContext ctx{.endpoint = Endpoint::chat_completions, .id = "chatcmpl-x", .created = 7, .model = "m",
                        .n = 1, .include_usage = true};
    ResponseAssembler a(ctx, 1);
    auto open = a.opening_chunks();
    ASSERT_EQ(open.size(), 1u);
    EXPECT_EQ(open[0], json::parse(R"({"id":"chatcmpl-x","object":"chat.completion.chunk","created":7,"model":"m",
        "system_fingerprint":null,"usage":null,"choices":[{"index":0,"delta":{"role":"assistant","content":""},
        "logprobs":null,"finish_reason":null}]})"));
    auto c1 = a.add(0, delta(0, "Hel"));
    ASSERT_EQ(c1.size(), 1u);
    EXPECT_EQ(c1[0]["choices"][0]["delta"], json::parse(R"({"content":"Hel"})"));
    EXPECT_TRUE(a.add(0, delta(0, "")).empty()) << "an empty delta (held-back text) sends nothing";
    auto c2 = a.add(0, delta(0, "lo", FinishReason::stop, true));
    ASSERT_EQ(c2.size(), 1u);
    EXPECT_EQ(c2[0]["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(a.done());
    EXPECT_EQ(a.usage_chunk()["usage"], json::parse(R"({"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,
        "prompt_tokens_details":{"cached_tokens":2}})"));
    EXPECT_EQ(a.usage_chunk()["choices"], json::array());
    EXPECT_EQ(a.response()["choices"], json::parse(R"([{"index":0,"message":{"role":"assistant","content":"Hello",
        "refusal":null},"logprobs":null,"finish_reason":"stop"}])"));
    EXPECT_EQ(a.response()["object"], "chat.completion");
}

TEST(OpenAiResponse, CompletionsWithSeveralPromptsAndChoices) {
    ResponseContext ctx{.endpoint = Endpoint::completions, .id = "cmpl-y", .created = 1, .model = "m", .n = 2,
                        .echo_text = {"A:", "B:"}};
    ResponseAssembler a(ctx, 2);
    EXPECT_EQ(a.opening_chunks().size(), 4u);  // the echoed prompt of each choice
    a.add(1, delta(1, "z", FinishReason::length));
    a.add(0, delta(0, "x", FinishReason::stop));
    a.add(0, delta(1, "y", FinishReason::length, true));
    EXPECT_FALSE(a.done());
    a.add(1, delta(0, "w", FinishReason::stop, true));
    EXPECT_TRUE(a.done());
    json r = a.response();
    ASSERT_EQ(r["choices"].size(), 4u);
    EXPECT_EQ(r["choices"][0]["text"], "A:x");
    EXPECT_EQ(r["choices"][1]["text"], "A:y");
    EXPECT_EQ(r["choices"][2]["text"], "B:w");
    EXPECT_EQ(r["choices"][3]["text"], "B:z");
    EXPECT_EQ(r["choices"][3]["index"], 3);
    EXPECT_EQ(r["choices"][3]["finish_reason"], "length");
    EXPECT_TRUE(r["choices"][0]["logprobs"].is_null()) << "logprobs were not requested";
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["id"], "cmpl-y");
    EXPECT_EQ(r["created"], 1);
    EXPECT_EQ(r["usage"]["prompt_tokens"], 10);  // summed over both prompts
    EXPECT_EQ(r["usage"]["total_tokens"], 16);
}

TEST(OpenAiResponse, LogprobsShapes) {
    Delta d = delta(0, "ab", FinishReason::length, true);
    d.logprobs = {{.token = 7, .logprob = -0.5f, .top = {{7, -0.5f}, {9, -1.0f}}}, {.token = 8, .logprob = -2.0f, .top = {}}};
    ResponseAssembler comp({.endpoint = Endpoint::completions, .n = 1, .logprobs = 2}, 1);
    comp.add(0, d);
    EXPECT_EQ(comp.response()["choices"][0]["logprobs"], json::parse(R"({"tokens":["7","8"],"token_logprobs":[-0.5,-2.0],
        "top_logprobs":[{"7":-0.5,"9":-1.0},{}],"text_offset":[0,1]})"));
    ResponseAssembler chat({.endpoint = Endpoint::chat_completions, .n = 1, .logprobs = 2}, 1);
    chat.add(0, d);
    EXPECT_EQ(chat.response()["choices"][0]["logprobs"], json::parse(R"({"content":[
        {"token":"7","logprob":-0.5,"bytes":[55],"top_logprobs":[{"token":"7","logprob":-0.5,"bytes":[55]},
                                                                 {"token":"9","logprob":-1.0,"bytes":[57]}]},
        {"token":"8","logprob":-2.0,"bytes":[56],"top_logprobs":[]}]})"));
}

TEST(OpenAiResponse, EngineErrorIsReported) {
    ResponseAssembler a({.endpoint = Endpoint::completions, .n = 1}, 1);
    Delta d = delta(0, "", FinishReason::error, true);
    d.error = "boom";
    a.add(0, d);
    ASSERT_TRUE(a.error());
    EXPECT_EQ(*a.error(), "boom");
}

// The server's system_fingerprint (model/system_fingerprint.h) is in every chunk and the response.
TEST(OpenAiResponse, SystemFingerprintInChunksAndResponse) {
    ResponseContext ctx{.endpoint = Endpoint::completions, .id = "cmpl-f", .created = 1, .model = "m",
                        .system_fingerprint = "fp_0123456789abcdef", .n = 1, .include_usage = true};
    ResponseAssembler a(ctx, 1);
    auto chunks = a.add(0, delta(0, "x"));
    auto last = a.add(0, delta(0, "y", FinishReason::stop, true));
    chunks.insert(chunks.end(), last.begin(), last.end());
    chunks.push_back(a.usage_chunk());
    ASSERT_EQ(chunks.size(), 3u);
    for (const json& c : chunks) EXPECT_EQ(c["system_fingerprint"], "fp_0123456789abcdef") << c;
    EXPECT_EQ(a.response()["system_fingerprint"], "fp_0123456789abcdef");
}
