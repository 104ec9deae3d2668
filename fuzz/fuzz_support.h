// Shared by the libFuzzer targets: where the fixtures are, the tokenizers and chat templates they
// run against, a JSON generator driven by fuzz bytes (FuzzedDataProvider), and the gateway's request
// pipeline exactly as Gateway::start() runs it up to the engine (parse, tools, prompts, limits).
// The oracle every target shares: a refusal must be an ApiError / pagoda::Error (the server answers
// it with a 4xx naming the problem); any other exception escaping is a bug and aborts the run.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/openai_request.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::fuzz {

// PAGODA_FIXTURES, else the build's fixture folder (../shared).
std::string fixtures_dir();

struct NamedTokenizer {
    std::string name;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
};
// Every vocabulary in fixtures/vocab plus models/stories260K.gguf (loaded once; empty when the
// fixtures are missing, which the targets report once and then skip the tokenizer-dependent work).
const std::vector<NamedTokenizer>& all_tokenizers();
// The small stories260K vocabulary (512 tokens): fast enough to tokenize every request with.
const tokenizer::Tokenizer* small_tokenizer();
// A fixture vocabulary with fill-in-the-middle tokens (deepseek-coder), else small_tokenizer().
const tokenizer::Tokenizer* fim_tokenizer();

// Every builtin chat template, parsed once.
const std::vector<chat::ChatTemplate>& builtin_templates();

// Aborts with the message: an exception of a kind no caller handles as a refusal.
[[noreturn]] void unexpected(const char* where, const std::exception& e);
// Aborts with the message: a target's oracle found the code breaking its contract.
[[noreturn]] void fail_check(const char* what);

// Random JSON from fuzz bytes. Strings come from a vocabulary of the API's field names and values
// (so the generator reaches deep validation) or from the bytes themselves.
class JsonGen {
public:
    explicit JsonGen(FuzzedDataProvider& p) : p_(p) {}
    nlohmann::json value(int depth = 3);
    std::string string();
    nlohmann::json number();
    // A JSON Schema built from the keywords grammar/json_schema.h knows (and some it refuses).
    nlohmann::json schema(int depth = 3);
    // GBNF text from rule pieces (valid more often than not).
    std::string gbnf();
    // A chat messages array: roles, string / null / parts content, tool calls, tool results.
    nlohmann::json messages();
    // An OpenAI tools array with generated parameter schemas.
    nlohmann::json tools();
    // A completion or chat request body with a random subset of the documented fields.
    nlohmann::json request_body(server::Endpoint endpoint);
    // A /v1/responses body: input as a string or items (messages with text parts, function calls and
    // their outputs, reasoning, and items of other types), Responses-shaped tools (hosted ones too),
    // text.format, reasoning and the other fields.
    nlohmann::json responses_body();
    // A chat.completion.chunk as the ResponseAssembler writes them (reasoning, content, whole or
    // partial tool calls, a finish reason), or sometimes any JSON.
    nlohmann::json chat_chunk();

private:
    const std::string& pick(const std::vector<std::string>& options);
    FuzzedDataProvider& p_;
};

// Gateway::start() up to the engine: parse_completion_request, apply_tools (chat template
// `tmpl`), the model name check, tokenize_prompts and make_engine_requests with a 2048-token context.
// Throws ApiError for every refusal.
void run_completion_pipeline(const nlohmann::json& body, server::Endpoint endpoint, const chat::ChatTemplate* tmpl,
                             const tokenizer::Tokenizer* tok);
// The gateway's /v1/responses up to the engine: parse_responses_request, the chat body, then
// run_completion_pipeline, its errors renamed by map_chat_error (no response is stored here, so a
// previous_response_id is the store's 404).
void run_responses_pipeline(const nlohmann::json& body, const chat::ChatTemplate* tmpl, const tokenizer::Tokenizer* tok);
// The gateway's /v1/embeddings checks: parse, then tokenize text inputs and range-check id inputs.
void run_embedding_pipeline(const nlohmann::json& body, const tokenizer::Tokenizer* tok);

}  // namespace pagoda::fuzz
