// A validated OpenAI request (CompletionParams) -> engine requests for one loaded model, in two
// steps shared by the HTTP gateway and `pagoda batch`:
//   tokenize_prompts(): each completions prompt to token ids (text is encoded WITHOUT parsing
//     special-token text, so a user string cannot forge control tokens; token ids are range-checked
//     against the vocabulary), or the chat messages rendered through the chat template; a prompt
//     object's <__media__> markers, and image parts a template does not take as parts, become the
//     model's image marker (`image_marker`: ImageInput::marker(), ImageInput::expand's input);
//   make_engine_requests(): n against the engine's sequences, vocabulary checks of logit_bias / stop_token_ids, prompt and max_tokens
//     limits against the context, OpenAI's max_tokens defaults, and one engine::Request per prompt
//     ("sub"; sub k's seed is seed + k*n so its choices differ from the other prompts').
// Every refusal is an ApiError (400) naming the offending field.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/image_parts.h"
#include "server/openai_request.h"

namespace pagoda::tokenizer {
class Tokenizer;
}
namespace pagoda::chat {
class ChatTemplate;
}

namespace pagoda::server {

struct TokenizedPrompts {
    std::vector<std::vector<int32_t>> prompts;  // one per sub-request (make_engine_requests refuses empty ones)
    std::vector<std::string> echo_text;         // completions with echo: per prompt, the text to prepend
    bool opens_thinking = false;                // chat: the rendered prompt ends inside <think>
    int64_t longest() const;
    int64_t total() const;
};

// How fill-in-the-middle prompts are cut and ordered (fim_prompt.h): llama-server's batch share of
// the prefix and suffix, the context (extra context fills what is left), and the SPM order.
struct FimSettings {
    int64_t n_batch = 2048;
    int64_t n_ctx = 4096;
    bool spm = false;
};

// `chat_template` may be null where chat requests cannot occur (they are then refused);
// `vocab_size` is the model's (token-id prompts must lie below it). A request with `fim` set is
// assembled by fim_prompt.h's rule (400 fim_not_supported for a vocabulary without FIM tokens).
TokenizedPrompts tokenize_prompts(const CompletionParams& p, const tokenizer::Tokenizer& tokenizer,
                                  const chat::ChatTemplate* chat_template, int64_t vocab_size,
                                  const FimSettings& fim = {}, std::string_view image_marker = kImageMarker);

struct EngineLimits {
    int64_t context = 0;            // the engine's context limit (prompt + completion)
    int64_t vocab_size = 0;         // the model's vocabulary
    int64_t max_prompt_tokens = 0;  // 0: the context
    int64_t max_tokens_limit = 0;   // largest max_tokens accepted; 0: only the context bounds it
    int32_t max_seqs = 0;           // the engine's max_seqs: n may not exceed it; 0: only kMaxChoices
};

struct EngineRequests {
    std::vector<engine::Request> subs;  // one per prompt
    std::vector<std::string> echo_text; // from TokenizedPrompts (ResponseContext::echo_text)
    std::vector<int32_t> first_prompt_token;  // per sub (ResponseContext::first_prompt_token)
    int64_t max_tokens = 0;             // per choice, after defaults
    int64_t reserved_tokens = 0;        // prompt tokens + every choice's max_tokens (rate limits)
};

EngineRequests make_engine_requests(const CompletionParams& p, TokenizedPrompts prompts, const EngineLimits& limits);

}  // namespace pagoda::server
