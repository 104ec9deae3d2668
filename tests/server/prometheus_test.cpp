// Prometheus text exposition: exact output for counters, gauges, labelled series and histograms.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/prometheus.h"
#include "server/server_metrics.h"

using namespace pagoda::server;

TEST(Prometheus, RendersFamiliesExactly) {
    MetricRegistry r;
    r.add_counter("app:requests_total", "Requests answered", {"key", "status"});
    r.add_gauge("app:queue", "Waiting requests");
    r.add_histogram("app:latency_seconds", "Latency", {0.1, 1});
    r.inc("app:requests_total", {"alice", "200"});
    r.inc("app:requests_total", {"alice", "200"}, 2);
    r.inc("app:requests_total", {"b\"o\\b\n", "429"});
    r.set("app:queue", 2.5);
    r.observe("app:latency_seconds", 0.05);
    r.observe("app:latency_seconds", 0.1);  // le is inclusive
    r.observe("app:latency_seconds", 3);
    EXPECT_EQ(r.render(),
              "# HELP app:requests_total Requests answered\n"
              "# TYPE app:requests_total counter\n"
              "app:requests_total{key=\"alice\",status=\"200\"} 3\n"
              "app:requests_total{key=\"b\\\"o\\\\b\\n\",status=\"429\"} 1\n"
              "# HELP app:queue Waiting requests\n"
              "# TYPE app:queue gauge\n"
              "app:queue 2.5\n"
              "# HELP app:latency_seconds Latency\n"
              "# TYPE app:latency_seconds histogram\n"
              "app:latency_seconds_bucket{le=\"0.1\"} 2\n"
              "app:latency_seconds_bucket{le=\"1\"} 2\n"
              "app:latency_seconds_bucket{le=\"+Inf\"} 3\n"
              "app:latency_seconds_sum 3.15\n"
              "app:latency_seconds_count 3\n");
    EXPECT_EQ(r.value("app:requests_total", {"alice", "200"}), 3);
    EXPECT_EQ(r.count("app:latency_seconds"), 3u);
}

TEST(Prometheus, EmptyUnlabelledFamiliesShowZero) {
    MetricRegistry r;
    r.add_counter("x_total", "x");
    r.add_histogram("h", "h", {1});
    r.add_counter("labelled_total", "l", {"k"});
    EXPECT_EQ(r.render(),
              "# HELP x_total x\n# TYPE x_total counter\nx_total 0\n"
              "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n"
              "# HELP labelled_total l\n# TYPE labelled_total counter\n");
}

TEST(Prometheus, AliasesRenderTheSameSeriesUnderAnotherNameWithConstantLabels) {
    MetricRegistry r;
    r.add_counter("app:done_total", "Done", {"reason"});
    r.add_histogram("app:size", "Size", {1});
    r.add_alias("app:done_total", "other:done_total", {{"model_name", "m"}});
    r.add_alias("app:size", "other:size", {{"model_name", "m"}});
    r.inc("app:done_total", {"stop"}, 2);
    EXPECT_EQ(r.render(),
              "# HELP app:done_total Done\n# TYPE app:done_total counter\napp:done_total{reason=\"stop\"} 2\n"
              "# HELP app:size Size\n# TYPE app:size histogram\n"
              "app:size_bucket{le=\"1\"} 0\napp:size_bucket{le=\"+Inf\"} 0\napp:size_sum 0\napp:size_count 0\n"
              "# HELP other:done_total Done\n# TYPE other:done_total counter\n"
              "other:done_total{model_name=\"m\",reason=\"stop\"} 2\n"
              "# HELP other:size Size\n# TYPE other:size histogram\n"
              "other:size_bucket{model_name=\"m\",le=\"1\"} 0\nother:size_bucket{model_name=\"m\",le=\"+Inf\"} 0\n"
              "other:size_sum{model_name=\"m\"} 0\nother:size_count{model_name=\"m\"} 0\n");
    EXPECT_THROW(r.add_alias("app:size", "app:done_total"), pagoda::Error);
    EXPECT_THROW(r.add_alias("app:size", "other:size"), pagoda::Error);
    EXPECT_THROW(r.add_alias("nope", "other:nope"), pagoda::Error);
}

TEST(Prometheus, VllmCompatServesVllmNamesWithTheModelName) {
    pagoda::engine::EngineStats s;
    s.waiting_requests = 3;
    s.kv_usage = 0.25;
    ServerMetrics plain;
    plain.set_cache_config(16, 500, "q8");
    const std::string plain_text = plain.render(&s, true);
    EXPECT_NE(plain_text.find("pagoda:cache_config_info{block_size=\"16\",num_blocks=\"500\",cache_dtype=\"q8\"} 1\n"), std::string::npos);
    EXPECT_EQ(plain_text.find("vllm:"), std::string::npos) << "vLLM names only with MetricsCompat::vllm";

    // Every series carries the served model's name (as vLLM's do), and once only.
    ServerMetrics named(MetricsCompat::none, "tiny");
    EXPECT_NE(named.render(&s, true).find("pagoda:num_requests_waiting{model_name=\"tiny\"} 3\n"), std::string::npos);
    ServerMetrics compat(MetricsCompat::vllm, "tiny");
    compat.set_cache_config(16, 500, "q8");
    const std::string text = compat.render(&s, true);
    for (const char* line : {"pagoda:num_requests_waiting{model_name=\"tiny\"} 3\n",
                             "pagoda:kv_cache_usage_perc{model_name=\"tiny\"} 0.25\n",
                             "pagoda:cache_config_info{model_name=\"tiny\",block_size=\"16\",num_blocks=\"500\",cache_dtype=\"q8\"} 1\n",
                             "vllm:num_requests_waiting{model_name=\"tiny\"} 3\n",
                             "vllm:kv_cache_usage_perc{model_name=\"tiny\"} 0.25\n",
                             "vllm:gpu_cache_usage_perc{model_name=\"tiny\"} 0.25\n",
                             "vllm:num_requests_running{model_name=\"tiny\"} 0\n",
                             "vllm:time_to_first_token_seconds_count{model_name=\"tiny\"} 0\n",
                             "vllm:cache_config_info{model_name=\"tiny\",block_size=\"16\",num_gpu_blocks=\"500\",cache_dtype=\"q8\"} 1\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line;
}

TEST(Prometheus, MisuseIsAnError) {
    MetricRegistry r;
    r.add_counter("c_total", "c", {"a"});
    EXPECT_THROW(r.add_gauge("c_total", "again"), pagoda::Error);
    EXPECT_THROW(r.inc("c_total", {}), pagoda::Error);
    EXPECT_THROW(r.inc("nope_total"), pagoda::Error);
    EXPECT_THROW(r.add_histogram("h", "h", {1, 1}), pagoda::Error);
    EXPECT_EQ(format_metric_value(1.0 / 0.0), "+Inf");
    EXPECT_EQ(format_metric_value(0.25), "0.25");
}

TEST(Prometheus, ServerMetricsCarryEngineStatsAndKeyNames) {
    ServerMetrics m;
    pagoda::engine::EngineStats s;
    s.running_requests = 2;
    s.waiting_requests = 5;
    s.kv_usage = 0.5;
    s.prefix_queried_tokens = 100;
    s.prefix_hit_tokens = 40;
    s.generation_tokens = 77;
    m.on_api_request("alice", "chat.completions", 200);
    m.on_rejection("alice", "rpm");
    pagoda::engine::FinishedRequest f;
    f.timings.ttft = 0.03;
    f.timings.e2e = 0.5;
    f.timings.inter_token = {0.01, 0.02};
    m.on_request_finished(f);
    const std::string text = m.render(&s, true);
    for (const char* line : {"pagoda:num_requests_running 2\n", "pagoda:num_requests_waiting 5\n",
                             "pagoda:kv_cache_usage_perc 0.5\n", "pagoda:prefix_cache_queries_total 100\n",
                             "pagoda:prefix_cache_hits_total 40\n", "pagoda:generation_tokens_total 77\n",
                             "pagoda:api_requests_total{key=\"alice\",endpoint=\"chat.completions\",status=\"200\"} 1\n",
                             "pagoda:api_rejections_total{key=\"alice\",reason=\"rpm\"} 1\n",
                             "pagoda:time_to_first_token_seconds_count 1\n",
                             "pagoda:inter_token_latency_seconds_count 2\n", "pagoda:model_ready 1\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line;
}

// The prefix tier's series: per-tier hits and sizes appear only for the tiers that are on.
TEST(Prometheus, PrefixTierSeriesFollowTheTiersThatAreOn) {
    pagoda::engine::EngineStats s;
    ServerMetrics off;
    EXPECT_EQ(off.render(&s, true).find("pagoda:prefix_cache_tier_hits_total{"), std::string::npos);
    s.tier_host = true;
    s.tier_host_hit_blocks = 6;
    s.tier_host_bytes = 1024;
    s.tier_miss_blocks = 2;
    s.tier_hit_tokens = 96;
    ServerMetrics host;
    const std::string text = host.render(&s, true);
    for (const char* line : {"pagoda:prefix_cache_tier_hits_total{tier=\"host\"} 6\n",
                             "pagoda:prefix_cache_tier_bytes{tier=\"host\"} 1024\n",
                             "pagoda:prefix_cache_tier_misses_total 2\n",
                             "pagoda:prefix_cache_tier_hit_tokens_total 96\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line;
    EXPECT_EQ(text.find("tier=\"file\""), std::string::npos);
}
