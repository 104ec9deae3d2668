// The dashboard's state document (GET /v1/state; fields in docs/api.md): the engine's gauges and
// counters (EngineStats), its KV pool block by block (KvSnapshot, as runs), and the windowed
// figures of LiveStats. Pure: the gateway gathers the inputs, this only shapes them.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine_stats.h"
#include "engine/kv_snapshot.h"
#include "vision/encoded_image_cache.h"

namespace pagoda::server {

struct DashboardInputs {
    std::string model;
    std::string status;             // ready, loading, draining, failed
    std::string error;              // the load error when failed
    double uptime_seconds = 0;
    int64_t max_batched_tokens = 0, max_seqs = 0, max_queue = 0;
    const engine::EngineStats* stats = nullptr;  // null unless the engine runs
    const engine::KvSnapshot* kv = nullptr;      // null unless the engine runs
    engine::Clock::time_point now{};             // for the snapshot's age
    nlohmann::json live = nlohmann::json::object();  // LiveStats::to_json
    std::optional<vision::ImageCacheStats> image_cache;  // the encoded-image cache (none: no --mmproj, or off)
};

nlohmann::json dashboard_state_json(const DashboardInputs& in);

// The "kv" part: counts, the snapshot's age and the block map as runs of equal blocks in block-id
// order — [n, "f"] free, [n, "c"] cached (reusable prefix), [n, "u", seq] used by sequence seq alone,
// [n, "s", seq] used and shared by several sequences (seq: the lowest of them) — and the sequences.
nlohmann::json kv_state_json(const engine::KvSnapshot& kv, engine::Clock::time_point now);

}  // namespace pagoda::server
