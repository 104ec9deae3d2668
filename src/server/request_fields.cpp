#include "server/request_fields.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace pagoda::server {

const char* field_use_name(FieldUse use) {
    switch (use) {
        case FieldUse::honoured: return "honoured";
        case FieldUse::no_op: return "no-op";
        case FieldUse::refused: return "refused";
    }
    return "?";
}

const std::vector<RequestField>& request_fields() {
    using enum FieldUse;
    constexpr bool C = true, H = true, _ = false;  // completions, chat
    static const std::vector<RequestField> fields = {
        // OpenAI
        {"model", C, H, honoured, "the served model's id or one of its LoRA adapters' (see LoRA adapters)"},
        {"prompt", C, _, honoured, ""},
        {"messages", _, H, honoured, ""},
        {"n", C, H, honoured, ""},
        {"max_tokens", C, H, honoured, ""},
        {"max_completion_tokens", C, H, honoured, "wins over max_tokens"},
        {"stop", C, H, honoured, ""},
        {"temperature", C, H, honoured, ""},
        {"top_p", C, H, honoured, ""},
        {"presence_penalty", C, H, honoured, ""},
        {"frequency_penalty", C, H, honoured, ""},
        {"logit_bias", C, H, honoured, ""},
        {"seed", C, H, honoured, ""},
        {"logprobs", C, H, honoured, "completions: an integer 0-20 (with echo: the prompt's too); chat: a boolean"},
        {"top_logprobs", _, H, honoured, ""},
        {"echo", C, _, honoured, ""},
        {"suffix", C, _, honoured, "fill in the middle: the text after the hole (a model with FIM tokens)"},
        {"best_of", C, _, honoured, "only equal to n"},
        {"stream", C, H, honoured, ""},
        {"stream_options", C, H, honoured, "include_usage; include_obfuscation only false"},
        {"response_format", C, H, honoured, ""},
        {"tools", _, H, honoured, ""},
        {"tool_choice", _, H, honoured, ""},
        {"parallel_tool_calls", _, H, honoured, ""},
        {"user", C, H, no_op, "an end-user id for the provider's abuse monitoring; no output depends on it"},
        {"safety_identifier", _, H, no_op, "the newer name of user"},
        {"metadata", _, H, no_op, "tags for stored completions; nothing is stored"},
        {"store", _, H, no_op, "only false: nothing is stored"},
        {"service_tier", _, H, no_op, "only \"auto\" or \"default\": there is one tier"},
        {"prompt_cache_key", _, H, no_op, "prefix caching is automatic and keyed by content"},
        {"modalities", _, H, no_op, "only [\"text\"]: text is the only output"},
        {"functions", _, H, refused, "deprecated by OpenAI; send 'tools'"},
        {"function_call", _, H, refused, "deprecated by OpenAI; send 'tool_choice'"},
        {"audio", _, H, refused, "audio output is not supported"},
        {"prediction", _, H, refused, "predicted outputs are not supported"},
        {"reasoning_effort", _, H, honoured,
         "low, medium or high: a thinking budget of the server's --reasoning-budgets tokens (default 512, 2048, "
         "8192); needs a model that thinks"},
        {"verbosity", _, H, refused, "not adjustable for these models"},
        {"web_search_options", _, H, refused, "web search is not available"},
        // vLLM
        {"top_k", C, H, honoured, ""},
        {"min_p", C, H, honoured, ""},
        {"repetition_penalty", C, H, honoured, ""},
        {"ignore_eos", C, H, honoured, ""},
        {"min_tokens", C, H, honoured, ""},
        {"thinking_token_budget", _, H, honoured,
         "tokens the model may think before the server closes its reasoning block; needs a model that thinks"},
        {"max_thinking_tokens", _, H, honoured, "the same as thinking_token_budget"},
        {"stop_token_ids", C, H, honoured, ""},
        {"chat_template_kwargs", _, H, honoured, ""},
        {"guided_json", C, H, honoured, "as response_format json_schema"},
        {"guided_choice", C, H, honoured, "the output is exactly one of the strings"},
        {"guided_regex", C, H, honoured, "the whole output matches the pattern (the subset of Structured output)"},
        {"guided_grammar", C, H, honoured, "GBNF, as grammar"},
        {"guided_decoding_backend", C, H, refused, "there is one grammar engine"},
        {"guided_whitespace_pattern", C, H, refused, "JSON white space is fixed (see Structured output)"},
        {"structured_outputs", C, H, refused, "send response_format or grammar"},
        {"include_stop_str_in_output", C, H, honoured, "the stop string that ended a choice ends its text"},
        {"skip_special_tokens", C, H, no_op, "only true: control tokens are never written as text"},
        {"use_beam_search", C, H, refused, "beam search is not supported"},
        {"prompt_logprobs", C, H, honoured, "0-20: each prompt token's logprob, rank and this many alternatives (the "
                                            "prompt is then computed whole, not from the prefix cache)"},
        {"truncate_prompt_tokens", C, H, refused, "prompts are never truncated; a prompt too long is a 400"},
        {"add_generation_prompt", _, H, honoured, "default true; not true with continue_final_message"},
        {"continue_final_message", _, H, honoured, "the last (assistant) message is continued, not closed"},
        {"timeout", C, H, honoured, "seconds the request may wait to start; past that, 503 `deadline_exceeded` "
                                    "(see Guarantees)"},
        {"priority", C, H, honoured, "lower is served sooner; a key may not claim better than its key file `priority`"},
        // llama.cpp's server
        {"grammar", C, H, honoured, "GBNF"},
        {"lora", C, H, honoured, "[{\"id\" (or \"path\"), \"scale\"}]: the LoRA adapter to run under, at most one with a "
                                 "non-zero scale (see LoRA adapters)"},
        {"json_schema", C, H, honoured, "as response_format json_schema"},
        {"n_predict", C, H, refused, "send max_tokens"},
        {"cache_prompt", C, H, no_op, "the prefix cache never changes the output (greedy tokens are the same with it "
                                      "or without)"},
    };
    return fields;
}

void check_request_fields(const nlohmann::json& body, Endpoint endpoint) {
    if (!body.is_object()) return;  // the parser names that
    const bool chat = endpoint == Endpoint::chat_completions;
    check_fields_in(body, request_fields(), chat, chat ? "/v1/chat/completions" : "/v1/completions");
}

void check_fields_in(const nlohmann::json& body, const std::vector<RequestField>& fields, bool second_column,
                     const char* path) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (it->is_null()) continue;
        const RequestField* known = nullptr;
        for (const auto& f : fields)
            if (f.name == it.key() && (second_column ? f.chat : f.completions)) known = &f;
        if (!known)
            throw ApiError::invalid(fmt::format("'{}' is not a parameter of {} here; it is refused rather than ignored "
                                                "(docs/api.md lists the fields)",
                                                it.key(), path),
                                    it.key(), "unsupported_parameter");
        if (known->use == FieldUse::refused)
            throw ApiError::invalid(fmt::format("'{}' is not supported: {}", it.key(), known->why), it.key(),
                                    "unsupported_parameter");
    }
}

}  // namespace pagoda::server
