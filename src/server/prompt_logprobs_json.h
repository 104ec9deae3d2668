// The prompt's logprobs (engine::Delta::prompt_logprobs: prompt tokens 1..n-1) in the two shapes
// clients read:
//   vLLM's `prompt_logprobs`: one entry per prompt token, null for the first, else an object keyed by
//     token id (as a string) holding {logprob, rank, decoded_token} for the prompt token and for each
//     of the top alternatives (ranks 1..k);
//   OpenAI's legacy completions `logprobs` of an echoed prompt: tokens, token_logprobs and
//     top_logprobs (null for the first token), text_offset: where each token starts in the decoded
//     prompt (the echoed text): the length of what the tokens before it decode to, streamed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::server {

// A token's text as logprobs show it (its id as text without a tokenizer).
std::string token_piece(const tokenizer::Tokenizer* tok, int32_t id);

nlohmann::json vllm_prompt_logprobs(const std::vector<engine::TokenLogprob>& lps, const tokenizer::Tokenizer* tok);
// `text_size`: the echoed text's length (no offset goes past it).
nlohmann::json echoed_prompt_logprobs(int32_t first_token, const std::vector<engine::TokenLogprob>& lps,
                                      const tokenizer::Tokenizer* tok, size_t text_size);

}  // namespace pagoda::server
