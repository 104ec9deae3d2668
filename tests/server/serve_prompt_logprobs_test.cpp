// Prompt logprobs through `pagoda serve`: OpenAI's legacy echo with logprobs (the prompt's tokens
// first, null for the first one), vLLM's prompt_logprobs on completions (per choice) and chat (beside
// the choices), streamed on a choice's first chunk, and the cross-check that a prompt token's
// logprob is the logprob the model gives that token when it generates it after the same prefix.
#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/serve_harness.h"
#include "server/sse.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

json post(const ServeProcess& s, const std::string& path, const json& body) {
    const HttpResult r = http_request(s.port(), "POST", path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
}

TEST(ServePromptLogprobs, EchoWithLogprobsStartsWithThePromptsTokens) {
    ServeProcess s({});
    const json r = post(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0},
                                               {"ignore_eos", true}, {"echo", true}, {"logprobs", 2}});
    const json& choice = r["choices"][0];
    const int64_t n_prompt = r["usage"]["prompt_tokens"];
    const json& lp = choice["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), size_t(n_prompt + 3)) << lp.dump();
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    EXPECT_EQ(lp["text_offset"][0], 0);
    for (size_t i = 1; i < lp["token_logprobs"].size(); ++i) {
        EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0) << i;
        EXPECT_LE(lp["top_logprobs"][i].size(), 2u) << i;
        EXPECT_GE(lp["text_offset"][i].get<int64_t>(), lp["text_offset"][i - 1].get<int64_t>()) << i;
    }
    EXPECT_EQ(choice["text"].get<std::string>().rfind("Once upon a time", 0), 0u) << choice["text"];
}

TEST(ServePromptLogprobs, APromptTokensLogprobIsTheOneItGetsWhenGenerated) {
    ServeProcess s({});
    const std::vector<int32_t> prefix = {1, 72, 305, 41, 9, 88};
    std::vector<int32_t> longer = prefix;
    longer.push_back(7);
    const json b = post(s, "/v1/completions", {{"prompt", longer}, {"max_tokens", 1}, {"temperature", 0},
                                               {"prompt_logprobs", 3}});
    const json& pl = b["choices"][0]["prompt_logprobs"];
    ASSERT_EQ(pl.size(), longer.size()) << pl.dump();
    EXPECT_TRUE(pl[0].is_null());
    for (size_t i = 1; i < longer.size(); ++i) {
        const json& entry = pl[i].at(std::to_string(longer[i]));
        EXPECT_LE(entry["logprob"].get<double>(), 0.0);
        EXPECT_GE(entry["rank"].get<int>(), 1);
        EXPECT_GE(pl[i].size(), 3u);  // the token and three alternatives, which may include it
    }
    // The alternative of rank 1 after the prefix is the greedy token there: generating after the
    // prefix gives that token with the same logprob (the row computed in another batch shape).
    const json* best = nullptr;
    for (const auto& [id, e] : pl[prefix.size()].items())
        if (e["rank"] == 1) best = &e;
    ASSERT_NE(best, nullptr) << pl[prefix.size()].dump();
    const json a = post(s, "/v1/completions", {{"prompt", prefix}, {"max_tokens", 1}, {"temperature", 0},
                                               {"ignore_eos", true}, {"logprobs", 0}});
    EXPECT_NEAR(a["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(), (*best)["logprob"].get<double>(), 1e-4);
    EXPECT_EQ(a["choices"][0]["logprobs"]["tokens"][0], (*best)["decoded_token"]);
}

TEST(ServePromptLogprobs, ChatCarriesThemBesideTheChoicesAndStreamsThemFirst) {
    ServeProcess s({});
    const json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 4},
                       {"temperature", 0}, {"prompt_logprobs", 0}};
    const json r = post(s, "/v1/chat/completions", body);
    ASSERT_TRUE(r.contains("prompt_logprobs")) << r.dump();
    EXPECT_EQ(r["prompt_logprobs"].size(), r["usage"]["prompt_tokens"].get<size_t>());
    EXPECT_TRUE(r["prompt_logprobs"][0].is_null());

    json streamed = body;
    streamed["stream"] = true;
    const HttpResult raw = http_request(s.port(), "POST", "/v1/chat/completions", streamed.dump());
    ASSERT_EQ(raw.status, 200);
    pagoda::server::SseParser parser;
    int carrying = 0;
    json first_carrier;
    for (const auto& e : parser.feed(raw.body)) {
        if (e == "[DONE]") continue;
        const json chunk = json::parse(e);
        if (chunk.contains("prompt_logprobs")) {
            if (carrying++ == 0) first_carrier = chunk["prompt_logprobs"];
        }
    }
    EXPECT_EQ(carrying, 1);
    EXPECT_EQ(first_carrier, r["prompt_logprobs"]);

    // Out of range, and refused where nothing is generated from a prompt.
    json bad = body;
    bad["prompt_logprobs"] = 21;
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/chat/completions", bad.dump()).status, 400);
}

}  // namespace
