// The gateway's /v1/state, apart from gateway.cpp: gathers the engine's stats and KV snapshot and
// the metrics' windows; dashboard_state.cpp shapes the document.
#include "server/dashboard_state.h"
#include "server/gateway.h"

namespace pagoda::server {

SimpleResponse Gateway::live_state() {
    DashboardInputs in;
    in.model = options_.model_name;
    in.uptime_seconds = now_seconds();
    in.max_batched_tokens = options_.scheduler.max_batched_tokens;
    in.max_seqs = options_.scheduler.max_seqs;
    in.max_queue = options_.max_queue;
    in.live = metrics_.live_json();
    engine::EngineStats stats;
    engine::KvSnapshot kv;
    switch (state()) {
        case State::loading: in.status = "loading"; break;
        case State::failed:
            in.status = "failed";
            in.error = load_error_;
            break;
        case State::ready: {
            in.status = lame_duck_ ? "draining" : "ready";
            // engine_ is set once at load and outlives the gateway's use; after shutdown the
            // snapshot is the last one taken (kv_snapshot does not wait for a stopped engine).
            stats = engine_->stats();
            kv = engine_->kv_snapshot();
            in.stats = &stats;
            in.kv = &kv;
            if (images_) in.image_cache = images_->cache_stats();
            break;
        }
    }
    in.now = engine::Clock::now();
    return {200, "application/json", dump_json(dashboard_state_json(in))};
}

}  // namespace pagoda::server
