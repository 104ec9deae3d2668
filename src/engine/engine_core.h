// The engine's single-threaded heart: requests, their sequences, the scheduler, the block manager
// and one StepModel. step() plans a step, builds the Batch, runs forward, samples every sequence
// that produced logits, applies stop conditions and emits deltas. Engine runs it on its own thread;
// tests drive it directly, step by step. Faults stay local: a request whose sampling or
// detokenization throws finishes with an error; a forward() exception fails the requests in that
// batch (their blocks freed) and the next step goes on with the rest.
#pragma once
#include <functional>
#include <list>
#include <memory>
#include <unordered_map>

#include "engine/delta_queue.h"
#include "engine/draft_length.h"
#include "engine/draft_model.h"
#include "engine/engine_stats.h"
#include "engine/kv_snapshot.h"
#include "engine/prefix_tier_link.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/start_rate.h"
#include "engine/step_model.h"
#include "grammar/token_mask.h"
#include "kv/block_manager.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

struct FinishedRequest {
    RequestId id = 0;
    Usage usage;
    RequestTimings timings;
    FinishReason reason = FinishReason::stop;  // of choice 0
};

// Speculative decoding: every decoding sequence proposes up to max_draft tokens — by prompt lookup
// (draft_ngram.h: an earlier occurrence of its last ngram_max..ngram_min tokens) or by a draft
// model (draft_model.h: a smaller model of the same vocabulary, greedy) — and the step verifies
// them beside everything else. Output is unchanged token for token, greedy or sampled: a draft is
// accepted iff it is the token the keyed sampler draws at its position (sampler.h).
struct SpeculativeOptions {
    int32_t ngram_max = 0;   // 0: no prompt lookup
    int32_t ngram_min = 1;
    int32_t max_draft = 8;   // tokens per sequence and step, at most
    std::shared_ptr<StepModel> draft_model;  // null: no draft model (exclusive with ngram_max)
    int64_t draft_max_step_tokens = 512;     // tokens per draft-model forward
    // Draft lengths from measured costs (draft_length.h; prompt lookup's drafts cost no forward,
    // only their verified rows); false: grow on success, shrink and pause on failure, for tests
    // whose fakes cost nothing.
    bool draft_length_by_cost = true;
    void validate() const;   // throws pagoda::Error
    bool enabled() const { return ngram_max > 0 || draft_model != nullptr; }
};

struct EngineOptions {
    SchedulerConfig scheduler;
    SpeculativeOptions speculative;
    bool prefix_caching = true;
    // The prefix cache's second tier (host memory and/or files) behind the pool; off by default.
    kv::PrefixTierOptions prefix_tier;
    int64_t max_context = 0;  // 0: the model's; else the smaller of the two
    // Called on the engine thread (keep them short).
    std::function<void(const StepInfo&)> on_step;
    std::function<void(const FinishedRequest&)> on_request_finished;
};

using DeltaCallback = std::function<void(const Delta&)>;

struct RequestState {
    RequestId id = 0;
    Request request;
    std::shared_ptr<DeltaQueue> queue;  // deltas go here unless `callback` is set
    DeltaCallback callback;
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::vector<char> choice_done;
    int32_t n_done = 0;
    bool forked = false;
    Clock::time_point arrival, last_token;
    bool scheduled = false, any_token = false;
    Usage usage;
    RequestTimings timings;
    std::shared_ptr<grammar::TokenMasker> masker;  // with a grammar: shared by the choices
};

class EngineCore {
public:
    // The tokenizer may be null (token ids only: no text, no stop strings, no EOG detection).
    EngineCore(StepModel& model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer, EngineOptions options);
    // With a file tier, first writes the pool's cached blocks to it (persist_pool).
    ~EngineCore();

    const StepModelInfo& model_info() const { return info_; }
    // Longest sequence (prompt + generated) allowed: the model context and the whole KV pool.
    int64_t context_limit() const { return context_limit_; }
    const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }
    // Throws pagoda::Error naming what makes the request invalid or impossible to serve.
    void validate(const Request& request) const;
    // Takes a validated request. Deltas go to `callback` when set, else to `queue`.
    void add(RequestId id, Request request, std::shared_ptr<DeltaQueue> queue, DeltaCallback callback = {},
             Clock::time_point arrival = Clock::now());
    // Finishes the request's unfinished choices with FinishReason::cancelled; false if unknown/done.
    bool cancel(RequestId id);
    // Finishes every request (cancelled, or error with `message` when given).
    void abort_all(const std::string& message = {});

    // One iteration; false when nothing could be scheduled (or the forward step failed). A forward
    // step that throws model::StepInterrupted ends its batch's requests as cancelled.
    bool step();
    // Called in step() once the step is planned, before the forward pass: a long step's sequences
    // already count as running in stats() (the Engine refreshes its snapshot here).
    void set_on_planned(std::function<void()> hook) { on_planned_ = std::move(hook); }
    bool has_work() const { return scheduler_.has_work(); }
    size_t num_requests() const { return requests_.size(); }

    EngineStats stats() const;
    // The pool's blocks and the sequences owning them now (kv_snapshot.cpp; O(blocks)).
    KvSnapshot kv_snapshot() const;
    Scheduler& scheduler() { return scheduler_; }
    kv::BlockManager& blocks() { return blocks_; }
    // The second prefix-cache tier, or null.
    PrefixTierLink* prefix_tier() { return tier_.get(); }
    const DraftModelProposer* drafter() const { return drafter_.get(); }
    const DraftCostModel& draft_cost() const { return draft_cost_; }

private:
    Sequence& new_sequence(RequestState& r, int32_t index, std::vector<int32_t> tokens);
    void fork_request(RequestState& r, Sequence& parent);
    // Samples one token for seq from `row` (modified) and emits its delta.
    // With a draft token: returns whether the token drawn is the draft (it was accepted).
    bool sample(Sequence& seq, float* row, std::optional<int32_t> draft = std::nullopt);
    // Proposes the drafts of the decoding sequences for the coming step.
    void propose_drafts();
    // A sequence that may draft this step, with its room (context, and max_tokens less the token
    // the verification always yields).
    struct DraftCandidate {
        Sequence* seq;
        int64_t room;
    };
    // Until the draft model's costs are measured, the one sequence that drafts alone (see .cpp).
    std::optional<kv::SeqId> draft_scout() const;
    // Drops the candidates whose catch-up with the draft model would not pay, or that would join
    // faster than the drafting group may grow.
    void keep_catch_ups_that_pay(std::vector<DraftCandidate>& candidates, int64_t n_running) const;
    // Sets seq's draft limit to the measured best length for n_drafting of n_running sequences;
    // false when none pays and the sequence pauses (and later probes) instead.
    bool draft_length_by_cost(Sequence& seq, int64_t n_running, int64_t n_drafting);
    // After a verification that drafted n and accepted a: the sequence's next draft size or pause.
    void adapt_draft(Sequence& seq, int64_t drafted, int64_t accepted);
    // Feeds the step's hidden rows to the embedding requests in it and finishes those whose
    // prompt is complete (appended to `done`).
    void pool_hidden_rows(const StepPlan& plan, std::vector<RequestState*>& done);
    // min_tokens not reached: end-of-generation tokens and stop_token_ids get -inf in `row`.
    void suppress_end_tokens(const Request& request, float* row, int64_t vocab) const;
    void finish_sequence(Sequence& seq, FinishReason reason, Delta& delta);
    void fail_request(RequestState& r, FinishReason reason, const std::string& error, const std::string& code = {});
    // Ends the waiting requests whose start deadline is before `now` (engine_deadlines.cpp).
    void expire_start_deadlines(Clock::time_point now);
    void emit(RequestState& r, Delta delta);
    void retire(RequestState& r);
    void record_timings_done(RequestState& r);
    // The vocabulary's token trie, built on the first request with a grammar.
    const std::shared_ptr<const grammar::TokenTrie>& token_trie();
    // The masker for a request's grammar and end tokens: shared with earlier requests that had the
    // same (the server hands out one compiled grammar per distinct schema), so its mask cache and
    // state table stay warm across requests.
    std::shared_ptr<grammar::TokenMasker> masker_for(const Request& request);

    StepModel& model_;
    StepModelInfo info_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    EngineOptions options_;
    int64_t context_limit_ = 0;
    kv::BlockManager blocks_;
    Scheduler scheduler_;
    std::unique_ptr<PrefixTierLink> tier_;  // after blocks_: its eviction hook goes first
    std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
    kv::SeqId next_seq_id_ = 1;
    uint64_t next_arrival_ = 1;
    std::shared_ptr<const grammar::TokenTrie> trie_;
    std::list<std::shared_ptr<grammar::TokenMasker>> maskers_;  // most recently used first
    model::Batch batch_;
    EngineStats counters_;
    StartRate start_rate_;  // how fast waiting requests start (for deadlines' early answers)
    std::function<void()> on_planned_;
    std::unique_ptr<DraftModelProposer> drafter_;  // with a draft model
    DraftCostModel draft_cost_;                    // its draft lengths, from measured costs
    static constexpr int32_t kPlainStepPeriod = 16;  // one plain step in this many, to measure it
    int32_t steps_since_plain_ = kPlainStepPeriod - 1;  // the first decode step is plain
};

}  // namespace pagoda::engine
