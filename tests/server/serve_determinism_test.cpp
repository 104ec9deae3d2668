// The determinism guarantee through `pagoda serve` (docs/api.md, "Guarantees"): a seeded sampled
// completion served with --draft-ngram amid other traffic (unseeded, streamed, n = 2, concurrent
// copies of itself) gives the text it gives alone, streamed or not; and every response and chunk
// names the one system_fingerprint of this server.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "server/serve_harness.h"
#include "server/sse.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

std::vector<json> sse_events(const std::string& body) {
    pagoda::server::SseParser p;
    std::vector<json> out;
    for (auto& e : p.feed(body))
        if (e != "[DONE]") out.push_back(json::parse(e));
    return out;
}

TEST(ServeDeterminism, SeededSampledTextWithDraftsIsTheSameAmidTraffic) {
    // The slow model (a few ms a token), so that the traffic overlaps the seeded requests' steps.
    ServeProcess s({"--draft-ngram", "3", "--max-seqs", "8"}, server_test_model(true));
    // A repetitive prompt, so that prompt lookup has drafts to propose.
    const json request = {{"prompt", "one two three four one two three four one two three four one two"},
                          {"max_tokens", 48}, {"temperature", 0.8}, {"seed", 42}, {"ignore_eos", true}};
    const HttpResult alone = http_request(s.port(), "POST", "/v1/completions", request.dump());
    ASSERT_EQ(alone.status, 200) << alone.body;
    const json a = json::parse(alone.body);
    const std::string text = a["choices"][0]["text"];
    const std::string fingerprint = a["system_fingerprint"];
    EXPECT_TRUE(std::regex_match(fingerprint, std::regex("fp_[0-9a-f]{16}"))) << fingerprint;

    json other_seed = request;
    other_seed["seed"] = 43;
    const HttpResult other = http_request(s.port(), "POST", "/v1/completions", other_seed.dump());
    ASSERT_EQ(other.status, 200);
    EXPECT_NE(json::parse(other.body)["choices"][0]["text"], text) << "the seed decides the sampled text";

    for (int round = 0; round < 3; ++round) {
        std::vector<HttpResult> seeded(4), traffic(6);
        std::vector<std::thread> threads;
        for (size_t i = 0; i < traffic.size(); ++i)
            threads.emplace_back([&, i] {
                const json body = {{"prompt", "other traffic " + std::to_string(i) + " one two three one two three"},
                                   {"max_tokens", 40 + int(i) * 7}, {"temperature", 1.0}, {"n", 1 + int(i % 2)},
                                   {"stream", i % 3 == 0}, {"ignore_eos", true}};
                traffic[i] = http_request(s.port(), "POST", "/v1/completions", body.dump());
            });
        for (size_t i = 0; i < seeded.size(); ++i)
            threads.emplace_back([&, i] { seeded[i] = http_request(s.port(), "POST", "/v1/completions", request.dump()); });
        for (auto& t : threads) t.join();
        for (const HttpResult& r : traffic) EXPECT_EQ(r.status, 200) << r.body;
        for (const HttpResult& r : seeded) {
            ASSERT_EQ(r.status, 200) << r.body;
            const json j = json::parse(r.body);
            EXPECT_EQ(j["choices"][0]["text"], text) << "round " << round;
            EXPECT_EQ(j["system_fingerprint"], fingerprint);
        }
    }

    // Streamed: the chunks spell the same text, each naming the fingerprint.
    json streamed = request;
    streamed["stream"] = true;
    const HttpResult st = http_request(s.port(), "POST", "/v1/completions", streamed.dump());
    ASSERT_EQ(st.status, 200);
    std::string joined;
    const auto events = sse_events(st.body);
    ASSERT_FALSE(events.empty());
    for (const json& e : events) {
        EXPECT_EQ(e["system_fingerprint"], fingerprint);
        for (const json& c : e["choices"]) joined += c["text"].get<std::string>();
    }
    EXPECT_EQ(joined, text);

    // Chat responses carry it too.
    const HttpResult chat = http_request(s.port(), "POST", "/v1/chat/completions",
                                         R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})");
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_EQ(json::parse(chat.body)["system_fingerprint"], fingerprint);

    // Drafts were proposed and verified along the way.
    const std::string metrics = http_request(s.port(), "GET", "/metrics").body;
    EXPECT_GT(metric_value(metrics, "pagoda:spec_decode_num_draft_tokens_total"), 0);
}

// Another build, model, backend, kernel plan or KV type is another fingerprint; the same server
// restarted is the same one.
TEST(ServeDeterminism, FingerprintFollowsTheConfiguration) {
    auto fingerprint_of = [](const std::vector<std::string>& args, const std::string& model) {
        ServeProcess s(args, model);
        const HttpResult r = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})");
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body)["system_fingerprint"].get<std::string>();
    };
    const std::string base = fingerprint_of({}, server_test_model());
    EXPECT_EQ(fingerprint_of({}, server_test_model()), base) << "a restart keeps it";
    EXPECT_NE(fingerprint_of({"--kv-type", "q8"}, server_test_model()), base);
    EXPECT_NE(fingerprint_of({}, server_deep_test_model()), base);
    EXPECT_NE(fingerprint_of({"--backend", "reference"}, server_test_model()), base);
}

}  // namespace
