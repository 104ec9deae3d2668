// The dashboard's state document: the KV map as runs (exact for a known block layout), the engine
// and prefix-cache parts, LiveStats' windowed latency, throughput and per-key figures.
#include "server/dashboard_state.h"

#include <gtest/gtest.h>

#include "server/live_stats.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

engine::KvSnapshot snapshot_of(std::vector<kv::BlockUse> use, std::vector<kv::SeqId> owner, std::vector<int32_t> holders) {
    engine::KvSnapshot k;
    k.blocks.block_size = 16;
    k.blocks.use = std::move(use);
    k.blocks.owner = std::move(owner);
    k.blocks.holders = std::move(holders);
    for (auto u : k.blocks.use)
        ++(u == kv::BlockUse::free ? k.blocks.n_free : u == kv::BlockUse::cached ? k.blocks.n_cached : k.blocks.n_used);
    return k;
}

TEST(DashboardState, KvMapRunsAndSequences) {
    using U = kv::BlockUse;
    engine::KvSnapshot k = snapshot_of({U::used, U::used, U::used, U::used, U::cached, U::cached, U::free, U::used, U::free},
                                       {3, 3, 3, 5, 0, 0, 0, 5, 0}, {2, 2, 1, 1, 0, 0, 0, 1, 0});
    k.step = 42;
    k.sequences.push_back({.seq = 3, .request = 1, .choice = 0, .status = engine::SeqStatus::running, .tokens = 40,
                           .computed = 39, .blocks = 3});
    k.sequences.push_back({.seq = 5, .request = 2, .choice = 1, .status = engine::SeqStatus::waiting, .tokens = 20,
                           .computed = 0, .blocks = 2});
    k.taken = engine::Clock::now();
    const json j = kv_state_json(k, k.taken + std::chrono::milliseconds(7));
    EXPECT_EQ(j["block_size"], 16);
    EXPECT_EQ(j["blocks"], 9);
    EXPECT_EQ(j["used"], 5);
    EXPECT_EQ(j["cached"], 2);
    EXPECT_EQ(j["free"], 2);
    EXPECT_EQ(j["step"], 42);
    EXPECT_NEAR(j["age_ms"].get<double>(), 7.0, 1e-6);
    const json want = json::parse(R"([[2,"s",3],[1,"u",3],[1,"u",5],[2,"c"],[1,"f"],[1,"u",5],[1,"f"]])");
    EXPECT_EQ(j["map"], want);
    ASSERT_EQ(j["sequences"].size(), 2u);
    EXPECT_EQ(j["sequences"][0], json::parse(R"({"seq":3,"request":1,"choice":0,"status":"running","tokens":40,"computed":39,"blocks":3})"));
    EXPECT_EQ(j["sequences"][1]["status"], "waiting");
    EXPECT_EQ(j["sequences"][1]["choice"], 1);
}

TEST(DashboardState, NeverTakenSnapshotHasNoAge) {
    const engine::KvSnapshot k = snapshot_of({kv::BlockUse::free}, {0}, {0});
    EXPECT_TRUE(kv_state_json(k, engine::Clock::now())["age_ms"].is_null());
}

TEST(DashboardState, LoadingServerHasNoEngineParts) {
    DashboardInputs in;
    in.model = "m";
    in.status = "loading";
    in.uptime_seconds = 1.5;
    in.max_batched_tokens = 512;
    in.max_seqs = 8;
    in.max_queue = 64;
    in.live = LiveStats().to_json(1.5);
    const json j = dashboard_state_json(in);
    EXPECT_EQ(j["object"], "pagoda.state");
    EXPECT_EQ(j["status"], "loading");
    EXPECT_EQ(j["model"], "m");
    EXPECT_TRUE(j["engine"].is_null());
    EXPECT_TRUE(j["kv"].is_null());
    EXPECT_TRUE(j["prefix_cache"].is_null());
    EXPECT_TRUE(j["image_cache"].is_null()) << "no encoded-image cache";
    EXPECT_FALSE(j.contains("error"));
    EXPECT_EQ(j["limits"], json::parse(R"({"max_batched_tokens":512,"max_seqs":8,"max_queue":64})"));
    EXPECT_EQ(j["latency"]["ttft"]["count"], 0);
    EXPECT_TRUE(j["latency"]["ttft"]["p50"].is_null());
    EXPECT_EQ(j["keys"], json::array());
}

TEST(DashboardState, EngineAndPrefixCacheCounters) {
    engine::EngineStats s;
    s.running_requests = 2;
    s.waiting_requests = 3;
    s.generation_tokens = 77;
    s.prefix_queried_tokens = 200;
    s.prefix_hit_tokens = 50;
    const engine::KvSnapshot k = snapshot_of({kv::BlockUse::free}, {0}, {0});
    DashboardInputs in;
    in.status = "ready";
    in.stats = &s;
    in.kv = &k;
    const json j = dashboard_state_json(in);
    EXPECT_EQ(j["engine"]["running_requests"], 2);
    EXPECT_EQ(j["engine"]["waiting_requests"], 3);
    EXPECT_EQ(j["engine"]["generation_tokens"], 77);
    EXPECT_EQ(j["prefix_cache"]["hit_tokens"], 50);
    EXPECT_DOUBLE_EQ(j["prefix_cache"]["hit_rate"].get<double>(), 0.25);
    EXPECT_TRUE(j["prefix_cache"]["enabled"].get<bool>());
    EXPECT_EQ(j["kv"]["map"], json::parse(R"([[1,"f"]])"));

    in.image_cache = vision::ImageCacheStats{.hits = 4, .misses = 2, .evictions = 1, .entries = 1, .bytes = 4192,
                                             .capacity_bytes = 1 << 20};
    EXPECT_EQ(dashboard_state_json(in)["image_cache"],
              json::parse(R"({"hits":4,"misses":2,"evictions":1,"entries":1,"bytes":4192,"capacity_bytes":1048576})"));
}

TEST(LiveStats, WindowedLatencyThroughputAndKeys) {
    LiveStats live({5, 12}, 0);  // one-minute window
    engine::FinishedRequest f;
    f.timings.ttft = 0.200;
    f.timings.inter_token = {0.010, 0.010, 0.030};
    live.on_request_finished(f, 12);
    f.timings.ttft = 0.400;
    f.timings.inter_token = {0.010};
    live.on_request_finished(f, 13);
    // 10 steps in [10, 20): 64 budget; 32 tokens each (utilisation 0.5), 8 prefill + 4 sampled, 0.1 s.
    for (int i = 0; i < 10; ++i)
        live.on_step({.n_tokens = 32, .n_decode_tokens = 24, .n_prefill_tokens = 8, .n_sequences = 4, .seconds = 0.1, .n_sampled = 4},
                     64, 10 + i);
    live.on_api_request("alice", 200, 14);
    live.on_api_request("alice", 400, 15);
    live.on_rejection("alice", "rate", 16);
    live.on_rejection("bob", "concurrency", 17);
    live.on_rejection("bob", "concurrency", 18);

    const json j = live.to_json(20, 10);  // recent: slices [10, 20] = 10 s
    EXPECT_EQ(j["window"]["seconds"], 60);
    const json& ttft = j["latency"]["ttft"];
    EXPECT_EQ(ttft["count"], 2);
    EXPECT_DOUBLE_EQ(ttft["p50"].get<double>(), 0.200);  // rank 1 of 2: the minimum, exact
    EXPECT_DOUBLE_EQ(ttft["p99"].get<double>(), 0.400);  // the maximum, exact
    const json& itl = j["latency"]["itl"];
    EXPECT_EQ(itl["count"], 4);
    EXPECT_NEAR(itl["p50"].get<double>(), 0.010, 0.010 * 0.021);
    EXPECT_DOUBLE_EQ(itl["p99"].get<double>(), 0.030);
    ASSERT_EQ(ttft["series"].size(), 12u);
    EXPECT_EQ(ttft["series"][9]["count"], 2);  // slice [10, 15); [20, 25) is the current, last one
    EXPECT_DOUBLE_EQ(ttft["series"][9]["t"].get<double>(), -10);
    EXPECT_EQ(ttft["series"][10]["count"], 0);

    const json& t = j["throughput"];
    EXPECT_DOUBLE_EQ(t["prompt_tokens_per_s"].get<double>(), 80.0 / 10);
    EXPECT_DOUBLE_EQ(t["generation_tokens_per_s"].get<double>(), 40.0 / 10);
    EXPECT_DOUBLE_EQ(t["steps_per_s"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(t["step_utilisation"].get<double>(), 0.5);
    EXPECT_NEAR(t["busy_fraction"].get<double>(), 0.1, 1e-12);
    ASSERT_EQ(t["series"].size(), 12u);
    EXPECT_DOUBLE_EQ(t["series"][10]["generation_tokens_per_s"].get<double>(), 20.0 / 5);
    EXPECT_TRUE(t["series"][0]["step_utilisation"].is_null());

    ASSERT_EQ(j["keys"].size(), 2u);
    const json& alice = j["keys"][0];
    EXPECT_EQ(alice["key"], "alice");
    EXPECT_EQ(alice["requests"], 2);
    EXPECT_EQ(alice["errors"], 1);
    EXPECT_EQ(alice["rejections"], 1);
    EXPECT_DOUBLE_EQ(alice["requests_per_s"].get<double>(), 0.2);
    EXPECT_EQ(alice["rejection_reasons"], json::parse(R"({"rate":1})"));
    EXPECT_EQ(j["keys"][1]["rejection_reasons"], json::parse(R"({"concurrency":2})"));

    // A minute later everything has left the window.
    const json later = live.to_json(90, 10);
    EXPECT_EQ(later["latency"]["ttft"]["count"], 0);
    EXPECT_DOUBLE_EQ(later["throughput"]["generation_tokens_per_s"].get<double>(), 0);
    EXPECT_EQ(later["keys"][0]["requests"], 0);
}

TEST(LiveStats, RatesNeverCountTimeBeforeTheStart) {
    LiveStats live({5, 12}, 100);
    live.on_step({.n_tokens = 1, .n_decode_tokens = 1, .n_sampled = 1}, 8, 101);
    // At t = 102 the server has run 2 s: 1 token over 2 s, not over the 10 s span.
    EXPECT_DOUBLE_EQ(live.to_json(102, 10)["throughput"]["generation_tokens_per_s"].get<double>(), 0.5);
}

}  // namespace
}  // namespace pagoda::server
