// The output side of a step (vLLM v1's output processor): turns the step's logit rows into
// tokens and deltas. Per row: the grammar mask, min_tokens, sampling with its logprobs, the stop
// checks (end tokens, stop ids and strings, the grammar's end, max_tokens, the context) and the
// delta to the request's queue or callback. It verifies drafts row by row, forks an n > 1 request
// into its choices after the prompt, and finishes or fails requests. A request whose sampling or
// detokenization throws finishes with an error; the others go on.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/request_state.h"
#include "engine/scheduler.h"
#include "engine/speculation.h"
#include "model/step_model.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

class OutputProcessor {
public:
    // Makes the choices 1..n-1 of `r` as copies of `parent` (its choice 0) and schedules them.
    using ForkFn = std::function<void(RequestState& r, Sequence& parent)>;
    using FinishedFn = std::function<void(const FinishedRequest&)>;
    // Everything referenced outlives the processor (EngineCore owns them all).
    OutputProcessor(int64_t vocab_size, int64_t context_limit, const tokenizer::Tokenizer* tokenizer,
                    Scheduler& scheduler, SpeculationController& speculation, EngineStats& counters,
                    const FinishedFn& on_request_finished, ForkFn fork);

    struct Verified {
        int64_t drafted = 0, accepted = 0;  // draft tokens verified in the step, and accepted
    };
    // Samples every generating chunk of `plan` from its rows of `logits` (modified; row order as
    // the batch's logit rows) and appends the requests that finished to `done` (once each).
    Verified sample_step(const StepPlan& plan, std::vector<float>& logits, std::vector<RequestState*>& done);

    // Samples one token for seq from `row` (modified) and emits its delta.
    // With a draft token: returns whether the token drawn is the draft (it was accepted).
    bool sample(Sequence& seq, float* row, std::optional<int32_t> draft = std::nullopt);
    // Ends one choice: flushes its text, sets `delta`'s finish and emits it.
    void finish_sequence(Sequence& seq, FinishReason reason, Delta& delta);
    // Ends every unfinished choice of `r` with `reason` and `error`.
    // `code`: Delta::error_code ("deadline_exceeded" counts as expired, not failed).
    void fail_request(RequestState& r, FinishReason reason, const std::string& error, const std::string& code = {});
    void emit(RequestState& r, Delta delta);

private:
    // min_tokens not reached: end-of-generation tokens and stop_token_ids get -inf in `row`.
    void suppress_end_tokens(const Request& request, float* row) const;

    int64_t vocab_;
    int64_t context_limit_;
    const tokenizer::Tokenizer* tokenizer_;
    Scheduler& scheduler_;
    SpeculationController& speculation_;
    EngineStats& counters_;
    const FinishedFn& on_request_finished_;
    ForkFn fork_;
};

}  // namespace pagoda::engine
