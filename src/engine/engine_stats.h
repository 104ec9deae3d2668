// Counters and gauges of a running engine, for logs, `bench-throughput` and the server's /metrics.
// A snapshot is copied out under a lock; latency samples go to callbacks (EngineOptions) so the
// caller can feed histograms without the engine keeping unbounded lists.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::kv {
struct PrefixTierStats;
}

namespace pagoda::engine {

struct EngineStats {
    // gauges
    int64_t running_requests = 0, waiting_requests = 0;
    int64_t running_sequences = 0, waiting_sequences = 0;
    // The LoRA adapters (by name, sorted, each once) of running requests and of waiting ones, as
    // running_requests / waiting_requests split them (a request with a running sequence runs).
    std::vector<std::string> running_lora_adapters, waiting_lora_adapters;
    int32_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0;  // cached: evictable prefix blocks
    double kv_usage = 0;  // used / total
    // Whether the prefix cache is on (off by --no-prefix-caching, or for a model with recurrent layers
    // without state slots for snapshots).
    bool prefix_caching = true;
    // A model with recurrent layers: the snapshot slots and the snapshots held, and counters of
    // snapshots taken and of prompts resumed from one (scheduler.h, state_snapshots.h).
    int32_t state_snapshot_slots = 0, state_snapshots = 0;
    int64_t state_snapshots_taken = 0, state_snapshot_restores = 0;
    // counters
    int64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
    int64_t prompt_tokens = 0;          // prompt tokens of admitted requests
    int64_t computed_prompt_tokens = 0; // prefill tokens actually run (cache misses, recomputation)
    int64_t generation_tokens = 0;      // tokens sampled
    int64_t preemptions = 0;
    int64_t steps = 0, step_tokens = 0, max_step_tokens = 0;
    int64_t requests_finished = 0, requests_cancelled = 0, requests_failed = 0, requests_rejected = 0;
    int64_t requests_expired = 0;       // dropped unstarted at their start deadline (never run)
    double start_rate = 0;              // requests started per second while requests waited (0: unknown)
    int64_t grammar_masks = 0;          // grammar masks applied (one per constrained sampled token)
    double grammar_mask_seconds = 0;    // time spent computing and applying them
    double step_seconds = 0;            // time of all steps (forward + sampling), for the mask's share
    int64_t draft_tokens = 0;           // speculative tokens verified
    int64_t accepted_draft_tokens = 0;  // of those, accepted (each one a step saved)
    int64_t draft_forwards = 0;         // draft-model forwards (catch-up and draft rounds)
    int64_t draft_fed_tokens = 0;       // token rows they computed
    double draft_seconds = 0;           // engine-thread time proposing drafts (both drafters)
    // The prefix cache's second tier (prefix_tier_link.h); all zero without one.
    bool tier_host = false, tier_file = false;  // which levels exist
    int64_t tier_hit_tokens = 0;                // prompt tokens loaded from the tier, not computed
    int64_t tier_host_hit_blocks = 0, tier_file_hit_blocks = 0, tier_miss_blocks = 0;
    int64_t tier_hit_bytes = 0;                 // KV bytes loaded back into the pool
    int64_t tier_spilled_blocks = 0, tier_spilled_bytes = 0;  // evicted blocks handed to the tier
    double tier_spill_seconds = 0;              // engine-thread time spent spilling
    int64_t tier_host_blocks = 0, tier_host_bytes = 0, tier_host_capacity_bytes = 0;
    int64_t tier_file_blocks = 0, tier_file_bytes = 0, tier_file_capacity_bytes = 0;
    int64_t tier_file_written = 0, tier_file_rejected = 0, tier_file_dropped = 0, tier_file_write_failures = 0;
    double prefix_hit_rate() const {
        return prefix_queried_tokens ? double(prefix_hit_tokens) / double(prefix_queried_tokens) : 0.0;
    }
};

// Copies the second tier's own figures into the tier_* fields (tier_hit_tokens and the file
// capacity come from the block manager and the options, not the tier).
void copy_tier_stats(const kv::PrefixTierStats& tier, EngineStats& stats);

struct StepInfo {
    int64_t n_tokens = 0, n_decode_tokens = 0, n_prefill_tokens = 0, n_sequences = 0;
    int64_t n_draft_tokens = 0, n_accepted_draft_tokens = 0;
    double seconds = 0;  // forward + sampling
    int64_t n_sampled = 0;  // tokens generated in this step (first tokens of finished prompts included)
};

}  // namespace pagoda::engine
