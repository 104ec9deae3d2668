// The engine's single-threaded heart: requests, their sequences, the scheduler, the block manager
// and one StepModel. step() asks the speculation controller for drafts (speculation.h), plans a
// step, builds the Batch (batch_builder.h), runs forward, and hands the logit rows to the output
// processor (output_processor.h: sampling, stop checks, deltas) and the hidden rows to the
// embedding requests (embedding_output.h). Engine runs it on its own thread; tests drive it
// directly, step by step. Faults stay local: a request whose sampling or detokenization throws
// finishes with an error; a forward() exception fails the requests in that batch (their blocks
// freed) and the next step goes on with the rest.
#pragma once
#include <functional>
#include <memory>
#include <unordered_map>

#include "engine/delta_queue.h"
#include "engine/engine_stats.h"
#include "engine/kv_snapshot.h"
#include "engine/masker_cache.h"
#include "engine/output_processor.h"
#include "engine/prefix_tier_link.h"
#include "engine/request.h"
#include "engine/request_state.h"
#include "engine/scheduler.h"
#include "engine/start_rate.h"
#include "engine/speculation.h"
#include "model/step_model.h"
#include "kv/block_manager.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

struct EngineOptions {
    SchedulerConfig scheduler;
    SpeculativeOptions speculative;
    bool prefix_caching = true;
    // The prefix cache's second tier (host memory and/or files) behind the pool; off by default.
    kv::PrefixTierOptions prefix_tier;
    // A model with recurrent layers: how many of its state slots beyond the running sequences' hold
    // prefix-cache state snapshots (SchedulerConfig::state_snapshots; capped at the slots it has
    // beyond max_seqs). None: the prefix cache is off for such a model.
    int32_t state_snapshots = 8;
    int64_t max_context = 0;  // 0: the model's; else the smaller of the two
    // Called on the engine thread (keep them short).
    std::function<void(const StepInfo&)> on_step;
    std::function<void(const FinishedRequest&)> on_request_finished;
};

class EngineCore {
public:
    // The tokenizer may be null (token ids only: no text, no stop strings, no EOG detection).
    EngineCore(model::StepModel& model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer, EngineOptions options);
    // With a file tier, first writes the pool's cached blocks to it (persist_pool).
    ~EngineCore();

    const model::StepModelInfo& model_info() const { return info_; }
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
    const DraftModelProposer* drafter() const { return speculation_->drafter(); }
    const DraftCostModel& draft_cost() const { return speculation_->draft_cost(); }

private:
    Sequence& new_sequence(RequestState& r, int32_t index, std::vector<int32_t> tokens);
    // Choices 1..n-1 of `r` as copies of `parent`, once its prompt is computed.
    void fork_request(RequestState& r, Sequence& parent);
    // The forward pass over batch_ with its checks. On a failure (the batch failure path) the
    // plan's requests end (cancelled on model::StepInterrupted, else with the error) and are
    // retired, and it returns false.
    bool run_forward(const StepPlan& plan, std::vector<float>& logits);
    // Ends and retires every request with a chunk in `plan`.
    void fail_batch(const StepPlan& plan, FinishReason reason, const std::string& error);
    void retire(RequestState& r);
    // Ends the waiting requests whose start deadline is before `now` (engine_deadlines.cpp).
    void expire_start_deadlines(Clock::time_point now);

    model::StepModel& model_;
    model::StepModelInfo info_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    EngineOptions options_;
    int64_t context_limit_ = 0;
    kv::BlockManager blocks_;
    Scheduler scheduler_;
    std::unique_ptr<PrefixTierLink> tier_;  // after blocks_: its eviction hook goes first
    std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
    kv::SeqId next_seq_id_ = 1;
    uint64_t next_arrival_ = 1;
    MaskerCache maskers_;
    model::Batch batch_;
    EngineStats counters_;
    StartRate start_rate_;  // how fast waiting requests start (for deadlines' early answers)
    std::function<void()> on_planned_;
    std::unique_ptr<SpeculationController> speculation_;  // always set once constructed
    std::unique_ptr<OutputProcessor> output_;
};

}  // namespace pagoda::engine
