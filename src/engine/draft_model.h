// Drafting with a smaller model of the same vocabulary (speculative decoding's classic form).
// The draft model keeps its own paged KV — its own pool, its own BlockManager with prefix caching —
// one draft sequence per target sequence, keyed by the target's sequence id. To propose, a draft
// sequence catches up with the tokens the target holds (what it has fed and the target kept is
// reused: accepted drafts need no recomputation), then drafts k tokens greedily, every drafting
// sequence batched into each of the k forwards.
//
// Bookkeeping: the draft BlockManager's tokens for a sequence are exactly the positions fed (the
// target's tokens it has seen, then the drafts it fed); num_computed stops one short of the
// target's last token, which is fed again each time for its logits (same token, same slot: the
// KV written is the same).
//
// The target accepts a draft iff it is the token its keyed sampler draws there (sampler.h), so
// output, greedy or sampled, is unchanged token for token. A draft sequence that does not fit the draft's pool (or context)
// is dropped and that sequence simply goes without a draft this step.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/step_model.h"
#include "kv/block_manager.h"
#include "model/batch.h"

namespace pagoda::engine {

struct DraftWant {
    kv::SeqId seq = 0;
    std::span<const int32_t> tokens;  // the target sequence's tokens (prompt + generated)
    int32_t k = 0;                    // tokens wanted, >= 1
};

struct DraftModelStats {
    int64_t forwards = 0;        // draft-model forward steps run
    int64_t fed_tokens = 0;      // tokens computed by the draft model (catch-up and drafts)
    int64_t reused_tokens = 0;   // draft tokens the target accepted, whose draft KV was kept
    int64_t dropped = 0;         // sequences dropped for lack of draft KV space
};

// One draft-model forward of the last propose() call: its rows and wall time (the cost model's input).
struct DraftForward {
    int64_t rows = 0;
    double seconds = 0;
};

class DraftModelProposer {
public:
    // `max_step_tokens` bounds the tokens of one draft forward (the draft model's activation size).
    DraftModelProposer(model::StepModel& draft, int64_t target_vocab, int64_t max_step_tokens);

    // One draft per want (same order), each of at most want.k tokens; empty where the draft has no
    // room. Throws what the draft model's forward throws (its state then is dropped entirely).
    std::vector<std::vector<int32_t>> propose(std::span<const DraftWant> wants);
    // Frees the draft KV of a sequence that finished (no-op if it has none).
    void forget(kv::SeqId seq) { drop(seq); }
    // Frees the draft KV of every sequence not in `live`.
    void retain(std::span<const kv::SeqId> live);
    int64_t num_sequences() const { return int64_t(blocks_.sequences().size()); }
    const DraftModelStats& stats() const { return stats_; }
    const std::vector<DraftForward>& last_forwards() const { return last_forwards_; }
    const kv::BlockManager& blocks() const { return blocks_; }

private:
    // A sequence being drafted this call: positions [next, target_n) still to feed, then drafts.
    struct Active {
        kv::SeqId seq = 0;
        std::span<const int32_t> tokens;
        int64_t next = 0;
        int32_t k = 0;
        std::vector<int32_t>* out = nullptr;
    };
    // Aligns the draft sequence with the target's tokens: keeps the common prefix of what it fed
    // (drafts the target refused are truncated, accepted ones kept) and appends the rest, unfed.
    // False when it cannot fit (the sequence is then dropped).
    bool align(const DraftWant& want, Active& a);
    // Runs batch_ and returns the draft's greedy token for every row that wanted logits, in order.
    std::vector<int32_t> run_batch();
    // Adds positions [a.next, end) of the sequence to batch_ (logits on the last one if asked).
    void add_rows(Active& a, int64_t end, bool logits, std::unordered_map<kv::SeqId, int32_t>& tables);
    void drop(kv::SeqId seq);

    model::StepModel& model_;
    int64_t vocab_ = 0;  // ids a draft may propose: the smaller of the two vocabularies
    int64_t max_step_tokens_ = 0;
    kv::BlockManager blocks_;
    model::Batch batch_;
    DraftModelStats stats_;
    std::vector<DraftForward> last_forwards_;
};

}  // namespace pagoda::engine
