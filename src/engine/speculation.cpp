#include "engine/speculation.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/draft_ngram.h"
#include "engine/request_state.h"
#include "engine/token_scores.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

// A generating sequence whose every token but the last is computed: one that can draft this step.
bool decoding(const Sequence* s) {
    return s->request && !s->pooled && !scores_tokens(s->request->request) && s->n_computed + 1 == int64_t(s->tokens.size());
}

}  // namespace

void SpeculativeOptions::validate() const {
    if (ngram_max < 0 || ngram_max > 64) fail("the draft n-gram size must be in 0..64, got {}", ngram_max);
    if (ngram_min < 1 || (ngram_max > 0 && ngram_min > ngram_max))
        fail("the smallest draft n-gram must be in 1..{}, got {}", std::max(1, ngram_max), ngram_min);
    if (max_draft < 1 || max_draft > 64) fail("the draft length must be in 1..64, got {}", max_draft);
    if (draft_model && ngram_max > 0)
        fail("speculative decoding takes one drafter: a draft model or prompt lookup (--draft-ngram), not both");
    if (draft_max_step_tokens < 1) fail("the draft model's step size must be positive, got {}", draft_max_step_tokens);
}

SpeculationController::SpeculationController(const SpeculativeOptions& options, const model::StepModel& target,
                                             const tokenizer::Tokenizer* tokenizer, int64_t context_limit,
                                             const Scheduler& scheduler, EngineStats& counters)
    : options_(options), context_limit_(context_limit), scheduler_(scheduler), counters_(counters) {
    const auto& draft = options_.draft_model;
    if (!draft) return;
    if (draft.get() == &target) fail("engine: the draft model must be a model of its own (its own KV pool)");
    if (tokenizer && draft->info().vocab_size < tokenizer->n_vocab())
        fail("engine: the draft model's vocabulary has {} tokens, fewer than the tokenizer's {}",
             draft->info().vocab_size, tokenizer->n_vocab());
    drafter_ = std::make_unique<DraftModelProposer>(*draft, target.info().vocab_size, options_.draft_max_step_tokens);
}

void SpeculationController::propose() {
    const auto start = Clock::now();
    propose_drafts();
    counters_.draft_seconds += seconds_between(start, Clock::now());
    if (drafter_) {
        counters_.draft_forwards = drafter_->stats().forwards;
        counters_.draft_fed_tokens = drafter_->stats().fed_tokens;
    }
}

void SpeculationController::observe_step(double seconds, int64_t n_tokens, int64_t n_sequences) {
    draft_cost_.observe_step(seconds, n_tokens, n_sequences);
}

void SpeculationController::observe_verification(Sequence& seq, int64_t drafted, int64_t accepted) {
    if (options_.draft_length_by_cost) seq.acceptance.observe(drafted, accepted);
    else adapt_draft(seq, drafted, accepted);
}

void SpeculationController::forget(kv::SeqId id) {
    if (drafter_) drafter_->forget(id);
}

void SpeculationController::propose_drafts() {
    const SpeculativeOptions& o = options_;
    std::vector<DraftWant> wants;
    std::vector<Sequence*> wanting;
    const int64_t n_running = int64_t(scheduler_.running().size());
    const bool by_cost = o.draft_length_by_cost;
    const bool costs_allow = !by_cost || costs_allow_drafting(n_running);
    const std::optional<kv::SeqId> scout = drafter_ && by_cost ? draft_scout() : std::nullopt;
    std::vector<DraftCandidate> candidates;
    for (Sequence* s : scheduler_.running()) {
        s->draft.clear();
        if (!decoding(s) || !costs_allow) continue;
        if (scout && s->id != *scout) continue;
        if (s->draft_pause > 0) {
            --s->draft_pause;
            continue;
        }
        const int64_t room = std::min(context_limit_ - int64_t(s->tokens.size()),
                                      s->request->request.stop.max_tokens - s->n_generated - 1);
        if (room >= 1) candidates.push_back({s, room});
    }
    if (drafter_ && by_cost) keep_catch_ups_that_pay(candidates, n_running);
    const int64_t n_drafting = int64_t(candidates.size());
    for (const auto& [s, room] : candidates) {
        if (s->draft_limit == 0) s->draft_limit = o.max_draft;
        if (by_cost && !draft_length_by_cost(*s, n_running, n_drafting)) continue;
        const int64_t k = std::min<int64_t>(s->draft_limit, room);
        if (!drafter_) {
            s->draft = propose_ngram_draft(s->tokens, o.ngram_min, o.ngram_max, int32_t(k));
            continue;
        }
        wants.push_back({.seq = s->id, .tokens = s->tokens, .k = int32_t(k)});
        wanting.push_back(s);
    }
    if (!drafter_) return;
    std::vector<kv::SeqId> live;
    for (const Sequence* s : scheduler_.running()) live.push_back(s->id);
    drafter_->retain(live);  // sequences that finished or were preempted give their draft KV back
    if (wants.empty()) return;
    try {
        std::vector<std::vector<int32_t>> drafts = drafter_->propose(wants);
        for (const DraftForward& f : drafter_->last_forwards()) draft_cost_.observe_draft(f.seconds, f.rows);
        for (size_t i = 0; i < wanting.size(); ++i) wanting[i]->draft = std::move(drafts[i]);
    } catch (const std::exception& e) {
        // A failing draft model costs speed, never output: this step goes without drafts.
        log_warn("speculative decoding: the draft model failed, this step goes without drafts: {}", e.what());
    }
}

bool SpeculationController::costs_allow_drafting(int64_t n_running) {
    const SpeculativeOptions& o = options_;
    // When even the best acceptance in sight (at least 0.95) would not pay for the draft's
    // forwards at this batch size, nobody drafts or probes: probing only teaches acceptance,
    // and its catch-up forwards are what made speculation lose at larger batches.
    double best_alpha = 0.95;
    for (const Sequence* s : scheduler_.running())
        if (decoding(s)) best_alpha = std::max(best_alpha, s->acceptance.alpha());
    bool costs_allow = draft_cost_.any_length_pays(best_alpha, o.max_draft, n_running);
    // Every kPlainStepPeriod-th drafting step goes without drafts: the step-time fit needs plain
    // steps beside the drafted ones, or it would take a long step's time for a plain one (all
    // points at one width give no slope) and judge drafting cheap at any batch size. With a
    // draft model, until the fit has seen two widths, a plain step follows each drafted one:
    // otherwise a verified row reads as free just when the scout's figures let the others catch
    // up. Prompt lookup has no catch-up to guard, and its steps widen only when a lookup hits.
    const bool spread_wanted = drafter_ && !draft_cost_.step_spread() && steps_since_plain_ >= 1;
    if (!costs_allow || ++steps_since_plain_ >= kPlainStepPeriod || spread_wanted) {
        steps_since_plain_ = 0;
        costs_allow = false;
    }
    if (log_level() >= LogLevel::debug)
        log_debug("speculation: step {}, {} sequences: draft forward {:.3f} and verified row {:.3f} of a plain "
                  "step; best length {} at acceptance {:.2f}{}",
                  counters_.steps, n_running, draft_cost_.draft_cost(n_running), draft_cost_.row_cost(n_running),
                  draft_cost_.best_length(best_alpha, o.max_draft, n_running), best_alpha,
                  costs_allow ? "" : " (a plain step)");
    return costs_allow;
}

// The scout: the sequence already drafting, else the decoding one with the least to catch up.
// Letting every sequence start at once fed the draft all their prompts before anything said
// whether drafting pays. None once the costs are measured.
std::optional<kv::SeqId> SpeculationController::draft_scout() const {
    if (draft_cost_.measured()) return std::nullopt;
    const Sequence* pick = nullptr;
    for (const Sequence* s : scheduler_.running()) {
        if (!decoding(s)) continue;
        if (drafter_->blocks().has_sequence(s->id)) return s->id;
        if (!pick || s->tokens.size() < pick->tokens.size()) pick = s;
    }
    return pick ? std::optional(pick->id) : std::nullopt;
}

// What the draft must be fed first (its prompt, or the steps it sat out) is paid once: a sequence
// starts only where its share of the time the drafts should save over its tokens left pays for
// that. Newcomers join slowly — at most as many a step as already draft — so each width of
// drafting is measured before the next (a young fit misjudged wider steps as cheap).
void SpeculationController::keep_catch_ups_that_pay(std::vector<DraftCandidate>& candidates, int64_t n_running) const {
    const int32_t max_draft = options_.max_draft;
    const int64_t sharing = int64_t(candidates.size());
    const kv::BlockManager& draft_blocks = drafter_->blocks();
    int64_t holders = 0;
    for (const DraftCandidate& c : candidates) holders += draft_blocks.has_sequence(c.seq->id) ? 1 : 0;
    int64_t joiners_left = std::max<int64_t>(1, holders);
    std::erase_if(candidates, [&](const DraftCandidate& c) {
        const bool holds = draft_blocks.has_sequence(c.seq->id);
        if (!holds && joiners_left == 0) return true;
        const int64_t fed = holds ? draft_blocks.num_computed(c.seq->id) : 0;
        if (!draft_cost_.catch_up_pays(c.seq->acceptance.alpha(), max_draft, n_running, sharing,
                                       int64_t(c.seq->tokens.size()) - fed, c.room))
            return true;
        if (!holds) --joiners_left;
        return false;
    });
}

// The length is the measured best for the sequences that draft (draft_length.h). Where none pays
// the sequence pauses, then probes with one token so a change of acceptance is noticed; a probe
// that changes nothing doubles the pause (16 up to 256 steps), and pauses end on multiples of
// their length so paused sequences probe together.
bool SpeculationController::draft_length_by_cost(Sequence& s, int64_t n_running, int64_t n_drafting) {
    const int32_t best =
        draft_cost_.best_length(s.acceptance.alpha(), options_.max_draft, n_running, n_drafting);
    if (best > 0) {
        s.draft_probe = s.draft_probed = false;
        s.draft_probe_misses = 0;
        s.draft_limit = best;
        return true;
    }
    if (s.draft_probe) {
        s.draft_probe = false;
        s.draft_probed = true;
        s.draft_limit = 1;
        return true;
    }
    if (s.draft_probed) s.draft_probe_misses = std::min(4, s.draft_probe_misses + 1);
    s.draft_probed = false;
    const int64_t period = int64_t(16) << s.draft_probe_misses;
    s.draft_pause = int32_t(period - counters_.steps % period);
    s.draft_probe = true;
    return false;
}

void SpeculationController::adapt_draft(Sequence& s, int64_t drafted, int64_t accepted) {
    const int32_t max_draft = options_.max_draft;
    if (accepted == drafted) {
        s.draft_limit = std::min(max_draft, s.draft_limit * 2);  // all taken: try longer
        s.draft_misses = 0;
        return;
    }
    s.draft_limit = std::max<int32_t>(1, int32_t(accepted) + 1);  // as far as it went right, and one more
    if (accepted > 0) {
        s.draft_misses = 0;
        return;
    }
    // Three refusals in a row: pause, longer each time (capped), so a workload that does not copy
    // pays at most a few wasted rows now and then.
    if (++s.draft_misses >= 3) {
        s.draft_pause = std::min(64, 4 << std::min(4, s.draft_misses - 3));
        s.draft_limit = 1;
    }
}

}  // namespace pagoda::engine
