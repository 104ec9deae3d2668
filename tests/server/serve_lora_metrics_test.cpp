// vllm:lora_requests_info (the Gateway API Inference Extension's loraSpec): the adapters of running
// and waiting requests in its labels, max_lora = --max-loras, valued the Unix time of the scrape.
// ServerMetrics alone (exact lines), then a server with one request running and one waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/random_adapter.h"
#include "server/serve_harness.h"
#include "server/server_metrics.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

std::string post_bytes(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The samples of `family` in Prometheus text: each line's labels as written (inside the braces) and value.
std::vector<std::pair<std::string, double>> samples(const std::string& text, const std::string& family) {
    std::vector<std::pair<std::string, double>> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(family + "{", 0) != 0) continue;
        const size_t close = line.rfind('}');
        out.emplace_back(line.substr(family.size() + 1, close - family.size() - 1), std::stod(line.substr(close + 2)));
    }
    return out;
}

TEST(LoraRequestsInfo, OneSeriesNamingRunningAndWaitingAdapters) {
    pagoda::server::ServerMetrics m(pagoda::server::MetricsCompat::vllm, "base");
    pagoda::engine::EngineStats s;
    const std::string before = m.render(&s, true);
    EXPECT_NE(before.find("# TYPE vllm:lora_requests_info gauge"), std::string::npos);
    EXPECT_EQ(samples(before, "vllm:lora_requests_info").size(), 0u) << "no sample before the first state";

    s.running_lora_adapters = {"sql", "summary"};
    s.waiting_lora_adapters = {"chat"};
    const double t0 = unix_now();
    m.set_lora_info(4, s);
    std::string text = m.render(&s, true);
    const double t1 = unix_now();
    auto vllm = samples(text, "vllm:lora_requests_info");
    ASSERT_EQ(vllm.size(), 1u) << text;
    EXPECT_EQ(vllm[0].first,
              "model_name=\"base\",max_lora=\"4\",waiting_lora_adapters=\"chat\",running_lora_adapters=\"sql,summary\"");
    EXPECT_GE(vllm[0].second, t0 - 1e-3);  // the value prints with limited digits
    EXPECT_LE(vllm[0].second, t1 + 1e-3);
    auto own = samples(text, "pagoda:lora_requests_info");
    ASSERT_EQ(own.size(), 1u);
    EXPECT_EQ(own[0].first,
              "model_name=\"base\",max_lora=\"4\",waiting_lora_adapters=\"chat\",running_lora_adapters=\"sql,summary\"");

    // The next state replaces the series: a stale label set would leave "sql" running for ever.
    s.running_lora_adapters.clear();
    s.waiting_lora_adapters.clear();
    m.set_lora_info(4, s);
    text = m.render(&s, true);
    vllm = samples(text, "vllm:lora_requests_info");
    ASSERT_EQ(vllm.size(), 1u) << text;
    EXPECT_EQ(vllm[0].first, "model_name=\"base\",max_lora=\"4\",waiting_lora_adapters=\"\",running_lora_adapters=\"\"");
}

TEST(LoraRequestsInfo, WithoutVllmNamesOnlyPagodasSeries) {
    pagoda::server::ServerMetrics m(pagoda::server::MetricsCompat::none, "base");
    pagoda::engine::EngineStats s;
    s.running_lora_adapters = {"a"};
    m.set_lora_info(1, s);
    const std::string text = m.render(&s, true);
    EXPECT_EQ(samples(text, "vllm:lora_requests_info").size(), 0u);
    ASSERT_EQ(samples(text, "pagoda:lora_requests_info").size(), 1u);
}

// The labels of the server's one vllm:lora_requests_info sample (empty map when there is none).
std::map<std::string, std::string> lora_info_labels(const std::string& text) {
    std::map<std::string, std::string> out;
    const auto found = samples(text, "vllm:lora_requests_info");
    if (found.size() != 1) return out;
    const std::string& labels = found[0].first;
    for (size_t at = 0; at < labels.size();) {
        const size_t eq = labels.find("=\"", at), end = labels.find('"', eq + 2);
        out[labels.substr(at, eq - at)] = labels.substr(eq + 2, end - eq - 2);
        at = end + 2;  // past '",'
    }
    return out;
}

TEST(ServeLora, LoraRequestsInfoNamesRunningAndWaitingAdapters) {
    auto base = pagoda::gguf::File::open(server_test_model(true));
    const std::string a = temp_path("lora-info-a.gguf"), b = temp_path("lora-info-b.gguf"), c = temp_path("lora-info-c.gguf");
    pagoda::lora::write_random_adapter(*base, {.rank = 4, .alpha = 8, .seed = 31}, a, "");
    pagoda::lora::write_random_adapter(*base, {.rank = 4, .alpha = 8, .seed = 32}, b, "");
    pagoda::lora::write_random_adapter(*base, {.rank = 4, .alpha = 8, .seed = 33}, c, "");
    ServeProcess s({"--lora", "a=" + a, "--lora", "b=" + b, "--lora", "c=" + c, "--max-loras", "2", "--max-seqs", "1",
                    "--metrics-compat", "vllm"},
                   server_test_model(true));
    auto idle = lora_info_labels(wait_metrics(s.port(), [](const std::string& t) { return !lora_info_labels(t).empty(); }));
    EXPECT_EQ(idle["max_lora"], "2");
    EXPECT_EQ(idle["running_lora_adapters"], "");
    EXPECT_EQ(idle["waiting_lora_adapters"], "");
    {
        // One request for a runs (--max-seqs 1); one for b waits behind it.
        auto stream = [](const std::string& model) {
            return json{{"model", model}, {"prompt", "a long story"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}.dump();
        };
        RawClient first(s.port()), second(s.port());
        first.send(post_bytes("/v1/completions", stream("a")));
        std::string got;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (got.find("\"text\"") == std::string::npos && std::chrono::steady_clock::now() < deadline) got += first.read_some(200);
        ASSERT_NE(got.find("\"text\""), std::string::npos) << "no token arrived";
        second.send(post_bytes("/v1/completions", stream("b")));
        const std::string m = wait_metrics(s.port(), [](const std::string& t) {
            return lora_info_labels(t)["waiting_lora_adapters"] == "b";
        });
        auto busy = lora_info_labels(m);
        EXPECT_EQ(busy["running_lora_adapters"], "a") << m;
        EXPECT_EQ(busy["waiting_lora_adapters"], "b") << m;
        EXPECT_EQ(busy["max_lora"], "2");
        EXPECT_FALSE(busy["model_name"].empty()) << "labelled per model, as the other vllm: series";
    }  // both hang up
    auto after = lora_info_labels(wait_metrics(s.port(), [](const std::string& t) {
        auto l = lora_info_labels(t);
        return l["running_lora_adapters"].empty() && l["waiting_lora_adapters"].empty();
    }));
    EXPECT_EQ(after["running_lora_adapters"], "");
    EXPECT_EQ(after["waiting_lora_adapters"], "");
}

}  // namespace
