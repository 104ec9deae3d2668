#include "server/dashboard_state.h"

#include <chrono>

namespace pagoda::server {

using json = nlohmann::json;

namespace {

const char* status_name(engine::SeqStatus s) {
    switch (s) {
        case engine::SeqStatus::waiting: return "waiting";
        case engine::SeqStatus::running: return "running";
        case engine::SeqStatus::finished: return "finished";
    }
    return "unknown";
}

}  // namespace

json kv_state_json(const engine::KvSnapshot& kv, engine::Clock::time_point now) {
    const kv::BlockMap& m = kv.blocks;
    json runs = json::array();
    int32_t b = 0;
    const int32_t n = m.n_blocks();
    auto code = [&](int32_t i) -> char {
        switch (m.use[size_t(i)]) {
            case kv::BlockUse::free: return 'f';
            case kv::BlockUse::cached: return 'c';
            case kv::BlockUse::used: return m.holders[size_t(i)] > 1 ? 's' : 'u';
        }
        return 'f';
    };
    while (b < n) {
        const char c = code(b);
        const kv::SeqId owner = m.owner[size_t(b)];
        int32_t e = b + 1;
        while (e < n && code(e) == c && m.owner[size_t(e)] == owner) ++e;
        json run = json::array({e - b, std::string(1, c)});
        if (c == 'u' || c == 's') run.push_back(owner);
        runs.push_back(std::move(run));
        b = e;
    }
    json seqs = json::array();
    for (const auto& s : kv.sequences)
        seqs.push_back({{"seq", s.seq}, {"request", s.request}, {"choice", s.choice}, {"status", status_name(s.status)},
                        {"tokens", s.tokens}, {"computed", s.computed}, {"blocks", s.blocks}});
    const bool taken = kv.taken != engine::Clock::time_point{};
    return {{"block_size", m.block_size},
            {"blocks", n},
            {"free", m.n_free},
            {"cached", m.n_cached},
            {"used", m.n_used},
            {"step", kv.step},
            {"age_ms", taken ? json(std::chrono::duration<double, std::milli>(now - kv.taken).count()) : json(nullptr)},
            {"map", std::move(runs)},
            {"sequences", std::move(seqs)}};
}

json dashboard_state_json(const DashboardInputs& in) {
    json out = {{"object", "pagoda.state"},
                {"model", in.model},
                {"status", in.status},
                {"uptime_seconds", in.uptime_seconds}};
    if (!in.error.empty()) out["error"] = in.error;
    out["limits"] = {{"max_batched_tokens", in.max_batched_tokens}, {"max_seqs", in.max_seqs}, {"max_queue", in.max_queue}};
    if (in.stats) {
        const engine::EngineStats& s = *in.stats;
        out["engine"] = {{"running_requests", s.running_requests},
                         {"waiting_requests", s.waiting_requests},
                         {"running_sequences", s.running_sequences},
                         {"waiting_sequences", s.waiting_sequences},
                         {"steps", s.steps},
                         {"prompt_tokens", s.prompt_tokens},
                         {"computed_prompt_tokens", s.computed_prompt_tokens},
                         {"generation_tokens", s.generation_tokens},
                         {"preemptions", s.preemptions},
                         {"requests_finished", s.requests_finished},
                         {"requests_cancelled", s.requests_cancelled},
                         {"requests_failed", s.requests_failed},
                         {"requests_rejected", s.requests_rejected},
                         {"kv_usage", s.kv_usage}};
        out["prefix_cache"] = {{"enabled", s.prefix_caching},
                               {"queried_tokens", s.prefix_queried_tokens},
                               {"hit_tokens", s.prefix_hit_tokens},
                               {"hit_rate", s.prefix_hit_rate()},
                               {"state_snapshot_slots", s.state_snapshot_slots},
                               {"state_snapshots", s.state_snapshots},
                               {"state_snapshots_taken", s.state_snapshots_taken},
                               {"state_snapshot_restores", s.state_snapshot_restores}};
    } else {
        out["engine"] = nullptr;
        out["prefix_cache"] = nullptr;
    }
    out["kv"] = in.kv ? kv_state_json(*in.kv, in.now) : json(nullptr);
    if (const auto& c = in.image_cache)
        out["image_cache"] = {{"hits", c->hits},       {"misses", c->misses},   {"evictions", c->evictions},
                              {"entries", c->entries}, {"bytes", c->bytes},     {"capacity_bytes", c->capacity_bytes}};
    else out["image_cache"] = nullptr;
    for (const auto& [k, v] : in.live.items()) out[k] = v;
    return out;
}

}  // namespace pagoda::server
