// Parses and validates the JSON body of POST /v1/completions and /v1/chat/completions into a
// CompletionParams, without a model: types and ranges are checked here and every problem becomes an
// ApiError (400, naming the field in `param`). Which top-level fields exist, and whether each is
// honoured, a no-op by definition (user, metadata, store: false, ...) or refused, is the list in
// request_fields.h; unknown fields are refused too. Values a field cannot honour (best_of != n,
// echo with logprobs or with a suffix, a JSON schema keyword the grammar compiler cannot enforce)
// are refused rather than silently dropped. vLLM's extensions top_k, min_p, repetition_penalty,
// ignore_eos, min_tokens, stop_token_ids, include_stop_str_in_output, add_generation_prompt and
// continue_final_message are honoured. Structured output — response_format json_object /
// json_schema, json_schema / guided_json, guided_choice, guided_regex, or GBNF (`grammar`,
// guided_grammar) — is compiled here into a grammar every choice's output is constrained to. The
// fields are read in parts (openai_request_parts.h) with core/json_reader.h.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <memory>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace pagoda::server {

// infill: POST /infill (llama-server's fill-in-the-middle); it parses into a completions request.
// responses: POST /v1/responses, translated into a chat request (responses_request.h).
enum class Endpoint { completions, chat_completions, embeddings, responses, infill, rerank, score };
// "completions", "chat.completions", "embeddings", "responses", "infill", "rerank", "score"
const char* endpoint_name(Endpoint e);

// One prompt of a completions request: text, or token ids given directly.
using PromptInput = std::variant<std::string, std::vector<int32_t>>;

// One file of repository context for fill-in-the-middle (/infill's input_extra).
struct FimChunk {
    std::string filename, text;
};

// A fill-in-the-middle request: /v1/completions with a non-empty `suffix` (each prompt is the text
// before the hole), or POST /infill (then `prefix` is input_prefix and the one prompt is the text the
// user typed after it, llama-server's `prompt`). fim_prompt.h assembles the tokens.
struct FimRequest {
    bool infill = false;
    std::string prefix;  // infill only
    std::string suffix;
    std::vector<FimChunk> extra;  // infill only
};

// tool_choice: "auto" (default), "none", "required", or {"type": "function", "function": {"name"}}.
enum class ToolChoice { automatic, none, required, function };

// One entry of llama-server's `lora` field: an adapter by id (or by the path it was loaded from) and
// its scale (server/lora_registry.h resolves it).
struct LoraChoice {
    int64_t id = -1;
    std::string path;
    double scale = 1;
};

// `lora`: [{"id": N | "path": P, "scale": S}] (scale default 1; lora_request.cpp). Throws ApiError
// (400) naming the item.
std::vector<LoraChoice> parse_lora_field(const nlohmann::json& value);

struct CompletionParams {
    Endpoint endpoint = Endpoint::completions;
    std::string model;                       // as sent (may be empty)
    std::vector<PromptInput> prompts;        // completions: one or more prompts
    std::vector<std::string> multimodal_data;  // completions: base64 images for the one prompt's
                                               // <__media__> markers (llama-server's prompt object)
    nlohmann::json messages;                 // chat: the messages array as sent
    nlohmann::ordered_json tools;            // chat: tools array or null (handed to the template), keys in
                                             // the order sent, so a schema's properties keep their order
    ToolChoice tool_choice = ToolChoice::automatic;
    std::string tool_choice_function;        // with ToolChoice::function
    bool parallel_tool_calls = true;
    nlohmann::json chat_template_kwargs = nlohmann::json::object();  // chat: extra template variables
    bool add_generation_prompt = true;       // chat: the prompt opens the assistant's turn
    bool continue_final_message = false;     // chat: the prompt continues the last (assistant) message
    int32_t n = 1;
    std::optional<int64_t> max_tokens;       // max_tokens / max_completion_tokens; unset: default
    std::string max_tokens_param = "max_tokens";  // the field max_tokens came from (for errors)
    std::vector<std::string> stop;
    bool include_stop_str = false;           // vLLM include_stop_str_in_output: the stop string stays in the text
    std::vector<int32_t> stop_token_ids;
    float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f, repetition_penalty = 1.0f;
    int32_t top_k = 0;
    float presence_penalty = 0.0f, frequency_penalty = 0.0f;
    std::map<int32_t, float> logit_bias;
    std::optional<uint64_t> seed;
    int32_t priority = 0;                    // vLLM: lower is served sooner (bounded per API key)
    std::optional<double> timeout;           // seconds the request may wait to start (else its key's default)
    int32_t logprobs = -1;                   // -1: none; else alternatives per token (0..20)
    bool echo = false;                       // completions: prepend the prompt text (with logprobs: and
                                             // the prompt tokens' logprobs, OpenAI's legacy form)
    int32_t prompt_logprobs = -1;            // vLLM's: -1 none, else 0..20 alternatives per prompt token
    bool ignore_eos = false;
    int64_t min_tokens = 0;                  // vLLM: no end of sequence or stop string before this many tokens
    bool stream = false, include_usage = false;
    std::shared_ptr<const grammar::Grammar> grammar;  // from response_format or grammar; null: free text
    bool grammar_spells_reasoning = false;  // a GBNF `grammar` that writes <think> / </think> (or <|channel|>) itself (not prefixed)
    std::optional<FimRequest> fim;           // completions: fill in the middle (suffix, /infill)
    // Thinking budget (server/reasoning_request.h): thinking_token_budget / max_thinking_tokens
    // (tokens), or reasoning_effort "low" / "medium" / "high" through the server's budgets.
    std::optional<int64_t> thinking_budget;
    std::string thinking_budget_param = "thinking_token_budget";  // the field it came from (for errors)
    std::string reasoning_effort;
    std::vector<LoraChoice> lora;            // llama-server's `lora` (empty: none given)
};

// Maximum `n` and stop strings a request may carry (bounded work per request).
inline constexpr int32_t kMaxChoices = 128;
inline constexpr size_t kMaxStopStrings = 16;
// `priority` values a request (and a key file's `priority=` setting) may use: -kMaxPriority..kMaxPriority.
inline constexpr int32_t kMaxPriority = 1000000;
// The longest start deadline (`timeout`, a key file's `timeout=`), in seconds: one day.
inline constexpr double kMaxStartTimeout = 86400;

// Throws ApiError (400) on the first problem. Endpoint::infill: see parse_infill_request.
CompletionParams parse_completion_request(const nlohmann::json& body, Endpoint endpoint);
// The same from a body that keeps its keys in the order sent (parse_json_body's): JSON schemas
// (response_format, json_schema, guided_json) then generate their properties in the schema's order.
// A nlohmann::json body holds them sorted by name, so its schemas generate them in that order.
CompletionParams parse_completion_request(const nlohmann::ordered_json& body, Endpoint endpoint);
// POST /infill (infill_request.cpp): input_prefix, input_suffix (strings), input_extra (an array of
// {"filename", "text"}), prompt (a string), with every /v1/completions sampling field; the result
// is a completions request whose `fim` is set.
CompletionParams parse_infill_request(const nlohmann::json& body);

// Parses request bytes as JSON, its objects' keys in the order sent (converting the result to
// nlohmann::json sorts them). Malformed JSON (including invalid UTF-8) and numbers no double holds
// (1e400) are ApiError 400.
nlohmann::ordered_json parse_json_body(std::string_view bytes);
// A JSON library's error message without its internal tag ("[json.exception.parse_error.101]").
std::string json_problem(std::string_view message);

}  // namespace pagoda::server
