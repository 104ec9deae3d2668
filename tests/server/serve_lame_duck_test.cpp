// `pagoda serve`'s lame-duck drain (--drain-grace) over real sockets: after SIGTERM /readyz fails at
// once while new requests are still served for the grace; then they are refused (503, Retry-After,
// Connection: close) and the requests in flight get --shutdown-timeout. tests/e2e/node/deploy/
// lame_duck.test.js runs it behind HAProxy.
#include <chrono>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <thread>

#include "env_guard.h"
#include "server/serve_harness.h"
#include "server/sse.h"

using namespace pagoda::test;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string post_bytes(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::vector<json> sse_events(const std::string& body, bool* saw_done) {
    pagoda::server::SseParser p;
    std::vector<json> out;
    for (auto& e : p.feed(body)) {
        if (e == "[DONE]") {
            *saw_done = true;
            continue;
        }
        out.push_back(json::parse(e));
    }
    return out;
}

// The lame duck (--drain-grace): after SIGTERM /readyz fails at once, but a new request is still
// served (with Connection: close) until the grace is over, what a balancer sends before its check
// notices. Then new requests get 503 shutting_down with Retry-After and Connection: close, and the
// request in flight runs on until the shutdown timeout, counted from the end of the grace.
TEST(ServeLameDuck, DrainGraceServesNewRequestsWhileNotReady) {
    EnvGuard scalar("PAGODA_ISA", "scalar");  // the long request outlives grace + timeout (see above)
    ServeProcess s({"--drain-grace", "2", "--shutdown-timeout", "3"}, server_deep_test_model());
    RawClient longreq(s.port());
    longreq.send(post_bytes("/v1/completions", R"({"prompt":"y","max_tokens":4000,"ignore_eos":true,"stream":true})"));
    const std::string first = longreq.read_some(10000);
    ASSERT_FALSE(first.empty());
    const auto t0 = Clock::now();
    auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    ASSERT_EQ(kill(s.pid(), SIGTERM), 0);
    HttpResult ready;
    for (int i = 0; i < 200 && (ready = http_request(s.port(), "GET", "/readyz")).status != 503; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(ready.status, 503);
    EXPECT_EQ(json::parse(ready.body)["status"], "draining");

    const std::string request = post_bytes("/v1/completions", R"({"prompt":"w","max_tokens":2})");
    RawClient during(s.port());
    during.send(request);
    HttpResult served = parse_http_response(during.read_all(10000));
    const bool in_grace = since() < 1.8;  // a machine this slow proves nothing about the grace
    if (in_grace) {
        EXPECT_EQ(served.status, 200) << served.body;
        EXPECT_EQ(served.headers["connection"], "close");
        EXPECT_TRUE(during.eof());
    }

    while (since() < 2.5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    RawClient after(s.port());
    after.send(request);
    HttpResult refused = parse_http_response(after.read_all(10000));
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(json::parse(refused.body)["error"]["code"], "shutting_down");
    EXPECT_EQ(refused.headers["retry-after"], "1");
    EXPECT_EQ(refused.headers["connection"], "close");

    // The stream in flight is cut only at grace + shutdown timeout (2 + 3 s), with an error event.
    std::string rest = first + longreq.read_all(15000);
    EXPECT_GE(since(), 4.5);
    bool done = false;
    auto events = sse_events(parse_http_response(rest).body, &done);
    EXPECT_TRUE(done);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["error"]["code"], "shutting_down");
    EXPECT_EQ(s.wait_exit(10), 0);
}

// A second signal ends the grace: an operator's second Ctrl-C stops at once.
TEST(ServeLameDuck, SecondSignalEndsTheDrainGrace) {
    ServeProcess s({"--drain-grace", "60"});
    const auto t0 = Clock::now();
    ASSERT_EQ(kill(s.pid(), SIGTERM), 0);
    HttpResult ready;
    for (int i = 0; i < 200 && (ready = http_request(s.port(), "GET", "/readyz")).status != 503; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(ready.status, 503);
    EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", R"({"prompt":"w","max_tokens":1})").status, 200)
        << "served during the grace";
    ASSERT_EQ(kill(s.pid(), SIGINT), 0);
    EXPECT_EQ(s.wait_exit(10), 0);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
}

}  // namespace
