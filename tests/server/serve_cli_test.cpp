// `pagoda serve` flags as llama-server and vLLM users type them: --host with a host name,
// --api-key, --alias / --served-model-name, -c/--ctx-size (limits requests and sizes the KV pool),
// -np/--parallel; and bench-serve against it with a prompt shorter than its default shared prefix.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/process.h"
#include "server/serve_harness.h"

using namespace pagoda::test;
using json = nlohmann::json;

TEST(ServeCommandLine, HostNameKeyAndAlias) {
    ServeProcess s({"--host", "localhost", "--api-key", "sk-test-key", "--open-health", "--alias", "tiny-llama"});
    EXPECT_EQ(http_request(s.port(), "GET", "/v1/models").status, 401);
    HttpResult models = http_request(s.port(), "GET", "/v1/models", "", {"Authorization: Bearer sk-test-key"});
    ASSERT_EQ(models.status, 200) << models.body;
    EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "tiny-llama");
}

TEST(ServeCommandLine, ServedModelNameIsTheModelId) {
    ServeProcess s({"--served-model-name", "my-model"});
    HttpResult models = http_request(s.port(), "GET", "/v1/models");
    ASSERT_EQ(models.status, 200) << models.body;
    EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "my-model");
}

TEST(ServeCommandLine, ContextSizeLimitsRequestsAndSizesThePool) {
    // The slow test model has a trained context of 8192: -c 64 with one sequence makes the pool
    // max(64, 256 per sequence) = 256 tokens, 16 blocks of 16, instead of 512 blocks.
    ServeProcess s({"-c", "64", "-np", "1"}, server_test_model(true));
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 100}};
    HttpResult r = http_request(s.port(), "POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("maximum context length is 64 tokens"), std::string::npos) << r.body;
    EXPECT_EQ(metric_value(http_request(s.port(), "GET", "/metrics").body, "pagoda:kv_cache_blocks"), 16);
}

TEST(ServeCommandLine, BenchServeShortPromptWithDefaultSharedPrefix) {
    ServeProcess s({});
    auto r = run_pagoda({"bench-serve", "--url", "http://127.0.0.1:" + std::to_string(s.port()), "--requests", "2",
                         "--prompt-len", "16", "--output-len", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("prompt 16 (shared 12)"), std::string::npos) << r.out;
}
