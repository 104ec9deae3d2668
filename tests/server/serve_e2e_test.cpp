// End-to-end tests of `pagoda serve` over real sockets on 127.0.0.1: SSE framing, disconnects
// freeing KV blocks, keys and limits, malformed input, slow clients, admission, metrics (promtool)
// and graceful shutdown. Each test starts its own server on a free port.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <thread>

#include "fixtures.h"
#include "e2e/process.h"
#include "env_guard.h"
#include "server/serve_harness.h"
#include "server/sse.h"

using namespace pagoda::test;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string post_bytes(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::vector<json> sse_events(const std::string& body, bool* saw_done = nullptr) {
    pagoda::server::SseParser p;
    std::vector<json> out;
    for (auto& e : p.feed(body)) {
        if (e == "[DONE]") {
            if (saw_done) *saw_done = true;
            continue;
        }
        out.push_back(json::parse(e));
    }
    return out;
}

}  // namespace

TEST(ServeE2E, StreamingFramingMatchesNonStreaming) {
    ServeProcess s({});
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
    HttpResult plain = http_request(s.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(plain.status, 200) << plain.body;
    json whole = json::parse(plain.body);
    EXPECT_EQ(whole["object"], "text_completion");
    EXPECT_EQ(whole["usage"]["completion_tokens"], 12);
    EXPECT_TRUE(plain.headers.count("x-request-id"));

    json sbody = body;
    sbody["stream"] = true;
    sbody["stream_options"] = {{"include_usage", true}};
    HttpResult streamed = http_request(s.port(), "POST", "/v1/completions", sbody.dump(), {"X-Request-Id: my-req-1"});
    ASSERT_EQ(streamed.status, 200);
    EXPECT_EQ(streamed.headers["content-type"], "text/event-stream; charset=utf-8");
    EXPECT_EQ(streamed.headers["x-request-id"], "my-req-1");
    // Every event is exactly "data: <json>\n\n"; the stream ends with [DONE].
    const std::string& raw = streamed.body;
    ASSERT_GE(raw.size(), 14u);
    EXPECT_EQ(raw.substr(raw.size() - 14), "data: [DONE]\n\n");
    bool done = false;
    auto events = sse_events(raw, &done);
    EXPECT_TRUE(done);
    std::string text;
    std::string finish;
    const json id = events.front()["id"];  // the server's own, whatever X-Request-Id said
    EXPECT_NE(id, "cmpl-my-req-1");
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        EXPECT_EQ(events[i]["object"], "text_completion");
        EXPECT_EQ(events[i]["id"], id);
        EXPECT_TRUE(events[i]["usage"].is_null());
        text += events[i]["choices"][0]["text"].get<std::string>();
        if (!events[i]["choices"][0]["finish_reason"].is_null()) finish = events[i]["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, whole["choices"][0]["text"]) << "greedy: streamed text equals the whole response";
    EXPECT_EQ(finish, "length");
    EXPECT_EQ(events.back()["choices"], json::array());
    EXPECT_EQ(events.back()["usage"]["completion_tokens"], 12);
    EXPECT_EQ(events.back()["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"]);
    // The same prompt again is served partly from the prefix cache (full blocks only).
    EXPECT_GE(events.back()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST(ServeE2E, ChatStreamStartsWithRoleAndKeepAliveWorks) {
    ServeProcess s({});
    RawClient c(s.port());
    // ignore_eos: at the default temperature a random model samples its end token within 4 tokens
    // now and then (CI saw "stop"), and the test is about the stream's shape, not the sampler.
    const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}, {"stream", true},
                       {"ignore_eos", true}};
    for (int round = 0; round < 2; ++round) {  // two requests on one keep-alive connection
        c.send(post_bytes("/v1/chat/completions", body.dump()));
        std::string raw;
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (raw.find("0\r\n\r\n") == std::string::npos && Clock::now() < deadline && !c.eof()) raw += c.read_some(500);
        HttpResult r = parse_http_response(raw);
        ASSERT_EQ(r.status, 200) << raw;
        auto events = sse_events(r.body);
        ASSERT_GE(events.size(), 2u);
        EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
        EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
        EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
    }
}

TEST(ServeE2E, DisconnectMidStreamCancelsAndFreesBlocks) {
    ServeProcess s({}, server_test_model(true));
    {
        RawClient c(s.port());
        const json body = {{"prompt", "a long story"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}};
        c.send(post_bytes("/v1/completions", body.dump()));
        std::string got;
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (got.find("\"text\"") == std::string::npos && Clock::now() < deadline) got += c.read_some(200);
        ASSERT_NE(got.find("\"text\""), std::string::npos) << "no token arrived";
        // Engine stats are a snapshot taken after each step: poll rather than read once.
        std::string m = wait_metrics(s.port(), [](const std::string& t) {
            return metric_value(t, "pagoda:num_requests_running") == 1 && metric_value(t, "pagoda:kv_cache_usage_perc") > 0;
        });
        EXPECT_EQ(metric_value(m, "pagoda:num_requests_running"), 1) << s.log() << got;
        EXPECT_GT(metric_value(m, "pagoda:kv_cache_usage_perc"), 0);
    }  // hang up mid-stream
    std::string m = wait_metrics(s.port(), [](const std::string& t) {
        return metric_value(t, "pagoda:request_success_total{finished_reason=\"cancelled\"}") == 1 &&
               metric_value(t, "pagoda:num_requests_running") == 0 && metric_value(t, "pagoda:kv_cache_usage_perc") == 0;
    });
    EXPECT_EQ(metric_value(m, "pagoda:num_requests_running"), 0);
    EXPECT_EQ(metric_value(m, "pagoda:kv_cache_usage_perc"), 0);
    EXPECT_LT(metric_value(m, "pagoda:generation_tokens_total"), 4000) << "generation stopped early";
    EXPECT_EQ(metric_value(m, "pagoda:request_success_total{finished_reason=\"cancelled\"}"), 1);
    EXPECT_NE(s.log().find("client disconnected"), std::string::npos);
}

TEST(ServeE2E, KeysRateLimitsAndConcurrency) {
    const std::string keys = temp_path("keys.txt");
    std::ofstream(keys) << "# test keys\nsk-alice-000001 name=alice rpm=2\nsk-bob-0000002 name=bob tpm=100\n"
                           "sk-carol-00003 name=carol\n";
    ServeProcess s({"--api-key-file", keys, "--open-health"});
    const std::string body = R"({"prompt":"hi","max_tokens":2})";
    HttpResult none = http_request(s.port(), "POST", "/v1/completions", body);
    EXPECT_EQ(none.status, 401);
    EXPECT_EQ(json::parse(none.body)["error"]["code"], "invalid_api_key");
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", body, {"Authorization: Bearer sk-alice-000002"}).status, 401);
    EXPECT_EQ(http_request(s.port(), "GET", "/v1/models").status, 401);
    EXPECT_EQ(http_request(s.port(), "GET", "/metrics").status, 401) << "metrics need a key unless --open-metrics";
    EXPECT_EQ(http_request(s.port(), "GET", "/health").status, 200) << "--open-health";

    const std::string alice = "Authorization: Bearer sk-alice-000001";
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", body, {alice}).status, 200);
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", body, {alice}).status, 200);
    HttpResult limited = http_request(s.port(), "POST", "/v1/completions", body, {alice});
    EXPECT_EQ(limited.status, 429);
    EXPECT_EQ(json::parse(limited.body)["error"]["code"], "rate_limit_exceeded");
    ASSERT_TRUE(limited.headers.count("retry-after"));
    EXPECT_GE(std::stoi(limited.headers["retry-after"]), 1);

    const std::string bob = "Authorization: Bearer sk-bob-0000002";
    HttpResult big = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"hi","max_tokens":500})", {bob});
    EXPECT_EQ(big.status, 400) << "reserves more than the key's tokens per minute: waiting cannot help";
    EXPECT_EQ(json::parse(big.body)["error"]["code"], "request_too_large");
    EXPECT_EQ(json::parse(big.body)["error"]["param"], "max_tokens");
    EXPECT_FALSE(big.headers.count("retry-after")) << "no Retry-After for a request that can never succeed";
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", body, {bob}).status, 200);

    std::string m = http_request(s.port(), "GET", "/metrics", "", {"Authorization: Bearer sk-carol-00003"}).body;
    EXPECT_EQ(metric_value(m, "pagoda:api_rejections_total{key=\"alice\",reason=\"rpm\"}"), 1) << m;
    EXPECT_EQ(metric_value(m, "pagoda:api_rejections_total{key=\"bob\",reason=\"too_large\"}"), 1);
    EXPECT_EQ(metric_value(m, "pagoda:api_requests_total{key=\"alice\",endpoint=\"completions\",status=\"200\"}"), 2);
    EXPECT_EQ(m.find("sk-alice"), std::string::npos) << "keys never appear in metrics";
}

TEST(ServeE2E, MalformedRequestsGetOpenAiErrors) {
    ServeProcess s({"--max-body-bytes", "4096", "--max-tokens-limit", "100", "--max-prompt-tokens", "50"});
    auto err = [&](const std::string& path, const std::string& body, int want_status, const std::string& want_code,
                   const std::string& method = "POST") {
        HttpResult r = http_request(s.port(), method, path, body);
        EXPECT_EQ(r.status, want_status) << path << " " << body.substr(0, 80) << " -> " << r.body;
        json j = json::parse(r.body, nullptr, false);
        ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
        for (const char* f : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(f)) << f;
        if (!want_code.empty()) {
            EXPECT_EQ(j["error"]["code"], want_code) << r.body;
        }
    };
    err("/v1/completions", "{\"prompt\": ", 400, "invalid_json");
    err("/v1/completions", "{\"prompt\": \"\xc3\x28\"}", 400, "invalid_json");  // invalid UTF-8
    err("/v1/completions", "", 400, "invalid_json");
    err("/v1/completions", R"({"prompt":"x","n":"two"})", 400, "invalid_type");
    err("/v1/completions", R"({"prompt":"x","max_tokens":101})", 400, "invalid_value");
    err("/v1/completions", R"({"prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,
        30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51]})", 400, "context_length_exceeded");
    err("/v1/completions", R"({"prompt":[100000]})", 400, "invalid_value");
    err("/v1/completions", R"({"prompt":"x","model":"gpt-4"})", 404, "model_not_found");
    err("/v1/chat/completions", R"({"messages":[{"role":"user"}],"logprobs":1})", 400, "invalid_type");
    err("/v1/completions", "{\"prompt\":\"" + std::string(8000, 'a') + "\"}", 413, "request_too_large");
    err("/v1/nothing", "{}", 404, "not_found");
    err("/v1/completions", "", 405, "method_not_allowed", "GET");
    // The server is still fine afterwards.
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})").status, 200);
    // Garbage that is not HTTP at all.
    RawClient c(s.port());
    c.send("\x16\x03\x01 hello?\r\n\r\n");
    HttpResult r = parse_http_response(c.read_all(5000));
    EXPECT_EQ(r.status, 400);
}

TEST(ServeE2E, SlowLorisIsTimedOutWithoutBlockingOthers) {
    ServeProcess s({"--request-timeout", "1"});
    RawClient slow(s.port());
    const auto start = Clock::now();
    slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        slow.send("X-Slow-" + std::to_string(i) + ": y\r\n");
        // Meanwhile other clients are served normally.
        EXPECT_EQ(http_request(s.port(), "GET", "/health", "", {}, 2000).status, 200);
    }
    std::string rest = slow.read_all(5000);
    EXPECT_TRUE(slow.eof()) << "the server closed the slow connection";
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(waited, 4.0);
    EXPECT_GE(waited, 0.9);
}

TEST(ServeE2E, AdmissionControlRefusesWhenTheQueueIsFull) {
    // One sequence runs at a time and no request may wait: a third request is refused at once.
    ServeProcess s({"--max-queue", "0", "--max-seqs", "1", "--max-batched-tokens", "64"}, server_test_model(true));
    HttpResult ready = http_request(s.port(), "GET", "/readyz");
    EXPECT_EQ(ready.status, 200);
    EXPECT_EQ(json::parse(ready.body)["status"], "ready");
    RawClient running(s.port()), waiting(s.port());
    running.send(post_bytes("/v1/completions", R"({"prompt":"a","max_tokens":4000,"ignore_eos":true,"stream":true})"));
    ASSERT_FALSE(running.read_some(10000).empty());
    waiting.send(post_bytes("/v1/completions", R"({"prompt":"b","max_tokens":1})"));
    std::string m = wait_metrics(s.port(), [](const std::string& t) { return metric_value(t, "pagoda:num_requests_waiting") == 1; });
    ASSERT_EQ(metric_value(m, "pagoda:num_requests_waiting"), 1) << m;
    HttpResult r = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})");
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "queue_full");
    EXPECT_EQ(r.headers["retry-after"], "1");
    // Readiness follows the same rule (a balancer stops sending here); liveness does not.
    HttpResult not_ready = http_request(s.port(), "GET", "/readyz");
    EXPECT_EQ(not_ready.status, 503);
    EXPECT_EQ(json::parse(not_ready.body)["status"], "queue_full");
    EXPECT_EQ(http_request(s.port(), "GET", "/livez").status, 200);
    running.close();  // the waiting request now runs and is answered
    HttpResult w = parse_http_response(waiting.read_some(20000));
    EXPECT_EQ(w.status, 200);
}

TEST(ServeE2E, MetricsPassPromtool) {
    // With vLLM's names too, so promtool checks the whole exposition; with the int8 KV cache, so a
    // q8 server is driven end to end (the completion and the token count) and says so in its labels.
    ServeProcess s({"--metrics-compat", "vllm", "--kv-type", "q8"});
    ASSERT_EQ(http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"hello","max_tokens":3,"ignore_eos":true})").status,
              200);
    // Engine counters are a snapshot taken after each step: wait for the one after the last token.
    wait_metrics(s.port(), [](const std::string& t) { return metric_value(t, "pagoda:generation_tokens_total") == 3; });
    HttpResult m = http_request(s.port(), "GET", "/metrics");
    ASSERT_EQ(m.status, 200);
    EXPECT_EQ(m.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(metric_value(m.body, "pagoda:generation_tokens_total"), 3);
    EXPECT_EQ(metric_value(m.body, "pagoda:time_to_first_token_seconds_count"), 1);
    EXPECT_EQ(metric_value(m.body, "pagoda:model_ready"), 1);
    EXPECT_GT(metric_value(m.body, "pagoda:time_to_ready_seconds"), 0);
    EXPECT_LT(metric_value(m.body, "pagoda:time_to_ready_seconds"), 30);
    // The KV cache's shape as an info series, and the same series under vLLM's names.
    const std::string blocks = std::to_string(int64_t(metric_value(m.body, "pagoda:kv_cache_blocks")));
    const std::string config = "{block_size=\"16\",num_blocks=\"" + blocks + "\",cache_dtype=\"q8\"}";
    EXPECT_EQ(metric_value(m.body, "pagoda:cache_config_info" + config), 1) << m.body;
    const std::string vllm_config = "{block_size=\"16\",num_gpu_blocks=\"" + blocks + "\",cache_dtype=\"q8\"}";
    EXPECT_EQ(metric_value(m.body, "vllm:cache_config_info" + vllm_config), 1) << m.body;
    const std::string model = "{model_name=\"serve-tiny\"}";
    EXPECT_EQ(metric_value(m.body, "vllm:generation_tokens_total" + model), 3);
    EXPECT_EQ(metric_value(m.body, "vllm:num_requests_waiting" + model), 0);
    EXPECT_EQ(metric_value(m.body, "vllm:kv_cache_usage_perc" + model), metric_value(m.body, "pagoda:kv_cache_usage_perc"));
    EXPECT_EQ(metric_value(m.body, "vllm:gpu_cache_usage_perc" + model), metric_value(m.body, "pagoda:kv_cache_usage_perc"));
    EXPECT_EQ(metric_value(m.body, "vllm:e2e_request_latency_seconds_count" + model), 1);
    if (std::system("command -v promtool >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "promtool not found (Debian package 'prometheus'; scripts/install-deps.sh installs it)";
    const std::string path = temp_path("metrics.txt"), out = temp_path("promtool.out");
    std::ofstream(path) << m.body;
    int rc = std::system(("promtool check metrics < " + path + " > " + out + " 2>&1").c_str());
    std::ifstream in(out);
    std::string report((std::istreambuf_iterator<char>(in)), {});
    // The `pagoda:` prefix is shaped after vLLM's `vllm:` names on purpose; promtool's
    // linter flags every ':' as a style issue (exit 3). Anything else — a parse error (exit 1) or
    // another lint finding — fails the test.
    EXPECT_TRUE(WIFEXITED(rc) && (WEXITSTATUS(rc) == 0 || WEXITSTATUS(rc) == 3)) << report;
    std::istringstream lines(report);
    std::string line;
    int findings = 0;
    while (std::getline(lines, line)) {
        ++findings;
        EXPECT_NE(line.find("metric names should not contain ':'"), std::string::npos) << line;
    }
    EXPECT_GT(findings, 0) << "promtool ran and saw the pagoda: metrics";
}

TEST(ServeE2E, ShutdownDrainsThenEndsTheRestWithAnError) {
    // The long requests (4000 tokens, the server's largest max_tokens) must still be running 3 s after
    // SIGTERM on every host: the deep model with the scalar kernels decodes ~280 tokens/s on the AMX
    // Xeon (over 14 s for them), where the slow model with AVX-512 made ~590 (7 s).
    EnvGuard scalar("PAGODA_ISA", "scalar");  // inherited by the server process
    ServeProcess s({"--shutdown-timeout", "3"}, server_deep_test_model());
    RawClient longjson(s.port()), longreq(s.port()), shortreq(s.port());
    longjson.send(post_bytes("/v1/completions", R"({"prompt":"z","max_tokens":4000,"ignore_eos":true})"));
    longreq.send(post_bytes("/v1/completions", R"({"prompt":"y","max_tokens":4000,"ignore_eos":true,"stream":true})"));
    std::string first = longreq.read_some(10000);  // it is running
    ASSERT_FALSE(first.empty());
    wait_metrics(s.port(), [](const std::string& t) { return metric_value(t, "pagoda:num_requests_running") >= 2; });
    shortreq.send(post_bytes("/v1/completions", R"({"prompt":"x","max_tokens":4,"ignore_eos":true,"stream":true})"));
    std::string short_first = shortreq.read_some(10000);  // admitted: the stream head is out
    ASSERT_FALSE(short_first.empty());
    const auto t0 = Clock::now();
    EXPECT_EQ(kill(s.pid(), SIGTERM), 0);

    // Draining: still answering, but not ready and admitting nothing new.
    HttpResult ready;  // the signal is handled within milliseconds
    for (int i = 0; i < 200 && (ready = http_request(s.port(), "GET", "/readyz")).status != 503; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(ready.status, 503);
    EXPECT_EQ(json::parse(ready.body)["status"], "draining");
    EXPECT_EQ(http_request(s.port(), "GET", "/livez").status, 200);
    HttpResult refused = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"w","max_tokens":1})");
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(json::parse(refused.body)["error"]["code"], "shutting_down");

    // In flight: the short request finishes normally; the long ones are ended after the timeout
    // with a clear error, the stream as its last event before [DONE].
    std::string a = short_first + shortreq.read_all(10000), b = first + longreq.read_all(10000);
    const double cut_after = std::chrono::duration<double>(Clock::now() - t0).count();
    bool done_a = false, done_b = false;
    auto ea = sse_events(parse_http_response(a).body, &done_a);
    auto eb = sse_events(parse_http_response(b).body, &done_b);
    EXPECT_TRUE(done_a) << a;
    EXPECT_EQ(ea.back()["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(done_b) << "the cut-off stream still ends properly";
    EXPECT_EQ(eb.back()["error"]["code"], "shutting_down") << eb.back();
    EXPECT_GE(cut_after, 2.5) << "in-flight requests get the whole shutdown timeout";
    HttpResult j = parse_http_response(longjson.read_all(10000));
    EXPECT_EQ(j.status, 503);
    EXPECT_EQ(json::parse(j.body)["error"]["code"], "shutting_down") << j.body;

    EXPECT_EQ(s.wait_exit(10), 0);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
    EXPECT_EQ(http_request(s.port(), "GET", "/health", "", {}, 1000).status, 0) << "no longer listening";
}

// The exit race of keep-alive: after SIGTERM a keep-alive connection that was idle is still
// answered (its client's pool may be sending on it this instant) and told Connection: close; a
// request half received when the drain would end is answered before the I/O stops, and so is one
// from a connection opened during the drain; every answer during the drain says Connection: close.
TEST(ServeE2E, ShutdownAnswersKeepAliveAndRequestsBeingRead) {
    ServeProcess s({"--shutdown-timeout", "5"});
    const std::string health = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    RawClient idle(s.port()), half(s.port());
    for (RawClient* c : {&idle, &half}) {  // each has served one request and stays open
        c->send(health);
        std::string raw;
        for (int i = 0; i < 50 && raw.find("\r\n\r\n") == std::string::npos; ++i) raw += c->read_some(200);
        ASSERT_EQ(parse_http_response(raw).status, 200) << raw;
        ASSERT_FALSE(c->eof());
    }
    const std::string request = post_bytes("/v1/completions", R"({"prompt":"x","max_tokens":2})");
    half.send(request.substr(0, 20));  // the request line, partly
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(kill(s.pid(), SIGTERM), 0);
    RawClient late(s.port());  // connected during the drain, sends a moment later
    std::this_thread::sleep_for(std::chrono::milliseconds(400));

    // The connection idle at SIGTERM is still open and answers, then closes.
    idle.send("GET /livez HTTP/1.1\r\nHost: t\r\n\r\n");
    HttpResult live = parse_http_response(idle.read_all(5000));
    EXPECT_EQ(live.status, 200);
    EXPECT_EQ(live.headers["connection"], "close");
    EXPECT_TRUE(idle.eof());

    // The half-sent request and the late one are answered (503, the drain), then closed.
    half.send(request.substr(20));
    late.send(request);
    for (RawClient* c : {&half, &late}) {
        HttpResult r = parse_http_response(c->read_all(5000));
        EXPECT_EQ(r.status, 503);
        EXPECT_EQ(r.headers["connection"], "close");
        EXPECT_TRUE(c->eof());
    }
    EXPECT_EQ(s.wait_exit(10), 0);
}

TEST(ServeE2E, ShutdownWithNothingInFlightIsImmediate) {
    ServeProcess s({"--shutdown-timeout", "30"});
    const auto t0 = Clock::now();
    EXPECT_EQ(s.terminate(10), 0);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
}

TEST(ServeE2E, BenchServeReportsEveryRequest) {
    ServeProcess s({});
    auto r = run_pagoda({"bench-serve", "--url", "http://127.0.0.1:" + std::to_string(s.port()), "--requests", "6",
                         "--concurrency", "3", "--prompt-len", "40", "--shared-prefix", "32", "--output-len", "5",
                         "--stream", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    json out = json::parse(r.out);
    EXPECT_EQ(out["ok"], 6);
    EXPECT_EQ(out["errors"], 0);
    EXPECT_GT(out["output_token_throughput"].get<double>(), 0);
    EXPECT_LE(out["ttft_s"]["p50"].get<double>(), out["e2e_s"]["p50"].get<double>());
    std::string m = wait_metrics(s.port(), [](const std::string& t) { return metric_value(t, "pagoda:generation_tokens_total") == 30; });
    EXPECT_EQ(metric_value(m, "pagoda:generation_tokens_total"), 30);
    EXPECT_GT(metric_value(m, "pagoda:prefix_cache_hits_total"), 0) << "the shared prefix is served from the cache";
    // A server that is not there is an error, not a hang.
    auto none = run_pagoda({"bench-serve", "--url", "http://127.0.0.1:1", "--requests", "1"});
    EXPECT_NE(none.exit_code, 0);
    EXPECT_NE(none.err.find("error"), std::string::npos) << none.err;
}

TEST(ServeE2E, RealModelReproducesTheReferenceGreedyText) {
    const std::string model = fixture("models/stories260K.gguf");
    const std::string golden_path = fixture("models/golden/stories260K_greedy_once_upon_a_time_n200.txt");
    PAGODA_REQUIRE_FIXTURE(model);
    PAGODA_REQUIRE_FIXTURE(golden_path);
    std::ifstream in(golden_path);
    std::string golden((std::istreambuf_iterator<char>(in)), {});
    const std::string prompt = "Once upon a time";
    ASSERT_EQ(golden.rfind(prompt, 0), 0u);
    const std::string continuation = golden.substr(prompt.size());
    ServeProcess s({}, model);
    // llama2.c's reference run, through the whole server: streamed and not, the same text.
    const json body = {{"prompt", prompt}, {"max_tokens", 120}, {"temperature", 0}};
    HttpResult r = http_request(s.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = json::parse(r.body)["choices"][0]["text"];
    EXPECT_GE(text.size(), 250u);
    EXPECT_EQ(continuation.substr(0, text.size()), text);
    json sbody = body;
    sbody["stream"] = true;
    std::string streamed;
    for (const auto& e : sse_events(http_request(s.port(), "POST", "/v1/completions", sbody.dump()).body))
        streamed += e["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(streamed, text);
}

TEST(ServeE2E, HeartbeatCommentsWhileALongPromptPrefills) {
    // 1 000 prefill steps of 2 tokens: each step reads the whole model, so the prefill lasts ~10x the
    // 50 ms heartbeat even on the fastest host met (a Xeon with the model in L3: ~0.2 ms a step; the
    // 24 steps of 4 tokens this test used before finished there within 50 ms).
    ServeProcess s({"--heartbeat-seconds", "0.05", "--max-batched-tokens", "2", "--max-seqs", "2"}, server_test_model(true));
    json prompt = json::array();
    for (int i = 0; i < 2000; ++i) prompt.push_back(3 + (i * 37) % 500);
    const json body = {{"prompt", prompt}, {"max_tokens", 2}, {"stream", true}};
    HttpResult r = http_request(s.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
    const size_t ping = r.body.find(": ping\n\n"), first = r.body.find("data: ");
    ASSERT_NE(ping, std::string::npos) << "no heartbeat during a multi-step prefill";
    EXPECT_LT(ping, first) << "the heartbeat came before the first token";
    pagoda::server::SseParser p;
    p.feed(r.body);
    EXPECT_GE(p.comments(), 1u);
}

TEST(ServeE2E, PerKeyConcurrencyLimit) {
    const std::string keys = temp_path("conc-keys.txt");
    std::ofstream(keys) << "sk-dave-000001 name=dave concurrency=1\n";
    ServeProcess s({"--api-key-file", keys, "--open-health", "--open-metrics"}, server_test_model(true));
    const std::string auth = "Authorization: Bearer sk-dave-000001\r\n";
    {
        RawClient first(s.port());
        first.send(post_bytes("/v1/completions", R"({"prompt":"a","max_tokens":4000,"ignore_eos":true,"stream":true})", auth));
        ASSERT_FALSE(first.read_some(10000).empty());
        HttpResult second = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"b","max_tokens":1})",
                                         {"Authorization: Bearer sk-dave-000001"});
        EXPECT_EQ(second.status, 429);
        EXPECT_NE(json::parse(second.body)["error"]["message"].get<std::string>().find("concurrent"), std::string::npos);
    }  // the first request's client hangs up: its seat frees once the engine has cancelled it
    wait_metrics(s.port(), [](const std::string& t) {
        return metric_value(t, "pagoda:api_requests_total{key=\"dave\",endpoint=\"completions\",status=\"499\"}") == 1;
    });
    HttpResult third = http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"c","max_tokens":1})",
                                    {"Authorization: Bearer sk-dave-000001"});
    EXPECT_EQ(third.status, 200) << third.body;
}

TEST(ServeE2E, GenerationsOutlastTheRequestTimeout) {
    // --request-timeout bounds receiving a request, not answering it. The deep model with the scalar
    // kernels: 300 tokens take ~1 s on the fastest host met, well past the 0.2 s; a host fast enough
    // to finish within 0.3 s shows nothing, so the generation grows until it outlasts that.
    EnvGuard scalar("PAGODA_ISA", "scalar");  // inherited by the server process
    ServeProcess s({"--request-timeout", "0.2"}, server_deep_test_model());
    double took = 0;
    for (int max_tokens : {300, 1200, 4000}) {
        const auto t0 = Clock::now();
        HttpResult r = http_request(s.port(), "POST", "/v1/completions",
                                    json{{"prompt", "x"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", true}}.dump(),
                                    {}, 120000);
        took = std::chrono::duration<double>(Clock::now() - t0).count();
        ASSERT_EQ(r.status, 200);
        bool done = false;
        auto events = sse_events(r.body, &done);
        EXPECT_TRUE(done) << "stream cut after " << took << " s";
        ASSERT_FALSE(events.empty());
        EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
        if (took >= 0.3) break;
    }
    EXPECT_GE(took, 0.3) << "even 4000 tokens finished within the timeout: nothing shown";
}
