#include "engine/engine_core.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "engine/draft_ngram.h"
#include "engine/logprobs.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

int64_t limit_for(const StepModelInfo& info, const EngineOptions& options) {
    int64_t limit = int64_t(info.n_kv_blocks) * info.block_size;
    if (info.max_context > 0) limit = std::min(limit, info.max_context);
    if (options.max_context > 0) limit = std::min(limit, options.max_context);
    return limit;
}

// A generating sequence whose every token but the last is computed: one that can draft this step.
bool decoding(const Sequence* s) {
    return s->request && !s->pooled && s->n_computed + 1 == int64_t(s->tokens.size());
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

EngineCore::EngineCore(StepModel& model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer, EngineOptions options)
    : model_(model),
      info_(model.info()),
      tokenizer_(std::move(tokenizer)),
      options_(std::move(options)),
      context_limit_(limit_for(info_, options_)),
      blocks_(info_.n_kv_blocks, info_.block_size, options_.prefix_caching),
      scheduler_(options_.scheduler, blocks_) {
    if (info_.vocab_size < 1) fail("engine: the model reports an empty vocabulary");
    blocks_.set_sliding_window(info_.sliding_window);  // frees blocks outside every layer's window
    if (options_.max_context < 0) fail("engine: max_context must not be negative, got {}", options_.max_context);
    options_.speculative.validate();
    if (tokenizer_ && tokenizer_->n_vocab() > info_.vocab_size)
        fail("engine: the tokenizer has {} tokens but the model's vocabulary only {}", tokenizer_->n_vocab(),
             info_.vocab_size);
    if (options_.prefix_tier.enabled()) {
        tier_ = std::make_unique<PrefixTierLink>(model_, blocks_, options_.prefix_tier);
        scheduler_.set_prefix_source(tier_.get());
    }
    if (const auto& draft = options_.speculative.draft_model) {
        if (draft.get() == &model_) fail("engine: the draft model must be a model of its own (its own KV pool)");
        if (tokenizer_ && draft->info().vocab_size < tokenizer_->n_vocab())
            fail("engine: the draft model's vocabulary has {} tokens, fewer than the tokenizer's {}",
                 draft->info().vocab_size, tokenizer_->n_vocab());
        drafter_ = std::make_unique<DraftModelProposer>(*draft, info_.vocab_size,
                                                        options_.speculative.draft_max_step_tokens);
    }
}

EngineCore::~EngineCore() {
    if (!tier_ || !tier_->stats().has_file) return;
    try {
        // What is still cached in the pool would be lost with the process: keep it for the next one.
        const auto start = Clock::now();
        if (const int64_t n = tier_->persist_pool(); n > 0)
            log_info("prefix cache dir: wrote {} cached blocks from the pool in {:.2f} s", n,
                     seconds_between(start, Clock::now()));
    } catch (const std::exception& e) {
        log_warn("prefix cache dir: could not write the pool's cached blocks: {}", e.what());
    }
}

void EngineCore::validate(const Request& req) const {
    if (req.prompt.empty()) fail("the prompt is empty: give at least one token");
    for (size_t i = 0; i < req.prompt.size(); ++i)
        if (req.prompt[i] < 0 || req.prompt[i] >= info_.vocab_size)
            fail("prompt token {} at position {} is out of range (vocabulary has {} tokens)", req.prompt[i], i,
                 info_.vocab_size);
    if (req.embedding) {
        if (info_.hidden_size < 1) fail("this model gives no hidden states, so it cannot embed");
        if (int64_t(req.prompt.size()) > context_limit_)
            fail("the input has {} tokens, more than the {} that fit (model context {}, KV cache {} blocks of {} tokens)",
                 req.prompt.size(), context_limit_, info_.max_context, info_.n_kv_blocks, info_.block_size);
        if (req.n != 1) fail("an embedding request has one result; n must be 1, got {}", req.n);
        if (req.grammar) fail("an embedding request generates nothing, so it takes no grammar");
        if (req.logprobs != -1) fail("an embedding request generates nothing, so it has no logprobs");
        return;
    }
    if (int64_t(req.prompt.size()) + 1 > context_limit_)
        fail("the prompt has {} tokens, which leaves no room to generate: at most {} tokens fit (model context {}, "
             "KV cache {} blocks of {} tokens)",
             req.prompt.size(), context_limit_ - 1, info_.max_context, info_.n_kv_blocks, info_.block_size);
    if (req.stop.max_tokens < 1) fail("max_tokens must be at least 1, got {}", req.stop.max_tokens);
    if (req.stop.min_tokens < 0 || req.stop.min_tokens > req.stop.max_tokens)
        fail("min_tokens must be between 0 and max_tokens ({}), got {}", req.stop.max_tokens, req.stop.min_tokens);
    if (req.n < 1 || req.n > scheduler_.config().max_seqs)
        fail("n must be in 1..{} (the engine's max_seqs), got {}", scheduler_.config().max_seqs, req.n);
    if (req.logprobs < -1 || req.logprobs > 20) fail("logprobs must be in 0..20, got {}", req.logprobs);
    for (int32_t id : req.stop.stop_token_ids)
        if (id < 0 || id >= info_.vocab_size)
            fail("stop token id {} is out of range (vocabulary has {} tokens)", id, info_.vocab_size);
    for (const auto& s : req.stop.stop)
        if (s.empty()) fail("stop strings must not be empty");
    if (!req.stop.stop.empty() && !tokenizer_) fail("stop strings need a tokenizer, and this engine has none");
    if (req.grammar && !tokenizer_) fail("a grammar needs a tokenizer, and this engine has none");
    if (req.thinking && !tokenizer_) fail("a thinking budget needs a tokenizer, and this engine has none");
    if (req.thinking && req.thinking->max_tokens < 0) fail("a thinking budget must be at least 0 tokens");
    req.sampling.validate();
}

Sequence& EngineCore::new_sequence(RequestState& r, int32_t index, std::vector<int32_t> tokens) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_seq_id_++;
    seq->request = &r;
    seq->index = index;
    seq->tokens = std::move(tokens);
    seq->n_prompt = int64_t(r.request.prompt.size());
    seq->priority = r.request.priority;
    seq->arrival = r.seqs.empty() ? next_arrival_++ : r.seqs[0]->arrival;
    // Keyed by (seed, choice index, position): each choice its own stream (sampler.h).
    seq->sampler = std::make_unique<Sampler>(r.request.sampling, uint64_t(index));
    seq->text = TextStream(tokenizer_.get());
    seq->stop = StopMatcher(r.request.stop.stop);
    if (r.request.grammar) seq->matcher.emplace(r.request.grammar);
    if (const auto& t = r.request.thinking)
        seq->thinking.emplace(*t, tag_tokens(*tokenizer_, t->close));
    if (const auto& e = r.request.embedding) {
        seq->reuse_prefix = e->pooling == Pooling::last;  // the last token is always computed
        seq->pooled.emplace(*e, seq->n_prompt, info_.hidden_size);
    }
    r.seqs.push_back(std::move(seq));
    return *r.seqs.back();
}

void EngineCore::add(RequestId id, Request request, std::shared_ptr<DeltaQueue> queue, DeltaCallback callback,
                     Clock::time_point arrival) {
    validate(request);
    if (requests_.count(id)) fail("engine: request id {} is already in use", id);
    auto r = std::make_unique<RequestState>();
    r->id = id;
    r->request = std::move(request);
    r->queue = std::move(queue);
    r->callback = std::move(callback);
    r->choice_done.assign(size_t(r->request.n), 0);
    r->arrival = arrival;
    r->usage.prompt_tokens = int64_t(r->request.prompt.size());
    if (r->request.grammar) r->masker = masker_for(r->request);
    Sequence& first = new_sequence(*r, 0, r->request.prompt);
    first.seats = r->request.n;
    counters_.prompt_tokens += r->usage.prompt_tokens;
    scheduler_.add(&first);
    requests_.emplace(id, std::move(r));
}

void EngineCore::emit(RequestState& r, Delta d) {
    d.request = r.id;
    d.usage = r.usage;
    if (d.request_done) {
        r.timings.e2e = seconds_between(r.arrival, Clock::now());
        if (!r.scheduled) r.timings.queue = r.timings.e2e;
        d.timings = r.timings;
        if (options_.on_request_finished) {
            FinishedRequest f{r.id, r.usage, r.timings, d.finish_reason.value_or(FinishReason::stop)};
            options_.on_request_finished(f);
        }
    }
    if (r.callback) {
        try {
            r.callback(d);
        } catch (const std::exception& e) {
            log_warn("engine: delta callback of request {} threw: {}", r.id, e.what());
        }
    } else if (r.queue) {
        r.queue->push(std::move(d));
    }
}

void EngineCore::finish_sequence(Sequence& seq, FinishReason reason, Delta& d) {
    RequestState& r = *seq.request;
    if (!seq.stop.stopped()) {
        // Release what the detokenizer and the stop matcher still hold; the tail may complete a stop.
        auto tail = seq.stop.feed(seq.text.flush());
        d.text += tail.text;
        if (tail.stopped) reason = FinishReason::stop;
        else d.text += seq.stop.finish();
    }
    scheduler_.remove(&seq);
    if (drafter_) drafter_->forget(seq.id);
    r.choice_done[size_t(seq.index)] = 1;
    ++r.n_done;
    d.finish_reason = reason;
    if (seq.stop.stopped()) d.stop_string = seq.stop.matched();
    if (r.n_done == r.request.n) {
        d.request_done = true;
        ++counters_.requests_finished;
    }
    emit(r, std::move(d));
}

void EngineCore::fail_request(RequestState& r, FinishReason reason, const std::string& error) {
    for (auto& s : r.seqs)
        if (s->status != SeqStatus::finished) scheduler_.remove(s.get());
    if (r.n_done == r.request.n) return;
    if (reason == FinishReason::cancelled) ++counters_.requests_cancelled;
    else ++counters_.requests_failed;
    for (int32_t i = 0; i < r.request.n; ++i) {
        if (r.choice_done[size_t(i)]) continue;
        r.choice_done[size_t(i)] = 1;
        ++r.n_done;
        Delta d;
        d.index = i;
        d.finish_reason = reason;
        d.error = error;
        d.request_done = r.n_done == r.request.n;
        emit(r, std::move(d));
    }
}

void EngineCore::retire(RequestState& r) { requests_.erase(r.id); }

bool EngineCore::cancel(RequestId id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return false;
    fail_request(*it->second, FinishReason::cancelled, "cancelled");
    retire(*it->second);
    return true;
}

void EngineCore::abort_all(const std::string& message) {
    std::vector<RequestId> ids;
    for (const auto& [id, r] : requests_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (RequestId id : ids) {
        RequestState& r = *requests_.at(id);
        fail_request(r, message.empty() ? FinishReason::cancelled : FinishReason::error,
                     message.empty() ? "cancelled" : message);
        retire(r);
    }
}

const std::shared_ptr<const grammar::TokenTrie>& EngineCore::token_trie() {
    if (!trie_) trie_ = std::make_shared<const grammar::TokenTrie>(*tokenizer_);
    return trie_;
}

std::shared_ptr<grammar::TokenMasker> EngineCore::masker_for(const Request& req) {
    // Tokens that end the output are allowed only where the grammar may end.
    std::vector<int32_t> ends = req.stop.stop_token_ids;
    if (!req.stop.ignore_eos) ends.insert(ends.end(), tokenizer_->vocab().eog_ids().begin(), tokenizer_->vocab().eog_ids().end());
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    for (auto it = maskers_.begin(); it != maskers_.end(); ++it)
        if (&(*it)->grammar() == req.grammar.get() && (*it)->end_tokens() == ends) {
            maskers_.splice(maskers_.begin(), maskers_, it);
            return maskers_.front();
        }
    constexpr size_t kKeep = 8;
    if (maskers_.size() >= kKeep) maskers_.pop_back();
    maskers_.push_front(std::make_shared<grammar::TokenMasker>(req.grammar, token_trie(), std::move(ends)));
    return maskers_.front();
}

void EngineCore::suppress_end_tokens(const Request& req, float* row, int64_t vocab) const {
    std::vector<int32_t> ends = req.stop.stop_token_ids;
    if (!req.stop.ignore_eos && tokenizer_)
        ends.insert(ends.end(), tokenizer_->vocab().eog_ids().begin(), tokenizer_->vocab().eog_ids().end());
    std::vector<std::pair<int32_t, float>> saved;
    for (int32_t id : ends)
        if (id >= 0 && id < vocab) {
            saved.push_back({id, row[id]});
            row[id] = -std::numeric_limits<float>::infinity();
        }
    // A grammar that admits only an ending here wins over min_tokens: put the ends back.
    if (*std::max_element(row, row + vocab) == -std::numeric_limits<float>::infinity())
        for (const auto& [id, v] : saved) row[id] = v;
}

bool EngineCore::sample(Sequence& seq, float* row, std::optional<int32_t> draft) {
    RequestState& r = *seq.request;
    try {
        const Request& req = r.request;
        const int64_t vocab = info_.vocab_size;
        // The grammar mask comes first: penalties, sampling and logprobs all see only allowed tokens.
        int64_t allowed = 1;
        if (seq.matcher) {
            const auto mask_start = Clock::now();
            // Tokens this choice may still produce: the grammar keeps its output completable in them.
            const int64_t budget = std::min(req.stop.max_tokens - seq.n_generated, context_limit_ - int64_t(seq.tokens.size()));
            allowed = r.masker->apply(seq.matcher->state(), row, vocab, budget);
            ++counters_.grammar_masks;
            counters_.grammar_mask_seconds += seconds_between(mask_start, Clock::now());
        }
        // At the thinking budget the closing tag's next token is the only choice (unless the grammar ruled it out).
        if (seq.thinking && allowed > 0) force_token(seq.thinking->forced(), row, vocab);
        if (allowed == 0) {
            Delta d;
            d.index = seq.index;
            d.error = "the grammar allows no token of the vocabulary here (it needs a character no token spells)";
            finish_sequence(seq, FinishReason::error, d);
            return false;
        }
        if (seq.n_generated < req.stop.min_tokens) suppress_end_tokens(req, row, vocab);
        std::optional<TokenLogprob> lp;
        double raw_logit = 0;
        LogSoftmax norm;
        std::vector<float> raw;
        if (req.logprobs >= 0) {
            norm = log_softmax_of(row, vocab);
            lp = top_logprobs(row, vocab, norm, req.logprobs);
            raw.assign(row, row + vocab);  // the sampler rewrites `row`
        }
        // Keyed by the token's position, the draw is the one a step without the draft would make:
        // the draft stands iff it is that token.
        const int32_t token = seq.sampler->sample(row, vocab, seq.tokens, int64_t(seq.tokens.size()));
        const bool accepted = draft && token == *draft;
        if (lp) {
            raw_logit = raw[size_t(token)];
            lp->token = token;
            lp->logprob = float(raw_logit - norm.max - norm.log_sum);
        }
        if (seq.matcher && !r.masker->is_end_token(token) && !seq.matcher->accept(r.masker->trie().piece(token)))
            fail("token {} was sampled but the grammar does not allow it", token);
        if (seq.thinking) seq.thinking->observe(token, tokenizer_->token_to_piece(token, true));
        seq.tokens.push_back(token);
        ++seq.n_generated;
        ++r.usage.completion_tokens;
        ++counters_.generation_tokens;

        const auto now = Clock::now();
        if (!r.any_token) {
            r.any_token = true;
            r.timings.ttft = seconds_between(r.arrival, now);
        }
        if (seq.index == 0) {
            if (seq.n_generated > 1) r.timings.inter_token.push_back(seconds_between(r.last_token, now));
            r.last_token = now;
        }

        Delta d;
        d.index = seq.index;
        d.token_ids = {token};
        if (lp) d.logprobs.push_back(std::move(*lp));
        const auto& stop_ids = req.stop.stop_token_ids;
        const bool eog = !req.stop.ignore_eos && tokenizer_ && tokenizer_->is_eog(token);
        if (eog || std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
            finish_sequence(seq, FinishReason::stop, d);
            return accepted;
        }
        auto shown = seq.stop.feed(seq.text.feed(token), seq.n_generated >= req.stop.min_tokens);
        d.text = std::move(shown.text);
        if (shown.stopped || (seq.matcher && !seq.matcher->can_continue())) finish_sequence(seq, FinishReason::stop, d);
        else if (seq.n_generated >= req.stop.max_tokens || int64_t(seq.tokens.size()) >= context_limit_)
            finish_sequence(seq, FinishReason::length, d);
        else emit(r, std::move(d));
        return accepted;
    } catch (const std::exception& e) {
        fail_request(r, FinishReason::error, fmt::format("sampling failed: {}", e.what()));
    }
    return false;
}

void EngineCore::propose_drafts() {
    const SpeculativeOptions& o = options_.speculative;
    std::vector<DraftWant> wants;
    std::vector<Sequence*> wanting;
    const int64_t n_running = int64_t(scheduler_.running().size());
    const bool by_cost = o.draft_length_by_cost;
    bool costs_allow = true;
    if (by_cost) {
        // When even the best acceptance in sight (at least 0.95) would not pay for the draft's
        // forwards at this batch size, nobody drafts or probes: probing only teaches acceptance,
        // and its catch-up forwards are what made speculation lose at larger batches.
        double best_alpha = 0.95;
        for (const Sequence* s : scheduler_.running())
            if (decoding(s)) best_alpha = std::max(best_alpha, s->acceptance.alpha());
        costs_allow = draft_cost_.any_length_pays(best_alpha, o.max_draft, n_running);
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
    }
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

// The scout: the sequence already drafting, else the decoding one with the least to catch up.
// Letting every sequence start at once fed the draft all their prompts before anything said
// whether drafting pays. None once the costs are measured.
std::optional<kv::SeqId> EngineCore::draft_scout() const {
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
void EngineCore::keep_catch_ups_that_pay(std::vector<DraftCandidate>& candidates, int64_t n_running) const {
    const int32_t max_draft = options_.speculative.max_draft;
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
bool EngineCore::draft_length_by_cost(Sequence& s, int64_t n_running, int64_t n_drafting) {
    const int32_t best =
        draft_cost_.best_length(s.acceptance.alpha(), options_.speculative.max_draft, n_running, n_drafting);
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

void EngineCore::adapt_draft(Sequence& s, int64_t drafted, int64_t accepted) {
    const int32_t max_draft = options_.speculative.max_draft;
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

void EngineCore::fork_request(RequestState& r, Sequence& parent) {
    r.forked = true;
    for (int32_t i = 1; i < r.request.n; ++i) {
        Sequence& child = new_sequence(r, i, parent.tokens);
        child.first_cached_tokens = parent.first_cached_tokens;
        scheduler_.fork(&parent, &child);
    }
}

bool EngineCore::step() {
    const auto start = Clock::now();
    if (options_.speculative.enabled()) {
        const auto propose_start = Clock::now();
        propose_drafts();
        counters_.draft_seconds += seconds_between(propose_start, Clock::now());
        if (drafter_) {
            counters_.draft_forwards = drafter_->stats().forwards;
            counters_.draft_fed_tokens = drafter_->stats().fed_tokens;
        }
    }
    const int64_t generated_before = counters_.generation_tokens;
    StepPlan plan = scheduler_.schedule();
    counters_.preemptions = scheduler_.preemptions();
    if (plan.empty()) return false;

    batch_.clear();
    batch_.block_copies = plan.copies;
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence& s = *c.seq;
        const int32_t index = batch_.add_sequence(blocks_.block_table(s.id));
        const bool embeds = s.pooled.has_value();
        const int64_t n_real = int64_t(s.tokens.size());
        for (int64_t p = c.begin; p < c.end; ++p) {
            const int32_t token = p < n_real ? s.tokens[size_t(p)] : s.draft[size_t(p - n_real)];
            // A draft's rows all want logits: row j verifies draft token j, the last one gives the next.
            const bool logits = !embeds && c.logits && p + 1 + c.n_draft >= c.end;
            batch_.add(token, int32_t(p), index, blocks_.slot(s.id, p), logits,
                       embeds && pools_position(s.request->request.embedding->pooling, p, s.n_prompt));
        }
        if (s.request && !s.request->scheduled) {
            s.request->scheduled = true;
            s.request->timings.queue = seconds_between(s.request->arrival, start);
            s.request->usage.cached_prompt_tokens = std::max<int64_t>(0, s.first_cached_tokens);
        }
    }

    if (on_planned_) on_planned_();  // stats now show this step's sequences as running

    std::vector<float> logits;
    std::vector<RequestState*> done;
    try {
        const auto forward_start = Clock::now();
        logits = model_.forward(batch_);
        if (options_.speculative.enabled() && plan.n_prefill_tokens == 0)  // decode steps teach the cost model
            draft_cost_.observe_step(seconds_between(forward_start, Clock::now()), plan.n_tokens,
                                     int64_t(plan.chunks.size()));
        const size_t want = size_t(batch_.n_logit_rows()) * size_t(info_.vocab_size);
        if (logits.size() != want)
            fail("the model returned {} logits, expected {} ({} rows of {})", logits.size(), want,
                 batch_.n_logit_rows(), info_.vocab_size);
        const size_t want_hidden = size_t(batch_.n_hidden_rows()) * size_t(info_.hidden_size);
        if (want_hidden && model_.hidden_rows().size() != want_hidden)
            fail("the model returned {} hidden-state values, expected {} ({} rows of {})", model_.hidden_rows().size(),
                 want_hidden, batch_.n_hidden_rows(), info_.hidden_size);
    } catch (const model::StepInterrupted&) {
        // The engine is being stopped: the batch's requests end as cancelled, not failed, and their
        // half-written KV goes with their blocks.
        std::vector<RequestState*> hit;
        for (const ScheduledChunk& c : plan.chunks)
            if (c.seq->request && std::find(hit.begin(), hit.end(), c.seq->request) == hit.end())
                hit.push_back(c.seq->request);
        for (RequestState* r : hit) {
            fail_request(*r, FinishReason::cancelled, "cancelled");
            retire(*r);
        }
        return false;
    } catch (const std::exception& e) {
        log_error("engine: forward step over {} tokens failed: {}", batch_.size(), e.what());
        std::vector<RequestState*> failed;
        for (const ScheduledChunk& c : plan.chunks)
            if (c.seq->request && std::find(failed.begin(), failed.end(), c.seq->request) == failed.end())
                failed.push_back(c.seq->request);
        for (RequestState* r : failed) {
            fail_request(*r, FinishReason::error, fmt::format("model step failed: {}", e.what()));
            retire(*r);
        }
        return false;
    }
    scheduler_.complete(plan);
    ++counters_.steps;
    counters_.step_tokens += plan.n_tokens;
    counters_.computed_prompt_tokens += plan.n_prefill_tokens;
    counters_.max_step_tokens = std::max(counters_.max_step_tokens, plan.n_tokens);

    pool_hidden_rows(plan, done);
    size_t row = 0;
    int64_t drafted = 0, accepted_total = 0;
    for (const ScheduledChunk& c : plan.chunks) {
        if (!c.logits || c.seq->pooled) continue;
        float* p = logits.data() + row * size_t(info_.vocab_size);
        row += size_t(1 + c.n_draft);
        Sequence& s = *c.seq;
        if (s.status != SeqStatus::running || !s.request) continue;  // failed earlier in this loop
        RequestState& r = *s.request;
        if (c.n_draft > 0) {
            // Verify the draft row by row; the first refusal's replacement (or, all accepted, the
            // last row's sample) is the token this step adds beyond the accepted ones.
            const std::vector<int32_t> draft = s.draft;
            int64_t accepted = 0;
            for (int64_t j = 0; j <= c.n_draft && s.status == SeqStatus::running; ++j) {
                float* rj = p + size_t(j) * size_t(info_.vocab_size);
                if (j == c.n_draft) {
                    sample(s, rj);
                    break;
                }
                if (!sample(s, rj, draft[size_t(j)])) break;
                ++accepted;
            }
            scheduler_.accept_draft(c, accepted);
            s.draft.clear();
            drafted += c.n_draft;
            accepted_total += accepted;
            counters_.draft_tokens += c.n_draft;
            counters_.accepted_draft_tokens += accepted;
            if (s.status == SeqStatus::running) {
                if (options_.speculative.draft_length_by_cost) s.acceptance.observe(c.n_draft, accepted);
                else adapt_draft(s, c.n_draft, accepted);
            }
            if (r.n_done == r.request.n && std::find(done.begin(), done.end(), &r) == done.end()) done.push_back(&r);
            continue;
        }
        if (!r.forked && r.request.n > 1) {
            fork_request(r, s);
            for (int32_t i = 1; i < r.request.n; ++i) {
                std::vector<float> copy(p, p + info_.vocab_size);
                sample(*r.seqs[size_t(i)], copy.data());
            }
        }
        sample(s, p);
        if (r.n_done == r.request.n && std::find(done.begin(), done.end(), &r) == done.end()) done.push_back(&r);
    }
    for (RequestState* r : done) retire(*r);

    const double step_seconds = seconds_between(start, Clock::now());
    counters_.step_seconds += step_seconds;
    if (options_.on_step) {
        StepInfo info{plan.n_tokens, plan.n_decode_tokens, plan.n_prefill_tokens, int64_t(plan.chunks.size()),
                      drafted, accepted_total, step_seconds, counters_.generation_tokens - generated_before};
        options_.on_step(info);
    }
    return true;
}

void EngineCore::pool_hidden_rows(const StepPlan& plan, std::vector<RequestState*>& done) {
    const std::vector<float>& hidden = model_.hidden_rows();
    size_t row = 0;  // hidden rows come in batch order: chunk by chunk, position by position
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence& s = *c.seq;
        if (!s.pooled) continue;
        RequestState& r = *s.request;
        const Pooling pooling = r.request.embedding->pooling;
        for (int64_t p = c.begin; p < c.end; ++p) {
            if (!pools_position(pooling, p, s.n_prompt)) continue;
            const float* values = hidden.data() + row++ * size_t(info_.hidden_size);
            if (s.status == SeqStatus::running) s.pooled->add(p, values);
        }
        if (s.status != SeqStatus::running || c.end != s.n_prompt) continue;
        Delta d;
        d.index = 0;
        try {
            d.embedding = s.pooled->result();
        } catch (const std::exception& e) {
            fail_request(r, FinishReason::error, fmt::format("pooling failed: {}", e.what()));
            done.push_back(&r);
            continue;
        }
        finish_sequence(s, FinishReason::stop, d);
        done.push_back(&r);
    }
}

EngineStats EngineCore::stats() const {
    EngineStats s = counters_;
    s.preemptions = scheduler_.preemptions();
    s.running_sequences = int64_t(scheduler_.num_running());
    s.waiting_sequences = int64_t(scheduler_.num_waiting());
    for (const auto& [id, r] : requests_) {
        bool running = false;
        for (const auto& seq : r->seqs) running = running || seq->status == SeqStatus::running;
        ++(running ? s.running_requests : s.waiting_requests);
    }
    s.kv_blocks_total = blocks_.n_blocks();
    s.kv_blocks_used = blocks_.num_used_blocks();
    s.kv_blocks_cached = blocks_.num_evictable_blocks();
    s.kv_usage = double(s.kv_blocks_used) / double(s.kv_blocks_total);
    s.prefix_queried_tokens = blocks_.stats().queried_tokens;
    s.prefix_hit_tokens = blocks_.stats().hit_tokens;
    if (tier_) {
        const kv::PrefixTierStats t = tier_->stats();
        s.tier_host = t.has_host;
        s.tier_file = t.has_file;
        s.tier_hit_tokens = blocks_.stats().tier_hit_tokens;
        s.tier_host_hit_blocks = t.host_hits;
        s.tier_file_hit_blocks = t.file_hits;
        s.tier_miss_blocks = t.misses;
        s.tier_hit_bytes = t.hit_bytes;
        s.tier_spilled_blocks = t.spilled_blocks;
        s.tier_spilled_bytes = t.spilled_bytes;
        s.tier_spill_seconds = t.spill_seconds;
        s.tier_host_blocks = t.host_blocks;
        s.tier_host_bytes = t.host_bytes;
        s.tier_host_capacity_bytes = t.host_capacity;
        s.tier_file_blocks = t.file.files;
        s.tier_file_bytes = t.file.bytes;
        s.tier_file_capacity_bytes = int64_t(options_.prefix_tier.dir_bytes);
        s.tier_file_written = t.file.written;
        s.tier_file_rejected = t.file.rejected;
        s.tier_file_dropped = t.file.dropped;
        s.tier_file_write_failures = t.file.write_failures;
    }
    return s;
}

}  // namespace pagoda::engine
