// What the engine keeps per request while it runs: the request, where its deltas go, its choices'
// sequences (one until an n > 1 request forks after its prompt), usage and timings. EngineCore
// owns these; the output processor writes their deltas, usage and timings.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/delta_queue.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "grammar/token_mask.h"

namespace pagoda::engine {

struct FinishedRequest {
    RequestId id = 0;
    Usage usage;
    RequestTimings timings;
    FinishReason reason = FinishReason::stop;  // of choice 0
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
    // With Request::prompt_logprobs: those collected so far (prompt_logprobs.h), and per choice
    // whether its first delta has carried them.
    std::vector<TokenLogprob> prompt_logprobs;
    std::vector<char> prompt_logprobs_sent;
};

}  // namespace pagoda::engine
