// How long a draft-model draft should be, from measured costs. A draft of k tokens, each accepted
// with probability alpha (independently, the usual model), yields E(k) = (1 - alpha^(k+1)) / (1 -
// alpha) tokens per verification step. When D of the step's S sequences draft k tokens each (alike),
// the step costs T(k) = 1 + k (c + D v) plain target steps, where c is a draft forward of D rows and
// v a verified row's extra time, each over a plain step's (the step of the same S sequences without
// drafts), and yields (S - D) + D E(k) tokens: the rate over plain decoding is that over S T(k). A
// lone drafter in a large batch pays the whole forward for one sequence's gain, and makes the other
// S - 1 wait for it — so the length is chosen for the D that actually draft. All three are measured as
// the engine runs: a decode step's time is fitted as a + b * rows over recent steps (so the plain
// step is a + b * sequences and v is b), and a draft forward's time as a' + b' * rows (so c is
// the draft's forward of S rows over the plain step; catch-up forwards with long backlogs feed the
// same fit instead of inflating the cost of a draft token). best_length() returns the k in
// 0..max_k that maximises E(k) / T(k); 0 means drafting does not pay (the caller pauses and probes
// later). Until the costs are measured they count as zero (drafts start long and shrink as the
// figures come in). any_length_pays() asks the same at the highest acceptance worth considering: when
// even that does not pay, costs alone forbid drafting and probing acceptance is pointless.
// Catching a sequence up (feeding the draft model its prompt, or the steps it sat out) is a cost paid
// once, not per token: catch_up_pays() weighs it against the time the best length saves over the
// tokens the sequence may still generate (its share of the batch's saving, 1 - 1/rate of its plain
// steps), with a margin of two because it cannot be taken back.
// Until measured() (a few draft forwards and target steps timed), the engine lets one sequence
// draft alone — a scout — so an unmeasured draft never costs every sequence its catch-up.
// A sequence's alpha is estimated from its own verifications — accepted tokens against refusals,
// decayed so it follows a change of topic — from a prior of 0.8.
#pragma once
#include <cstdint>

namespace pagoda::engine {

// y ≈ a + b x over recent points, older points decaying by a fixed factor per observation.
class DecayedLinearFit {
public:
    void observe(double x, double y);
    bool empty() const { return n_ <= 0; }
    double weight() const { return n_; }  // the decayed number of observations
    bool has_spread() const;               // points at more than one x: the slope is measured
    double slope() const;         // b (>= 0; 0 while every x was the same)
    double at(double x) const;    // a + b x, never below a sliver of the mean y; 0 while empty

private:
    double spread() const;
    double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

class DraftCostModel {
public:
    // A decode-only target step: `seconds` for `rows` token rows of `seqs` sequences.
    void observe_step(double seconds, int64_t rows, int64_t seqs);
    // One draft-model forward of `rows` token rows took `seconds`.
    void observe_draft(double seconds, int64_t rows);
    // c (a draft forward of `drafting` rows; all `seqs` by default) and v for a step of `seqs`
    // sequences, over its plain step (0 while unmeasured).
    double draft_cost(int64_t seqs, int64_t drafting = 0) const;
    double row_cost(int64_t seqs) const;
    // The best k for `drafting` of the step's `seqs` sequences (0 or more than seqs: all of them).
    int32_t best_length(double alpha, int32_t max_k, int64_t seqs, int64_t drafting = 0) const {
        return best(alpha, max_k, seqs, drafting).k;
    }
    // Expected tokens per plain step's time at the best length, over plain decoding's (1 at k = 0).
    double best_rate(double alpha, int32_t max_k, int64_t seqs, int64_t drafting = 0) const {
        return best(alpha, max_k, seqs, drafting).rate;
    }
    // Enough to decide on: draft forwards timed, and target steps at more than one width (until
    // then a verified row's cost reads as zero; the engine runs a plain step to get the spread).
    bool measured() const;
    bool step_spread() const { return step_.has_spread(); }
    // Whether feeding `backlog` tokens to the draft model pays back over `tokens_left` tokens, with
    // `drafting` sequences sharing the draft's forwards (always true while unmeasured: the caller
    // then lets a single sequence measure).
    bool catch_up_pays(double alpha, int32_t max_k, int64_t seqs, int64_t drafting, int64_t backlog,
                       int64_t tokens_left) const;
    // At the best sharing (every sequence drafts).
    bool any_length_pays(double best_alpha, int32_t max_k, int64_t seqs) const {
        return best_length(best_alpha, max_k, seqs) > 0;
    }

private:
    struct Best {
        int32_t k = 0;
        double rate = 1.0;
    };
    Best best(double alpha, int32_t max_k, int64_t seqs, int64_t drafting) const;
    double plain_seconds(int64_t seqs) const;  // a + b * seqs, 0 while unmeasured
    DecayedLinearFit step_;                    // target decode steps: seconds against rows
    DecayedLinearFit draft_;                   // draft forwards: seconds against rows
};

struct AcceptanceEstimate {
    double accepted = 1.6, refused = 0.4;  // the prior: alpha 0.8, worth two verifications
    void observe(int64_t drafted, int64_t accepted_now);
    double alpha() const { return accepted / (accepted + refused); }
};

}  // namespace pagoda::engine
