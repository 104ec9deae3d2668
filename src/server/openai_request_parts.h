// The parts of parse_completion_request (openai_request.h), one file each: sampling and stop fields
// (openai_sampling_fields.cpp), chat messages and tools (openai_chat_fields.cpp), structured output
// (openai_structured_output.cpp). Each reads its fields of a body that check_request_fields() has
// already vetted, into `p`, and throws ApiError (or json_reader::JsonFieldError, which
// parse_completion_request turns into one) on the first problem. Internal to the server.
#pragma once
#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace pagoda::server::openai_fields {

// n, best_of, max_tokens / max_completion_tokens, stop, include_stop_str_in_output, min_tokens,
// stop_token_ids, temperature, top_p, top_k, min_p, the penalties, logit_bias, seed, ignore_eos.
void parse_sampling(const nlohmann::json& body, CompletionParams& p);

// Token ids as an array of integers in [0, 2^31).
std::vector<int32_t> token_array(const nlohmann::json& v, const std::string& name);

// Chat: messages, tools / tool_choice / parallel_tool_calls, logprobs / top_logprobs,
// chat_template_kwargs, add_generation_prompt / continue_final_message.
// `ordered`: the same body with its keys in the order sent, where the caller has it (tools keep
// their schemas' property order).
void parse_chat_fields(const nlohmann::json& body, CompletionParams& p, const nlohmann::ordered_json* ordered);

// response_format, json_schema, guided_json, guided_choice, guided_regex, guided_grammar, grammar
// -> p.grammar (at most one of them). `ordered` (may be null): the same body with its keys in the
// order sent, from which schemas are compiled so their properties keep the user's order.
void parse_structured_output(const nlohmann::json& body, CompletionParams& p, const nlohmann::ordered_json* ordered);

}  // namespace pagoda::server::openai_fields
