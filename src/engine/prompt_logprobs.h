// Prompt logprobs (vLLM's `prompt_logprobs`, OpenAI's `echo` with `logprobs`): the log-probability
// the model gave each prompt token after the first, read from the logits of the row before it (the
// raw model distribution: no grammar, penalties or temperature), with the token's rank and the
// `top` most likely alternatives. A request that wants them computes every prompt token (no
// prefix-cache reuse: a cached row has no logits) and wants the logits of each prompt row it has
// not collected yet, so a recomputation after preemption collects nothing twice. They are kept in
// the request's state and handed out on each choice's first delta.
#pragma once
#include <cstdint>

#include "engine/request_state.h"
#include "engine/scheduler.h"

namespace pagoda::engine {

// True when the row at `position` of `s` must give its logits for a prompt logprob.
bool wants_prompt_logprob(const Sequence& s, int64_t position);

// Reads the prompt-logprob rows of chunk `c` from `rows` (its first logits row, in batch order)
// into the request's state; returns how many rows it read (0 when the chunk wants none).
int64_t collect_prompt_logprobs(const ScheduledChunk& c, const float* rows, int64_t vocab_size);

// The 1-based rank of `token` among the logits (1: the most likely; ties rank the lower id first).
int32_t rank_of(const float* logits, int64_t vocab_size, int32_t token);

}  // namespace pagoda::engine
