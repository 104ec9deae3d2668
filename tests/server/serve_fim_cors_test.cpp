// End-to-end over real sockets: fill-in-the-middle (/infill and /v1/completions `suffix`) against
// the model with FIM tokens — the server's prompt is the one the rule gives, written out here token
// by token, since greedy output for it equals /v1/completions given those ids; streaming equals
// non-streaming; a model without FIM tokens gets the 400 — and CORS (--cors-origin): preflight,
// headers on plain, error and streamed answers for an allowed Origin only.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "server/serve_harness.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

using namespace pagoda;
using namespace pagoda::test;
using json = nlohmann::json;

namespace {

constexpr int32_t BOS = 1, FIM_PRE = 506, FIM_SUF = 507, FIM_MID = 508, FIM_REP = 510, FIM_SEP = 511;

std::string streamed_text(const std::string& body) {
    server::SseParser parser;
    std::string text;
    for (const auto& e : parser.feed(body)) {
        if (e == "[DONE]") continue;
        const json chunk = json::parse(e);
        if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
    }
    return text;
}

}  // namespace

TEST(ServeFim, InfillAndSuffixBuildTheRulesPromptAndStream) {
    const std::string model = server_fim_test_model();
    auto file = gguf::File::open(model);
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    ASSERT_EQ(tok->vocab().fim().prefix, FIM_PRE);
    auto enc = [&](const std::string& text) { return tok->encode(text, {.add_bos = false, .add_eos = false}); };
    auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
        std::vector<int32_t> out;
        for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
        return out;
    };
    // A batch share of 256 leaves the extra context room in the 2048-token context.
    ServeProcess s({"--max-batched-tokens", "256"}, model);

    const json infill = {{"input_prefix", "the cat"}, {"input_suffix", "on a mat"},
                         {"input_extra", {{{"filename", "notes.txt"}, {"text", "a dog"}}}},
                         {"prompt", "sat"}, {"max_tokens", 6}, {"temperature", 0}};
    const std::vector<int32_t> want = cat({{FIM_REP}, enc("myproject\n"), {FIM_SEP}, enc("notes.txt\n"), enc("a dog"),
                                           {FIM_SEP}, enc("filename\n"), {BOS, FIM_PRE}, enc("the cat"), enc("sat"),
                                           {FIM_SUF}, enc("on a mat"), {FIM_MID}});
    HttpResult r = http_request(s.port(), "POST", "/infill", infill.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json got = json::parse(r.body);
    EXPECT_EQ(got["object"], "text_completion");
    EXPECT_EQ(got["usage"]["prompt_tokens"], want.size());
    const json by_ids = {{"prompt", want}, {"max_tokens", 6}, {"temperature", 0}};
    HttpResult ref = http_request(s.port(), "POST", "/v1/completions", by_ids.dump());
    ASSERT_EQ(ref.status, 200) << ref.body;
    EXPECT_EQ(got["choices"][0]["text"], json::parse(ref.body)["choices"][0]["text"]);
    EXPECT_EQ(got["choices"][0]["finish_reason"], json::parse(ref.body)["choices"][0]["finish_reason"]);

    json streamed = infill;
    streamed["stream"] = true;
    HttpResult sr = http_request(s.port(), "POST", "/infill", streamed.dump());
    ASSERT_EQ(sr.status, 200);
    EXPECT_EQ(sr.headers["content-type"], "text/event-stream; charset=utf-8");
    EXPECT_EQ(streamed_text(sr.body), got["choices"][0]["text"]);

    // /v1/completions with a suffix: the prompt is the prefix, nothing typed, no extra files (but the
    // repo line and the current file's separator, as the rule writes them).
    const json suffixed = {{"prompt", "def add(a, b):"}, {"suffix", "\nprint(add(1, 2))"}, {"max_tokens", 5},
                           {"temperature", 0}};
    const std::vector<int32_t> want2 = cat({{FIM_REP}, enc("myproject\n"), {FIM_SEP}, enc("filename\n"),
                                            {BOS, FIM_PRE}, enc("def add(a, b):"), {FIM_SUF},
                                            enc("\nprint(add(1, 2))"), {FIM_MID}});
    HttpResult r2 = http_request(s.port(), "POST", "/v1/completions", suffixed.dump());
    ASSERT_EQ(r2.status, 200) << r2.body;
    EXPECT_EQ(json::parse(r2.body)["usage"]["prompt_tokens"], want2.size());
    HttpResult ref2 = http_request(s.port(), "POST", "/v1/completions",
                                   json{{"prompt", want2}, {"max_tokens", 5}, {"temperature", 0}}.dump());
    EXPECT_EQ(json::parse(r2.body)["choices"][0]["text"], json::parse(ref2.body)["choices"][0]["text"]);

    HttpResult bad = http_request(s.port(), "POST", "/infill", R"({"input_extra":[{"filename":"x"}]})");
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(json::parse(bad.body)["error"]["param"], "input_extra[0].text");
    EXPECT_EQ(http_request(s.port(), "GET", "/infill").status, 405);
}

TEST(ServeFim, ModelWithoutFimTokensGets400) {
    ServeProcess s({});
    HttpResult r = http_request(s.port(), "POST", "/infill", R"({"input_prefix":"a","input_suffix":"b"})");
    ASSERT_EQ(r.status, 400) << r.body;
    const json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["code"], "fim_not_supported");
    EXPECT_EQ(e["param"], "input_suffix");
    EXPECT_NE(e["message"].get<std::string>().find("cannot fill in the middle"), std::string::npos);
    HttpResult c = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"a","suffix":"b"})");
    ASSERT_EQ(c.status, 400);
    EXPECT_EQ(json::parse(c.body)["error"]["param"], "suffix");
    // An empty suffix is a plain completion, as OpenAI's.
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"a","suffix":"","max_tokens":1})").status, 200);
}

TEST(ServeCors, PreflightAndHeadersForAllowedOriginsOnly) {
    ServeProcess s({"--cors-origin", "http://app.example:3000,http://other.example", "--api-key", "cors-key-1", "--open-health"});
    const std::string allowed = "Origin: http://app.example:3000";
    HttpResult pre = http_request(s.port(), "OPTIONS", "/v1/completions", "",
                                  {allowed, "Access-Control-Request-Method: POST",
                                   "Access-Control-Request-Headers: authorization, content-type, x-stainless-os"});
    EXPECT_EQ(pre.status, 204) << pre.body;
    EXPECT_EQ(pre.headers["access-control-allow-origin"], "http://app.example:3000");
    EXPECT_EQ(pre.headers["access-control-allow-methods"], "GET, POST, OPTIONS");
    EXPECT_EQ(pre.headers["access-control-allow-headers"], "authorization, content-type, x-stainless-os");
    EXPECT_EQ(pre.headers["access-control-max-age"], "600");
    EXPECT_EQ(pre.headers["vary"], "Origin");
    EXPECT_EQ(pre.headers.count("content-length"), 0u);
    EXPECT_EQ(pre.body, "");

    HttpResult refused = http_request(s.port(), "OPTIONS", "/v1/completions", "",
                                      {"Origin: http://evil.example", "Access-Control-Request-Method: POST"});
    EXPECT_EQ(refused.status, 403);
    EXPECT_EQ(refused.headers.count("access-control-allow-origin"), 0u);
    EXPECT_EQ(refused.headers["vary"], "Origin");

    const std::string body = R"({"prompt":"a","max_tokens":2})";
    HttpResult ok = http_request(s.port(), "POST", "/v1/completions", body, {allowed, "Authorization: Bearer cors-key-1"});
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.headers["access-control-allow-origin"], "http://app.example:3000");
    EXPECT_EQ(ok.headers["access-control-expose-headers"], "X-Request-Id, Retry-After");
    HttpResult denied = http_request(s.port(), "POST", "/v1/completions", body, {allowed});
    EXPECT_EQ(denied.status, 401);
    EXPECT_EQ(denied.headers["access-control-allow-origin"], "http://app.example:3000") << "errors carry it too";
    HttpResult stream = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"a","max_tokens":2,"stream":true})",
                                     {"Origin: http://other.example", "Authorization: Bearer cors-key-1"});
    EXPECT_EQ(stream.status, 200);
    EXPECT_EQ(stream.headers["access-control-allow-origin"], "http://other.example");
    HttpResult foreign = http_request(s.port(), "POST", "/v1/completions", body,
                                      {"Origin: http://evil.example", "Authorization: Bearer cors-key-1"});
    EXPECT_EQ(foreign.status, 200) << "the server answers; the browser withholds it";
    EXPECT_EQ(foreign.headers.count("access-control-allow-origin"), 0u);
    EXPECT_EQ(foreign.headers["vary"], "Origin");
}

TEST(ServeCors, OffByDefaultAndAnyOriginWithStar) {
    {
        ServeProcess s({});
        HttpResult r = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"a","max_tokens":1})",
                                    {"Origin: http://app.example"});
        EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
        EXPECT_EQ(r.headers.count("vary"), 0u);
        EXPECT_EQ(http_request(s.port(), "OPTIONS", "/v1/completions", "", {"Origin: http://app.example"}).status, 405);
    }
    ServeProcess s({"--cors-origin", "*"});
    HttpResult r = http_request(s.port(), "GET", "/v1/models", "", {"Origin: http://anything.example"});
    EXPECT_EQ(r.headers["access-control-allow-origin"], "*");
    EXPECT_EQ(http_request(s.port(), "OPTIONS", "/v1/models", "", {"Origin: null"}).status, 204);
}
