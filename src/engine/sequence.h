// One choice of a request as the scheduler and the engine track it. The scheduler uses the
// scheduling fields (tokens, n_computed, status, order keys); the engine uses the output side
// (sampler, detokenizer, stop matcher). Sequences are owned by their request's state in EngineCore
// (or by a test); the scheduler holds plain pointers.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/draft_length.h"
#include "engine/pooling.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "engine/text_stream.h"
#include "engine/thinking_budget.h"
#include "grammar/matcher.h"
#include "kv/block_manager.h"

namespace pagoda::engine {

struct RequestState;

enum class SeqStatus { waiting, running, finished };

struct Sequence {
    kv::SeqId id = 0;
    RequestState* request = nullptr;  // null in scheduler-only tests
    int32_t index = 0;                // choice index within the request

    // ---- scheduling ----
    std::vector<int32_t> tokens;  // prompt + generated (the last one may not be in the KV yet)
    int64_t n_prompt = 0;         // original prompt length
    int64_t n_computed = 0;       // leading tokens whose KV is in the pool
    SeqStatus status = SeqStatus::waiting;
    int32_t priority = 0;
    uint32_t tenant = 0;          // fair share: the API key it is served for (0: anonymous)
    double weight = 1;            // fair share: its tenant's weight (> 0)
    uint64_t arrival = 0;         // submission order (ties of priority, FCFS)
    uint64_t admitted = 0;        // order of the latest admission (preemption picks the newest)
    int32_t seats = 1;            // max_seqs places it holds (n for a request not yet forked)
    int32_t n_preemptions = 0;
    int64_t first_cached_tokens = -1;  // prefix-cache hit at its first admission
    int32_t state_slot = -1;           // its recurrent state slot while running (SchedulerConfig::recurrent_state)
    // With recurrent-state snapshots: the positions (block boundaries, increasing) where a prompt
    // chunk ends so that the state there is copied into a snapshot (chosen at each admission).
    std::vector<int64_t> snapshot_at;
    bool reuse_prefix = true;          // false: compute every prompt token (mean / CLS pooling)
    // An encoder's (bidirectional attention): the prompt is admitted only whole into one step, and
    // its KV blocks stay out of the prefix cache (BlockManager::keep_private).
    bool whole_prompt = false;
    // The prefix cache's extra key: the request's LoRA adapter and its images' places and hashes
    // (0: neither).
    uint64_t prefix_key = 0;
    // The prompt's images (Request::images): positions [begin, end) that a step computes whole.
    struct ImageRows {
        int64_t begin = 0, end = 0;
    };
    std::vector<ImageRows> images;
    // Speculative tokens proposed after `tokens` for the next step to verify; never part of `tokens`
    // (a preemption drops them). The scheduler may shorten it to fit the step.
    std::vector<int32_t> draft;

    // ---- output ----
    std::unique_ptr<Sampler> sampler;
    TextStream text;
    StopMatcher stop;
    int64_t n_generated = 0;
    // With a grammar: the state after every generated token. It lives with `tokens`, so preemption
    // (which recomputes the KV of the same tokens) leaves it consistent.
    std::optional<grammar::Matcher> matcher;
    // With a thinking budget: where the output stands in its reasoning block (lives with `tokens`
    // like the matcher).
    std::optional<ThinkingTracker> thinking;
    // An embedding request's pooled hidden states so far.
    std::optional<PooledEmbedding> pooled;
    // Speculation control: drafts of up to draft_limit tokens; after repeated refusals it pauses
    // for draft_pause steps (the cost of wrong drafts is bounded where they do not pay).
    int32_t draft_limit = 0;
    int32_t draft_misses = 0, draft_pause = 0;
    // With a draft model the length comes from the cost model and this acceptance estimate; a
    // sequence paused because no length paid probes with one token when the pause ends
    // (draft_probe: the next draft is a probe; draft_probed: the last one was; each probe that
    // leaves no length paying doubles the next pause).
    AcceptanceEstimate acceptance;
    bool draft_probe = false, draft_probed = false;
    int32_t draft_probe_misses = 0;
};

}  // namespace pagoda::engine
