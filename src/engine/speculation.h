// Speculative decoding's policy (vLLM v1's proposer side): before each step it decides which
// decoding sequences draft and how many tokens, and asks the drafter (prompt lookup or a draft
// model) for them; after the step it learns from what the verification accepted and from the
// decode steps' times. The verification itself is the output processor's (output_processor.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/draft_length.h"
#include "engine/draft_model.h"
#include "engine/engine_stats.h"
#include "engine/scheduler.h"
#include "model/step_model.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

// Speculative decoding: every decoding sequence proposes up to max_draft tokens — by prompt lookup
// (draft_ngram.h: an earlier occurrence of its last ngram_max..ngram_min tokens) or by a draft
// model (draft_model.h: a smaller model of the same vocabulary, greedy) — and the step verifies
// them beside everything else. Output is unchanged token for token, greedy or sampled: a draft is
// accepted iff it is the token the keyed sampler draws at its position (sampler.h).
struct SpeculativeOptions {
    int32_t ngram_max = 0;   // 0: no prompt lookup
    int32_t ngram_min = 1;
    int32_t max_draft = 8;   // tokens per sequence and step, at most
    std::shared_ptr<model::StepModel> draft_model;  // null: no draft model (exclusive with ngram_max)
    int64_t draft_max_step_tokens = 512;     // tokens per draft-model forward
    // Draft lengths from measured costs (draft_length.h; prompt lookup's drafts cost no forward,
    // only their verified rows); false: grow on success, shrink and pause on failure, for tests
    // whose fakes cost nothing.
    bool draft_length_by_cost = true;
    void validate() const;   // throws pagoda::Error
    bool enabled() const { return ngram_max > 0 || draft_model != nullptr; }
};

class SpeculationController {
public:
    // `options` must be valid (validate()). Throws pagoda::Error when the draft model cannot serve
    // `target` (the same model, or a vocabulary smaller than the tokenizer's).
    SpeculationController(const SpeculativeOptions& options, const model::StepModel& target,
                          const tokenizer::Tokenizer* tokenizer, int64_t context_limit, const Scheduler& scheduler,
                          EngineStats& counters);

    bool enabled() const { return options_.enabled(); }
    // Sets the drafts of the running sequences for the coming step (clears the others').
    void propose();
    // A decode step (no prefill) took `seconds` over n_tokens rows of n_sequences.
    void observe_step(double seconds, int64_t n_tokens, int64_t n_sequences);
    // A still running sequence had `drafted` tokens verified, `accepted` of them taken.
    void observe_verification(Sequence& seq, int64_t drafted, int64_t accepted);
    // A finished sequence: the draft model drops its KV.
    void forget(kv::SeqId id);

    const DraftModelProposer* drafter() const { return drafter_.get(); }
    const DraftCostModel& draft_cost() const { return draft_cost_; }

private:
    // A sequence that may draft this step, with its room (context, and max_tokens less the token
    // the verification always yields).
    struct DraftCandidate {
        Sequence* seq;
        int64_t room;
    };
    void propose_drafts();
    // Whether the costs let anyone draft this step (false also on the periodic plain step).
    bool costs_allow_drafting(int64_t n_running);
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

    const SpeculativeOptions& options_;
    int64_t context_limit_;
    const Scheduler& scheduler_;
    EngineStats& counters_;
    std::unique_ptr<DraftModelProposer> drafter_;  // with a draft model
    DraftCostModel draft_cost_;                    // its draft lengths, from measured costs
    static constexpr int32_t kPlainStepPeriod = 16;  // one plain step in this many, to measure it
    int32_t steps_since_plain_ = kPlainStepPeriod - 1;  // the first decode step is plain
};

}  // namespace pagoda::engine
