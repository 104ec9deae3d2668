#include "server/openai_engine_request.h"

#include <algorithm>
#include <fmt/format.h>

#include "chat/chat_template.h"
#include "core/error.h"
#include "server/api_error.h"
#include "server/fim_prompt.h"
#include "chat/chat_template.h"
#include "chat/reasoning.h"
#include "server/image_parts.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

// Token ids as given (range-checked), or text encoded without BOS/EOS (FIM pieces).
std::vector<int32_t> prompt_ids(const PromptInput& prompt, const tokenizer::Tokenizer& tok, int64_t vocab) {
    if (const auto* text = std::get_if<std::string>(&prompt)) return tok.encode(*text, {.add_bos = false, .add_eos = false});
    const auto& ids = std::get<std::vector<int32_t>>(prompt);
    for (int32_t id : ids)
        if (id >= vocab)
            throw ApiError::invalid(fmt::format("prompt token {} is out of range (vocabulary has {} tokens)", id, vocab),
                                    "prompt", "invalid_value");
    return ids;
}

// Text prompts never parse special-token text: a user string cannot forge control tokens.
std::vector<int32_t> tokenize_prompt(const PromptInput& prompt, const tokenizer::Tokenizer& tok, int64_t vocab) {
    if (const auto* text = std::get_if<std::string>(&prompt)) return tok.encode(*text);
    return prompt_ids(prompt, tok, vocab);
}

// The messages as the template wants them:
// - OpenAI sends a call's arguments as JSON text; templates (as Hugging Face's) expect the object,
//   to write it with tojson. Arguments that are not a JSON object stay text.
// - "developer" is OpenAI's newer name for the system role; templates know "system".
// - image_url parts become {"type": "image"} parts (or the image marker in joined text).
// - Content arrays of text parts become one string (parts joined by a newline, as vLLM does) for a
//   template that concatenates content as a string.
// - An assistant message's reasoning_content (what pagoda returned) is also its `thinking`, the
//   field gpt-oss's template reads.
nlohmann::json template_messages(const nlohmann::json& messages, bool takes_parts, std::string_view image_marker) {
    nlohmann::json out = messages;
    for (auto& m : out) {
        if (m.value("role", "") == "developer") m["role"] = "system";
        if (auto r = m.find("reasoning_content"); r != m.end() && r->is_string() && !m.contains("thinking"))
            m["thinking"] = *r;
        if (auto content = m.find("content"); content != m.end() && content->is_array()) {
            // An image part becomes the template's image part (Gemma 3's renders <start_of_image>
            // for it, Qwen3-VL's <|vision_start|><|image_pad|><|vision_end|>), or the model's marker
            // in the joined text; image_input.h expands the markers.
            for (auto& part : *content)
                if (part.value("type", "") == "image_url") part = {{"type", "image"}};
            if (!takes_parts) {
                std::string text;
                for (size_t i = 0; i < content->size(); ++i) {
                    if (i) text += '\n';
                    const auto& part = (*content)[i];
                    text += part.value("type", "") == "image" ? std::string(image_marker) : part.value("text", "");
                }
                *content = std::move(text);
            }
        }
        auto calls = m.find("tool_calls");
        if (calls == m.end() || !calls->is_array()) continue;
        for (auto& c : *calls) {
            auto fn = c.find("function");
            if (fn == c.end() || !fn->is_object()) continue;
            auto args = fn->find("arguments");
            if (args == fn->end() || !args->is_string()) continue;
            nlohmann::json parsed = nlohmann::json::parse(args->get<std::string>(), nullptr, false);
            if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
        }
    }
    return out;
}

std::vector<int32_t> render_chat(const CompletionParams& p, const tokenizer::Tokenizer& tok,
                                 const chat::ChatTemplate* chat_template, std::string_view image_marker,
                                 bool& opens_thinking) {
    if (!chat_template)
        throw ApiError::invalid("chat requests are not available here (no chat template)", "messages",
                                "unsupported_parameter");
    chat::ChatRenderOptions ro;
    ro.add_generation_prompt = p.add_generation_prompt;
    ro.continue_final_message = p.continue_final_message;
    if (tok.bos() >= 0) ro.bos_token = tok.token_to_piece(tok.bos(), true);
    if (tok.eos() >= 0) ro.eos_token = tok.token_to_piece(tok.eos(), true);
    if (!p.tools.is_null()) ro.tools = p.tools;
    ro.extra = p.chat_template_kwargs;
    // gpt-oss's template takes the effort as a variable (its system message says "Reasoning: high").
    if (!p.reasoning_effort.empty() && ro.extra.is_object() && !ro.extra.contains("reasoning_effort"))
        ro.extra["reasoning_effort"] = p.reasoning_effort;
    std::string text;
    try {
        text = chat_template->render(template_messages(p.messages, chat_template->takes_content_parts(), image_marker), ro);
    } catch (const Error& e) {
        // raise_exception() in a template is how it rejects a conversation (e.g. roles out of order).
        throw ApiError::invalid(fmt::format("the chat template rejected the messages: {}", e.what()), "messages",
                                "invalid_messages");
    }
    opens_thinking = chat::prompt_opens_thinking(text);
    // The template writes special tokens as text (<|im_start|>, the BOS text): parse them; add BOS
    // only when the vocabulary wants one and the template did not already write it.
    std::vector<int32_t> ids = tok.encode(text, {.add_bos = false, .add_eos = false, .parse_special = true});
    if (tok.vocab().add_bos() && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
        ids.insert(ids.begin(), tok.bos());
    return ids;
}

}  // namespace

int64_t TokenizedPrompts::longest() const {
    int64_t n = 0;
    for (const auto& ids : prompts) n = std::max<int64_t>(n, int64_t(ids.size()));
    return n;
}

int64_t TokenizedPrompts::total() const {
    int64_t n = 0;
    for (const auto& ids : prompts) n += int64_t(ids.size());
    return n;
}

// A prompt object's text: the pieces between <__media__> markers as plain text (no special-token
// parsing, as any completions prompt), the first with the vocabulary's BOS, and the model's image
// marker (ImageInput::marker(): Gemma 3's <start_of_image>, Qwen3-VL's <|vision_start|><|image_pad|>
// <|vision_end|>) for each media marker, which ImageInput::expand replaces.
std::vector<int32_t> tokenize_media_prompt(const std::string& text, const tokenizer::Tokenizer& tok,
                                           std::string_view image_marker) {
    const std::vector<int32_t> marker =
        tok.encode(image_marker, {.add_bos = false, .add_eos = false, .parse_special = true});
    const std::vector<std::string_view> pieces = media_pieces(text);
    std::vector<int32_t> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
        if (i) out.insert(out.end(), marker.begin(), marker.end());
        tokenizer::EncodeOptions options;  // BOS before the first piece, EOS after the last (the vocabulary's)
        if (i > 0) options.add_bos = false;
        if (i + 1 < pieces.size()) options.add_eos = false;
        const std::vector<int32_t> ids = tok.encode(pieces[i], options);
        out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
}

TokenizedPrompts tokenize_prompts(const CompletionParams& p, const tokenizer::Tokenizer& tok,
                                  const chat::ChatTemplate* chat_template, int64_t vocab_size,
                                  const FimSettings& fim, std::string_view image_marker) {
    TokenizedPrompts out;
    if (p.fim) {
        // llama-server encodes the pieces without BOS/EOS and without parsing special-token text.
        const FimVocab vocab = require_fim(tok, p.fim->infill ? "input_suffix" : "suffix");
        const TextEncoder encode = [&](std::string_view text) {
            return tok.encode(text, {.add_bos = false, .add_eos = false});
        };
        const FimBudget budget{.n_batch = fim.n_batch, .n_ctx = fim.n_ctx, .n_predict = p.max_tokens.value_or(16)};
        const std::vector<int32_t> suffix = encode(p.fim->suffix);
        for (const auto& prompt : p.prompts) {
            // /infill: the prompt is what the user typed after input_prefix; /v1/completions: the prefix.
            std::vector<int32_t> typed = prompt_ids(prompt, tok, vocab_size);
            std::vector<int32_t> prefix = p.fim->infill ? encode(p.fim->prefix) : std::move(typed);
            if (!p.fim->infill) typed.clear();
            out.prompts.push_back(assemble_infill(vocab, encode, std::move(prefix), suffix, p.fim->extra, typed, budget, fim.spm));
        }
        return out;
    }
    if (p.endpoint == Endpoint::chat_completions) {
        out.prompts.push_back(render_chat(p, tok, chat_template, image_marker, out.opens_thinking));
    } else {
        for (const auto& prompt : p.prompts) {
            if (!p.multimodal_data.empty())
                out.prompts.push_back(tokenize_media_prompt(std::get<std::string>(prompt), tok, image_marker));
            else out.prompts.push_back(tokenize_prompt(prompt, tok, vocab_size));
            if (p.echo)
                out.echo_text.push_back(std::holds_alternative<std::string>(prompt) ? std::get<std::string>(prompt)
                                                                                    : tok.decode(out.prompts.back()));
        }
    }
    return out;
}

EngineRequests make_engine_requests(const CompletionParams& p, TokenizedPrompts prompts, const EngineLimits& limits) {
    const bool chat = p.endpoint == Endpoint::chat_completions;
    const char* prompt_param = chat ? "messages" : "prompt";
    for (const auto& [id, bias] : p.logit_bias)
        if (id >= limits.vocab_size)
            throw ApiError::invalid(fmt::format("logit_bias token {} is out of range (vocabulary has {} tokens)", id,
                                                limits.vocab_size),
                                    "logit_bias", "invalid_value");
    for (int32_t id : p.stop_token_ids)
        if (id >= limits.vocab_size)
            throw ApiError::invalid(fmt::format("stop_token_ids: token {} is out of range", id), "stop_token_ids",
                                    "invalid_value");

    if (limits.max_seqs > 0 && p.n > limits.max_seqs)
        throw ApiError::invalid(fmt::format("'n' is {}; this server runs at most {} sequences at once (--max-seqs), so "
                                            "'n' must be between 1 and {}",
                                            p.n, limits.max_seqs, std::min(limits.max_seqs, kMaxChoices)),
                                "n", "invalid_value");
    const int64_t context = limits.context;
    const int64_t prompt_cap =
        limits.max_prompt_tokens > 0 ? std::min(limits.max_prompt_tokens, context) : context;
    for (const auto& ids : prompts.prompts) {
        if (ids.empty()) throw ApiError::invalid("the prompt encodes to no tokens", prompt_param, "invalid_value");
        if (int64_t(ids.size()) > prompt_cap)
            throw ApiError::invalid(fmt::format("the prompt has {} tokens; the limit is {}", ids.size(), prompt_cap),
                                    prompt_param, "context_length_exceeded");
    }
    const int64_t longest = prompts.longest();
    int64_t max_tokens;
    if (p.max_tokens) {
        max_tokens = *p.max_tokens;
        const std::string& param = p.max_tokens_param;
        if (limits.max_tokens_limit > 0 && max_tokens > limits.max_tokens_limit)
            throw ApiError::invalid(fmt::format("'{}' is {}; this server allows at most {}", param, max_tokens,
                                                limits.max_tokens_limit),
                                    param, "invalid_value");
        if (longest + max_tokens > context)
            throw ApiError::invalid(fmt::format("This model's maximum context length is {} tokens. However, you "
                                                "requested {} tokens ({} in the prompt, {} for the completion). "
                                                "Please reduce the prompt or the completion length.",
                                                context, longest + max_tokens, longest, max_tokens),
                                    param, "context_length_exceeded");
    } else {
        // OpenAI defaults: 16 for completions, "as much as fits" for chat; both within the limit.
        const int64_t room = context - longest;
        const int64_t chat_cap = limits.max_tokens_limit > 0 ? limits.max_tokens_limit : room;
        max_tokens = chat ? std::min(chat_cap, room) : std::min<int64_t>(16, room);
        if (max_tokens < 1)
            throw ApiError::invalid(fmt::format("the prompt ({} tokens) leaves no room in the model's context of {} "
                                                "tokens",
                                                longest, context),
                                    prompt_param, "context_length_exceeded");
    }

    if (p.min_tokens > max_tokens)
        throw ApiError::invalid(fmt::format("'min_tokens' ({}) is more than the {} tokens this request may generate",
                                            p.min_tokens, max_tokens),
                                "min_tokens", "invalid_value");

    EngineRequests out;
    out.max_tokens = max_tokens;
    out.echo_text = std::move(prompts.echo_text);
    out.reserved_tokens = prompts.total() + int64_t(prompts.prompts.size()) * p.n * max_tokens;
    for (size_t sub = 0; sub < prompts.prompts.size(); ++sub) {
        engine::Request r;
        r.prompt = std::move(prompts.prompts[sub]);
        r.n = p.n;
        r.logprobs = p.logprobs;
        // vLLM's prompt_logprobs, or the legacy echo with logprobs (as many alternatives as logprobs).
        r.prompt_logprobs = std::max(p.prompt_logprobs, p.echo && p.logprobs >= 0 ? p.logprobs : -1);
        out.first_prompt_token.push_back(r.prompt.empty() ? 0 : r.prompt[0]);
        r.sampling.temperature = p.temperature;
        r.sampling.top_p = p.top_p;
        r.sampling.top_k = p.top_k;
        r.sampling.min_p = p.min_p;
        r.sampling.repetition_penalty = p.repetition_penalty;
        r.sampling.presence_penalty = p.presence_penalty;
        r.sampling.frequency_penalty = p.frequency_penalty;
        r.sampling.logit_bias = p.logit_bias;
        if (p.seed) r.sampling.seed = *p.seed + uint64_t(sub) * uint64_t(p.n);
        r.stop.max_tokens = max_tokens;
        r.stop.ignore_eos = p.ignore_eos;
        r.stop.min_tokens = p.min_tokens;
        r.stop.stop = p.stop;
        r.stop.include_stop_str = p.include_stop_str;
        r.stop.stop_token_ids = p.stop_token_ids;
        r.grammar = p.grammar;
        out.subs.push_back(std::move(r));
    }
    return out;
}

}  // namespace pagoda::server
