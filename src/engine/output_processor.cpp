#include "engine/output_processor.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "engine/logprobs.h"
#include "engine/prompt_logprobs.h"
#include "engine/token_scores.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {

OutputProcessor::OutputProcessor(int64_t vocab_size, int64_t context_limit, const tokenizer::Tokenizer* tokenizer,
                                 Scheduler& scheduler, SpeculationController& speculation, EngineStats& counters,
                                 const FinishedFn& on_request_finished, ForkFn fork)
    : vocab_(vocab_size),
      context_limit_(context_limit),
      tokenizer_(tokenizer),
      scheduler_(scheduler),
      speculation_(speculation),
      counters_(counters),
      on_request_finished_(on_request_finished),
      fork_(std::move(fork)) {}

OutputProcessor::Verified OutputProcessor::sample_step(const StepPlan& plan, std::vector<float>& logits,
                                                       std::vector<RequestState*>& done) {
    Verified verified;
    size_t row = 0;
    for (const ScheduledChunk& c : plan.chunks) {
        if (c.seq->pooled) continue;
        // The chunk's prompt-logprob rows come first (its sampling row, if any, is never one).
        row += size_t(collect_prompt_logprobs(c, logits.data() + row * size_t(vocab_), vocab_));
        if (!c.logits) continue;
        float* p = logits.data() + row * size_t(vocab_);
        row += size_t(1 + c.n_draft);
        Sequence& s = *c.seq;
        if (s.status != SeqStatus::running || !s.request) continue;  // failed earlier in this loop
        RequestState& r = *s.request;
        if (scores_tokens(r.request)) {  // token_scores.h: the prompt's last row answers it, nothing is sampled
            Delta d;
            d.token_logits = chosen_logits(r.request, p);
            finish_sequence(s, FinishReason::stop, d);
            done.push_back(&r);
            continue;
        }
        if (c.n_draft > 0) {
            // Verify the draft row by row; the first refusal's replacement (or, all accepted, the
            // last row's sample) is the token this step adds beyond the accepted ones.
            const std::vector<int32_t> draft = s.draft;
            int64_t accepted = 0;
            for (int64_t j = 0; j <= c.n_draft && s.status == SeqStatus::running; ++j) {
                float* rj = p + size_t(j) * size_t(vocab_);
                if (j == c.n_draft) {
                    sample(s, rj);
                    break;
                }
                if (!sample(s, rj, draft[size_t(j)])) break;
                ++accepted;
            }
            scheduler_.accept_draft(c, accepted);
            s.draft.clear();
            verified.drafted += c.n_draft;
            verified.accepted += accepted;
            counters_.draft_tokens += c.n_draft;
            counters_.accepted_draft_tokens += accepted;
            if (s.status == SeqStatus::running) speculation_.observe_verification(s, c.n_draft, accepted);
            if (r.n_done == r.request.n && std::find(done.begin(), done.end(), &r) == done.end()) done.push_back(&r);
            continue;
        }
        if (!r.forked && r.request.n > 1) {
            fork_(r, s);
            for (int32_t i = 1; i < r.request.n; ++i) {
                std::vector<float> copy(p, p + vocab_);
                sample(*r.seqs[size_t(i)], copy.data());
            }
        }
        sample(s, p);
        if (r.n_done == r.request.n && std::find(done.begin(), done.end(), &r) == done.end()) done.push_back(&r);
    }
    return verified;
}

void OutputProcessor::suppress_end_tokens(const Request& req, float* row) const {
    const int64_t vocab = vocab_;
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

bool OutputProcessor::sample(Sequence& seq, float* row, std::optional<int32_t> draft) {
    RequestState& r = *seq.request;
    try {
        const Request& req = r.request;
        const int64_t vocab = vocab_;
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
        if (seq.n_generated < req.stop.min_tokens) suppress_end_tokens(req, row);
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

void OutputProcessor::emit(RequestState& r, Delta d) {
    d.request = r.id;
    if (r.request.prompt_logprobs >= 0 && !r.prompt_logprobs_sent[size_t(d.index)]) {
        r.prompt_logprobs_sent[size_t(d.index)] = 1;
        d.prompt_logprobs = r.prompt_logprobs;
    }
    d.usage = r.usage;
    if (d.request_done) {
        r.timings.e2e = seconds_between(r.arrival, Clock::now());
        if (!r.scheduled) r.timings.queue = r.timings.e2e;
        d.timings = r.timings;
        if (on_request_finished_) {
            FinishedRequest f{r.id, r.usage, r.timings, d.finish_reason.value_or(FinishReason::stop)};
            on_request_finished_(f);
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

void OutputProcessor::finish_sequence(Sequence& seq, FinishReason reason, Delta& d) {
    RequestState& r = *seq.request;
    if (!seq.stop.stopped()) {
        // Release what the detokenizer and the stop matcher still hold; the tail may complete a stop.
        auto tail = seq.stop.feed(seq.text.flush());
        d.text += tail.text;
        if (tail.stopped) reason = FinishReason::stop;
        else d.text += seq.stop.finish();
    }
    scheduler_.remove(&seq);
    speculation_.forget(seq.id);
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

void OutputProcessor::fail_request(RequestState& r, FinishReason reason, const std::string& error,
                                   const std::string& code) {
    for (auto& s : r.seqs)
        if (s->status != SeqStatus::finished) scheduler_.remove(s.get());
    if (r.n_done == r.request.n) return;
    if (reason == FinishReason::cancelled) ++counters_.requests_cancelled;
    else if (code == "deadline_exceeded") ++counters_.requests_expired;
    else ++counters_.requests_failed;
    for (int32_t i = 0; i < r.request.n; ++i) {
        if (r.choice_done[size_t(i)]) continue;
        r.choice_done[size_t(i)] = 1;
        ++r.n_done;
        Delta d;
        d.index = i;
        d.finish_reason = reason;
        d.error = error;
        d.error_code = code;
        d.request_done = r.n_done == r.request.n;
        emit(r, std::move(d));
    }
}

}  // namespace pagoda::engine
