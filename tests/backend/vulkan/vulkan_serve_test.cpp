// `pagoda serve --backend vulkan` end to end on the server tests' model: one completion, the same
// request streamed (greedy: the streamed text is the whole response's), and one embedding, which
// equals the CPU backend's within f32 rounding.
#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/vulkan/vulkan_test_env.h"
#include "server/serve_harness.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

std::vector<double> embedding(int port) {
    const json body = {{"input", "Once upon a time there was a dog"}};
    HttpResult r = http_request(port, "POST", "/v1/embeddings", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return {};
    return json::parse(r.body)["data"][0]["embedding"].get<std::vector<double>>();
}

TEST(VulkanServe, CompletionStreamAndEmbedding) {
    PAGODA_REQUIRE_VULKAN();
    std::vector<double> vulkan_embedding;
    {
        ServeProcess s({"--backend", "vulkan"});
        const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
        HttpResult plain = http_request(s.port(), "POST", "/v1/completions", body.dump());
        ASSERT_EQ(plain.status, 200) << plain.body;
        const json whole = json::parse(plain.body);
        EXPECT_EQ(whole["usage"]["completion_tokens"], 8);

        json sbody = body;
        sbody["stream"] = true;
        HttpResult streamed = http_request(s.port(), "POST", "/v1/completions", sbody.dump());
        ASSERT_EQ(streamed.status, 200) << streamed.body;
        std::string text;
        size_t at = 0;
        while ((at = streamed.body.find("data: ", at)) != std::string::npos) {
            const size_t end = streamed.body.find("\n\n", at);
            const std::string payload = streamed.body.substr(at + 6, end - at - 6);
            at = end;
            if (payload == "[DONE]") break;
            const json event = json::parse(payload);
            if (!event["choices"].empty()) text += event["choices"][0]["text"].get<std::string>();
        }
        EXPECT_EQ(text, whole["choices"][0]["text"]) << "greedy: the streamed text is the whole response's";
        vulkan_embedding = embedding(s.port());
    }
    ServeProcess cpu({"--backend", "cpu"});
    const std::vector<double> want = embedding(cpu.port());
    ASSERT_EQ(vulkan_embedding.size(), want.size());
    ASSERT_FALSE(want.empty());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(vulkan_embedding[i], want[i], 1e-4) << "dimension " << i;
}

}  // namespace
}  // namespace pagoda::test
