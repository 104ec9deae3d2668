// Iteration-level (continuous) batching. Each call to schedule() plans one forward step:
//   1. decode: every running sequence that has a sampled token not yet in the KV cache gets one
//      token (plus its speculative draft, shortened or dropped to fit the budget and the pool),
//      oldest admission first. When the KV pool cannot take it, the most recently admitted
//      running sequence is preempted (its blocks freed; it goes back to the waiting queue with
//      prompt + generated tokens as its new prompt, recomputed later, mostly from the prefix cache)
//      until the append fits or the sequence itself was the one preempted.
//   2. chunked prefill: running sequences whose prompt is partly computed continue, then waiting
//      sequences are admitted in queue order (FCFS; priority then FCFS; or fair: priority, then the
//      tenant furthest behind its weighted share of served tokens, then FCFS) while the step's token
//      budget, the max_seqs cap and the KV pool allow; each gets a chunk of what the budget leaves.
//      The queue head blocks those behind it (no starvation of long prompts). A head whose
//      leading blocks a running sequence is computing right now (its prompt starts the same way,
//      e.g. requests that arrived together with one system prompt) waits until they are computed:
//      the next step finds them in the prefix cache and it computes only what follows, so the
//      shared part is computed once instead of once per request (`defer_shared_prefix`).
// Fair share (SchedulingPolicy::fair): every sequence belongs to a tenant (an API key) with a
// weight. Each tenant's served tokens (prefill and decode, drafts included: the work done for it)
// are counted, and its virtual time is served / weight. Admission picks the waiting sequence of the
// best priority class whose tenant has the smallest virtual time (FCFS within a tenant), charging
// each admission's chunk at once so one step does not hand every seat to the same tenant. A tenant
// that becomes active starts at the smallest virtual time of the active ones: idle time banks no
// credit. Preemption takes the worst priority class, then the tenant furthest ahead, then the newest.
// With one tenant and one priority this is exactly FCFS.
// Images (Sequence::images): a prompt chunk never splits an image. It ends before an image that
// does not fit the step's token budget or its image-token budget (max_image_tokens), and one that
// starts inside an image (the prefix cache served its first rows) runs to the image's end; a
// sequence whose next image does not fit waits for a step with room.
// Because decodes come first and max_batched_tokens >= max_seqs, a running sequence waits at most
// one step behind a long prompt. complete() records what a step computed; finish() and remove()
// release a sequence's blocks. The scheduler never touches tensors: it drives a BlockManager.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"
#include "engine/state_snapshots.h"
#include "kv/block_manager.h"
#include "model/batch.h"

namespace pagoda::engine {

enum class SchedulingPolicy { fcfs, priority, fair };
const char* scheduling_policy_name(SchedulingPolicy policy);  // "fcfs", "priority", "fair"
// "fcfs", "priority" or "fair"; throws pagoda::Error naming the choices otherwise.
SchedulingPolicy parse_scheduling_policy(std::string_view name);

struct SchedulerConfig {
    int64_t max_batched_tokens = 2048;  // tokens per step (>= max_seqs)
    int32_t max_seqs = 64;              // running sequences
    SchedulingPolicy policy = SchedulingPolicy::fcfs;
    double kv_watermark = 0.01;         // fraction of blocks kept free when admitting beside running work
    bool defer_shared_prefix = true;    // a prompt waits for leading blocks a running sequence is computing
    // Image rows computed in one step, all sequences together (an image runs whole in one step, so
    // a larger image is refused at validation): bounds how much of a step images take from text.
    int64_t max_image_tokens = 1024;
    // A model with recurrent layers (StepModelInfo::n_state_slots): every running sequence holds one of
    // max_seqs state slots (Sequence::state_slot), taken at admission and at a fork (whose plan then
    // copies the parent's state: StepPlan::state_copies), given back when it is preempted (its
    // recompute starts from position 0, so from a zeroed state) or removed. The seats bound them:
    // a sequence that cannot have a slot cannot have a seat either.
    bool recurrent_state = false;
    // With recurrent_state and the prefix cache: the model's slots [max_seqs, max_seqs +
    // state_snapshots) hold state snapshots at block boundaries (engine/state_snapshots.h), the only
    // places a prompt of such a model can resume from cached blocks. Each admission asks for two:
    // at the end of the prompt's last whole block before its last token (where the same prompt
    // resumes) and at the end of its cached blocks when they go further than a snapshot (where
    // prompts sharing that prefix, e.g. a system prompt, diverge); and a running prompt gets one
    // where a waiting prompt parts from it (defer_shared_prefix: the waiting one resumes there). A
    // prompt chunk ends at each, and the next step's state_copies take the copy before the step.
    int32_t state_snapshots = 0;

    void validate() const;  // throws pagoda::Error
};

// A second prefix-cache tier behind the pool (engine/prefix_tier_link.h implements it). At
// admission the scheduler asks it for the prompt's blocks after those the pool serves; it reads and
// stages them, the scheduler allocates that many fresh blocks (counted as computed) and has the
// staged blocks loaded into them before the step runs, so they are never recomputed.
class PrefixSource {
public:
    virtual ~PrefixSource() = default;
    // How many blocks [first_block, first_block + n) of `tokens` it holds (n <= max_blocks -
    // first_block), staged for load().
    virtual int64_t stage(std::span<const int32_t> tokens, int64_t first_block, int64_t max_blocks) = 0;
    // Writes the staged blocks into these pool blocks, in order, and clears the stage.
    virtual void load(std::span<const int32_t> pool_blocks) = 0;
};

struct ScheduledChunk {
    Sequence* seq = nullptr;
    int64_t begin = 0, end = 0;  // token positions computed this step
    bool logits = false;         // end reaches the sequence's last token: sample from it
    int64_t n_draft = 0;         // the last n_draft positions are speculative (seq->draft), with logits
};

struct StepPlan {
    std::vector<ScheduledChunk> chunks;
    std::vector<kv::BlockCopy> copies;  // copy-on-write, to run before the forward step
    std::vector<model::Batch::StateCopy> state_copies;  // forks' recurrent states, before the step too
    std::vector<Sequence*> preempted;
    int64_t n_tokens = 0;
    int64_t n_decode_tokens = 0;
    int64_t n_prefill_tokens = 0;
    int64_t n_draft_tokens = 0;   // of n_decode_tokens, speculative
    bool empty() const { return chunks.empty(); }
};

class Scheduler {
public:
    Scheduler(SchedulerConfig config, kv::BlockManager& blocks);

    const SchedulerConfig& config() const { return config_; }
    void add(Sequence* seq);  // joins the waiting queue
    // Admissions also look up prefix blocks in `source` (null: the pool only).
    void set_prefix_source(PrefixSource* source) { source_ = source; }
    StepPlan schedule();
    // After the step's forward ran: the chunks' tokens now have KV (a chunk's draft positions are
    // not counted: the engine marks the accepted ones and truncates the rest, see accept_draft).
    void complete(const StepPlan& plan);
    // After verification: `accepted` leading draft tokens of the chunk joined seq->tokens; their KV
    // counts as computed and the refused ones are dropped from the sequence's blocks.
    void accept_draft(const ScheduledChunk& chunk, int64_t accepted);
    // A fully computed running sequence `parent` gets a sibling sharing its blocks.
    void fork(Sequence* parent, Sequence* child);
    // Ends a sequence wherever it is (running or waiting) and frees its blocks.
    void remove(Sequence* seq);

    bool has_work() const { return !waiting_.empty() || !running_.empty(); }
    size_t num_waiting() const { return waiting_.size(); }
    size_t num_running() const { return running_.size(); }
    int32_t seats_in_use() const;
    int64_t preemptions() const { return preemptions_; }
    // Tokens computed for a tenant so far (every policy counts them; fair acts on them).
    int64_t served_tokens(uint32_t tenant) const;
    const std::vector<Sequence*>& running() const { return running_; }
    const std::deque<Sequence*>& waiting() const { return waiting_; }
    const StateSnapshots& state_snapshots() const { return snapshots_; }
    // After a failed step: the snapshot copies it carried may not have run, so none is trusted.
    void drop_state_snapshots() { snapshots_.clear(); }

private:
    struct Tenant {
        double served = 0;   // tokens computed for it (scaled: see activate)
        double weight = 1;   // of its latest sequence
        int32_t active = 0;  // its sequences waiting or running
        int64_t total = 0;   // tokens computed for it, never rescaled (served_tokens)
    };
    bool before(const Sequence* a, const Sequence* b) const;  // waiting-queue order
    double virtual_time(const Sequence* s, double extra = 0) const;
    void activate(Sequence* seq);
    void deactivate(const Sequence* seq);
    void charge(const Sequence* seq, int64_t tokens);
    // The waiting sequence to admit next: the queue head, or under fair the best by class, tenant
    // virtual time (with this step's admissions charged in `pending`) and arrival.
    std::deque<Sequence*>::iterator next_to_admit(const std::unordered_map<uint32_t, int64_t>& pending);
    // The running sequence to preempt among running_[first..]: the newest, or under fair the worst
    // class, then the tenant furthest ahead, then the newest.
    Sequence* preemption_victim(size_t first) const;
    void enqueue(Sequence* seq);
    void preempt(Sequence* seq, StepPlan& plan);
    void take_state_slot(Sequence* seq);
    void release_state_slot(Sequence* seq);
    // Admission of a model with state snapshots: how many leading cached blocks seq may reuse (up to
    // the last one with a snapshot; -1: no limit), the snapshot slot to restore (or -1), and the
    // positions where its state is to be snapshotted (Sequence::snapshot_at).
    int64_t plan_snapshots(Sequence* seq, int32_t& restore_slot);
    // After a step: snapshots of the chunks that ended at one of their sequence's snapshot positions.
    void take_snapshots(const StepPlan& plan);
    // Whether a running sequence is computing leading full blocks of seq's prompt beyond what the
    // prefix cache holds now (so that waiting a step makes them cache hits).
    bool prefix_in_flight(const Sequence* seq) const;
    // The same for a recurrent model, which resumes only at a state snapshot: a running sequence
    // computing the leading blocks seq shares with it gets a snapshot position where they end
    // (Sequence::snapshot_at), and seq waits for it.
    bool recurrent_prefix_in_flight(const Sequence* seq);
    // The end of seq's next prompt chunk from n_computed within `budget` tokens and the step's
    // image-token budget (taken from), splitting no image; n_computed when nothing fits.
    int64_t prefill_end(const Sequence* seq, int64_t budget, int64_t& image_budget) const;

    SchedulerConfig config_;
    kv::BlockManager& blocks_;
    std::deque<Sequence*> waiting_;
    std::vector<Sequence*> running_;  // in admission order
    PrefixSource* source_ = nullptr;
    uint64_t admissions_ = 0;
    int64_t preemptions_ = 0;
    std::unordered_map<uint32_t, Tenant> tenants_;
    std::vector<int32_t> free_state_slots_;  // recurrent_state: the slots no sequence holds
    std::vector<model::Batch::StateCopy> pending_state_copies_;  // forks and snapshots since the last plan
    StateSnapshots snapshots_{{}};
};

}  // namespace pagoda::engine
