#include "fuzz/fuzz_support.h"

#include <filesystem>
#include <fmt/format.h>

#include "chat/builtin_templates.h"
#include "chat/reasoning.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/embedding_request.h"
#include "server/openai_engine_request.h"
#include "server/reasoning_request.h"
#include "server/responses_request.h"
#include "server/tool_request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::fuzz {

using json = nlohmann::json;

std::string fixtures_dir() {
    if (const char* env = std::getenv("PAGODA_FIXTURES"); env && *env) return env;
    return PAGODA_FIXTURES_DIR;
}

const std::vector<NamedTokenizer>& all_tokenizers() {
    static const std::vector<NamedTokenizer> tokenizers = [] {
        std::vector<NamedTokenizer> out;
        std::vector<std::filesystem::path> paths;
        const std::filesystem::path root = fixtures_dir();
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(root / "vocab", ec))
            if (entry.path().extension() == ".gguf") paths.push_back(entry.path());
        std::sort(paths.begin(), paths.end());
        if (std::filesystem::exists(root / "models" / "stories260K.gguf"))
            paths.insert(paths.begin(), root / "models" / "stories260K.gguf");
        for (const auto& path : paths) {
            auto file = gguf::File::open(path.string());
            out.push_back({path.stem().string(), tokenizer::Tokenizer::from_gguf(*file)});
        }
        if (out.empty())
            std::fprintf(stderr, "fuzz: no vocabularies under %s (set PAGODA_FIXTURES); tokenizer work is skipped\n",
                         root.c_str());
        return out;
    }();
    return tokenizers;
}

const tokenizer::Tokenizer* small_tokenizer() {
    const auto& all = all_tokenizers();
    for (const auto& t : all)
        if (t.name == "stories260K") return t.tokenizer.get();
    return all.empty() ? nullptr : all.front().tokenizer.get();
}

const tokenizer::Tokenizer* fim_tokenizer() {
    for (const auto& t : all_tokenizers())
        if (t.tokenizer->vocab().fim().usable()) return t.tokenizer.get();
    return small_tokenizer();
}

const std::vector<chat::ChatTemplate>& builtin_templates() {
    static const std::vector<chat::ChatTemplate> templates = [] {
        std::vector<chat::ChatTemplate> out;
        for (const std::string& name : chat::ChatTemplate::builtin_names()) out.push_back(chat::ChatTemplate::builtin(name));
        return out;
    }();
    return templates;
}

void unexpected(const char* where, const std::exception& e) {
    std::fprintf(stderr, "fuzz: %s: unexpected exception (not a refusal): %s\n", where, e.what());
    std::abort();
}

void fail_check(const char* what) {
    std::fprintf(stderr, "fuzz: check failed: %s\n", what);
    std::abort();
}

// ---- JSON generation ----

namespace {

// Field names and values of the API, JSON Schema keywords and chat roles: what a generated string
// is drawn from most of the time.
const std::vector<std::string>& words() {
    static const std::vector<std::string> w = {
        "model", "prompt", "messages", "role", "content", "system", "user", "assistant", "tool", "developer",
        "name", "tool_calls", "tool_call_id", "function", "arguments", "type", "text", "image_url", "url", "detail", "input_image", "data:image/png;base64,", "n",
        "max_tokens", "max_completion_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k",
        "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "logit_bias", "seed",
        "logprobs", "top_logprobs", "echo", "ignore_eos", "stream", "stream_options", "include_usage",
        "response_format", "json_object", "json_schema", "schema", "strict", "grammar", "tools",
        "tool_choice", "auto", "none", "required", "parallel_tool_calls", "chat_template_kwargs",
        "enable_thinking", "suffix", "best_of", "user", "guided_choice", "guided_regex", "guided_grammar",
        "include_stop_str_in_output", "continue_final_message", "add_generation_prompt", "reasoning_content", "parameters", "description",
        "object", "array", "string", "integer", "number", "boolean", "null", "properties",
        "additionalProperties", "items", "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf",
        "$ref", "$defs", "definitions", "#/$defs/a", "#", "#/properties/x", "pattern", "minLength",
        "maxLength", "minimum", "maximum", "format", "title", "default", "input", "encoding_format",
        "float", "base64", "dimensions", "tokens", "add_special", "parse_special", "with_pieces", "id",
        "endpoint", "body", "cancel", "request", "completions", "chat.completions", "fuzz-model", "",
        "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<think>", "</think>", "<tool_call>", "\xff\xfe",
        "\xc3", "\xe2\x82\xac", "{{", "}}", "{%", "%}", "^[a-z]+$", "a|b", "(ab)*", "[0-9]{2,4}", "\\d+",
    };
    return w;
}

}  // namespace

const std::string& JsonGen::pick(const std::vector<std::string>& options) {
    return options[p_.ConsumeIntegralInRange<size_t>(0, options.size() - 1)];
}

std::string JsonGen::string() {
    if (p_.ConsumeBool()) return pick(words());
    return p_.ConsumeRandomLengthString(64);
}

json JsonGen::number() {
    switch (p_.ConsumeIntegralInRange<int>(0, 5)) {
        case 0: return p_.ConsumeIntegralInRange<int64_t>(-2, 8);
        case 1: return p_.ConsumeIntegral<int64_t>();
        case 2: return p_.ConsumeIntegral<uint64_t>();
        case 3: return p_.ConsumeFloatingPoint<double>();
        case 4: return p_.ConsumeProbability<double>() * 4 - 1;
        default: return p_.ConsumeIntegralInRange<int64_t>(0, 600);
    }
}

json JsonGen::value(int depth) {
    const int kind = p_.ConsumeIntegralInRange<int>(0, depth > 0 ? 6 : 4);
    switch (kind) {
        case 0: return nullptr;
        case 1: return p_.ConsumeBool();
        case 2: return number();
        case 3:
        case 4: return string();
        case 5: {
            json a = json::array();
            const int n = p_.ConsumeIntegralInRange<int>(0, 4);
            for (int i = 0; i < n && p_.remaining_bytes(); ++i) a.push_back(value(depth - 1));
            return a;
        }
        default: {
            json o = json::object();
            const int n = p_.ConsumeIntegralInRange<int>(0, 4);
            for (int i = 0; i < n && p_.remaining_bytes(); ++i) o[string()] = value(depth - 1);
            return o;
        }
    }
}

json JsonGen::schema(int depth) {
    if (depth <= 0 || p_.ConsumeIntegralInRange<int>(0, 5) == 0) {
        static const std::vector<std::string> types = {"string", "integer", "number", "boolean", "null", "object", "array"};
        if (p_.ConsumeBool()) return json{{"type", pick(types)}};
        return p_.ConsumeBool() ? json(true) : json(json::object());
    }
    json s = json::object();
    const int n = p_.ConsumeIntegralInRange<int>(1, 4);
    for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
        switch (p_.ConsumeIntegralInRange<int>(0, 15)) {
            case 0: {
                static const std::vector<std::string> types = {"string", "integer", "number", "boolean", "null", "object", "array"};
                if (p_.ConsumeBool()) s["type"] = pick(types);
                else s["type"] = json::array({pick(types), pick(types)});
                break;
            }
            case 1: {
                json props = json::object();
                json required = json::array();
                const int k = p_.ConsumeIntegralInRange<int>(0, 3);
                for (int j = 0; j < k; ++j) {
                    std::string name = string();
                    props[name] = schema(depth - 1);
                    if (p_.ConsumeBool()) required.push_back(name);
                }
                s["type"] = "object";
                s["properties"] = props;
                if (!required.empty()) s["required"] = required;
                break;
            }
            case 2: s["additionalProperties"] = p_.ConsumeBool() ? json(p_.ConsumeBool()) : schema(depth - 1); break;
            case 3: s["items"] = schema(depth - 1); break;
            case 4: s["minItems"] = number(); break;
            case 5: s["maxItems"] = number(); break;
            case 6: {
                json e = json::array();
                const int k = p_.ConsumeIntegralInRange<int>(0, 3);
                for (int j = 0; j < k; ++j) e.push_back(value(1));
                s["enum"] = e;
                break;
            }
            case 7: s["const"] = value(2); break;
            case 8:
            case 9: {
                static const std::vector<std::string> combiners = {"anyOf", "oneOf", "allOf"};
                json branches = json::array();
                const int k = p_.ConsumeIntegralInRange<int>(0, 3);
                for (int j = 0; j < k; ++j) branches.push_back(schema(depth - 1));
                s[pick(combiners)] = branches;
                break;
            }
            case 10: s["$defs"] = json{{"a", schema(depth - 1)}}; break;
            case 11: s["$ref"] = p_.ConsumeBool() ? std::string("#/$defs/a") : string(); break;
            case 12: s["minLength"] = number(); break;
            case 13: s["maxLength"] = number(); break;
            case 14: s["pattern"] = string(); break;
            default: s[string()] = value(1); break;
        }
    }
    return s;
}

std::string JsonGen::gbnf() {
    static const std::vector<std::string> pieces = {
        "\"a\"", "\"yes\" | \"no\"", "[a-z]", "[^\"\\\\]", ".", "x*", "x+", "x?", "x{2,5}", "(x y)*", "( \"a\" | x )",
        "[\\u00e9-\\u00ff]", "\"\\x41\"", "\"\\n\"", "x{3}", "x{1,}", "root", "# comment\n", "\"\" ", "[]", "[^]",
    };
    std::string out = "root ::= ";
    const int rules = p_.ConsumeIntegralInRange<int>(1, 4);
    for (int r = 0; r < rules; ++r) {
        if (r > 0) out += r == 1 ? "\nx ::= " : "\ny ::= ";
        const int n = p_.ConsumeIntegralInRange<int>(1, 5);
        for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
            out += p_.ConsumeBool() ? pick(pieces) : p_.ConsumeRandomLengthString(12);
            out += ' ';
        }
    }
    return out;
}

json JsonGen::messages() {
    static const std::vector<std::string> roles = {"system", "user", "assistant", "tool", "developer"};
    json msgs = json::array();
    const int n = p_.ConsumeIntegralInRange<int>(0, 6);
    for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
        json m = json::object();
        m["role"] = p_.ConsumeIntegralInRange<int>(0, 9) == 0 ? value(1) : json(pick(roles));
        switch (p_.ConsumeIntegralInRange<int>(0, 4)) {
            case 0: m["content"] = nullptr; break;
            case 1: m["content"] = json::array({{{"type", "text"}, {"text", string()}}, {{"type", string()}, {"text", value(1)}}}); break;
            case 2: m["content"] = value(2); break;
            case 3: break;
            default: m["content"] = string(); break;
        }
        if (p_.ConsumeIntegralInRange<int>(0, 3) == 0) {
            json args = p_.ConsumeBool() ? json(string()) : value(2);
            m["tool_calls"] = json::array({{{"id", string()}, {"type", "function"},
                                            {"function", {{"name", string()}, {"arguments", args}}}}});
        }
        if (p_.ConsumeIntegralInRange<int>(0, 4) == 0) m["tool_call_id"] = string();
        if (p_.ConsumeIntegralInRange<int>(0, 4) == 0) m["name"] = string();
        if (p_.ConsumeIntegralInRange<int>(0, 4) == 0) m["reasoning_content"] = string();
        if (p_.ConsumeIntegralInRange<int>(0, 6) == 0) m[string()] = value(1);
        msgs.push_back(m);
    }
    return msgs;
}

json JsonGen::tools() {
    json t = json::array();
    const int n = p_.ConsumeIntegralInRange<int>(0, 3);
    for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
        if (p_.ConsumeIntegralInRange<int>(0, 7) == 0) {
            t.push_back(value(2));
            continue;
        }
        json f = {{"name", string()}};
        if (p_.ConsumeBool()) f["description"] = string();
        if (p_.ConsumeIntegralInRange<int>(0, 4) != 0) f["parameters"] = schema(3);
        if (p_.ConsumeIntegralInRange<int>(0, 5) == 0) f["strict"] = value(0);
        t.push_back({{"type", p_.ConsumeIntegralInRange<int>(0, 7) == 0 ? json(string()) : json("function")}, {"function", f}});
    }
    return t;
}

json JsonGen::request_body(server::Endpoint endpoint) {
    json body = json::object();
    if (endpoint == server::Endpoint::chat_completions) body["messages"] = messages();
    else if (endpoint == server::Endpoint::completions) {
        switch (p_.ConsumeIntegralInRange<int>(0, 3)) {
            case 0: body["prompt"] = string(); break;
            case 1: body["prompt"] = json::array({string(), string()}); break;
            case 2: body["prompt"] = json::array({p_.ConsumeIntegralInRange<int>(-1, 600), p_.ConsumeIntegralInRange<int>(0, 600)}); break;
            default: body["prompt"] = value(2); break;
        }
    } else if (endpoint == server::Endpoint::infill) {
        // llama-server's fields, each sometimes of the wrong type.
        for (const char* name : {"input_prefix", "input_suffix", "prompt"})
            if (p_.ConsumeBool()) body[name] = p_.ConsumeIntegralInRange<int>(0, 5) ? json(string()) : value(1);
        if (p_.ConsumeBool()) {
            json extra = json::array();
            for (int i = p_.ConsumeIntegralInRange<int>(0, 3); i > 0; --i)
                extra.push_back(p_.ConsumeIntegralInRange<int>(0, 5) ? json{{"filename", string()}, {"text", string()}}
                                                                     : value(2));
            body["input_extra"] = p_.ConsumeIntegralInRange<int>(0, 7) ? extra : value(1);
        }
    } else {
        body["input"] = p_.ConsumeBool() ? json(string()) : value(2);
    }
    if (endpoint == server::Endpoint::completions && p_.ConsumeIntegralInRange<int>(0, 3) == 0)
        body["suffix"] = p_.ConsumeBool() ? json(string()) : value(0);
    const int n = p_.ConsumeIntegralInRange<int>(0, 8);
    for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
        switch (p_.ConsumeIntegralInRange<int>(0, 17)) {
            case 0:
                body["response_format"] = {{"type", "json_schema"},
                                           {"json_schema", {{"name", string()}, {"schema", schema(4)}, {"strict", p_.ConsumeBool()}}}};
                break;
            case 1: body["response_format"] = p_.ConsumeBool() ? json{{"type", "json_object"}} : value(2); break;
            case 2: body["grammar"] = p_.ConsumeBool() ? json(gbnf()) : value(1); break;
            case 3: body["tools"] = tools(); break;
            case 4: {
                switch (p_.ConsumeIntegralInRange<int>(0, 3)) {
                    case 0: body["tool_choice"] = p_.PickValueInArray({"auto", "none", "required"}); break;
                    case 1: body["tool_choice"] = {{"type", "function"}, {"function", {{"name", string()}}}}; break;
                    default: body["tool_choice"] = value(2); break;
                }
                break;
            }
            case 5: body["stop"] = p_.ConsumeBool() ? json(string()) : value(2); break;
            case 6: body["logit_bias"] = json{{std::to_string(p_.ConsumeIntegralInRange<int>(-1, 600)), number()}}; break;
            case 7: body["stream_options"] = {{"include_usage", value(0)}}; break;
            case 8: body["chat_template_kwargs"] = p_.ConsumeBool() ? json{{"enable_thinking", value(0)}} : value(2); break;
            case 9: body["model"] = p_.ConsumeBool() ? json("fuzz-model") : value(0); break;
            // vLLM's guided decoding: choices and raw-text patterns into the grammar compiler.
            case 10: body["guided_choice"] = p_.ConsumeBool() ? json::array({string(), string()}) : value(2); break;
            case 11: body["guided_regex"] = p_.ConsumeBool() ? json(string()) : value(1); break;
            case 12: body["guided_grammar"] = p_.ConsumeBool() ? json(gbnf()) : value(1); break;
            // The stop string kept, and how a chat prompt ends (an assistant prefill).
            case 13: body["include_stop_str_in_output"] = value(0); break;
            case 14:
                body["continue_final_message"] = p_.ConsumeBool() ? json(true) : value(0);
                if (p_.ConsumeBool()) body["add_generation_prompt"] = value(0);
                break;
            case 15: {
                const char* field = p_.PickValueInArray({"thinking_token_budget", "max_thinking_tokens", "reasoning_effort"});
                body[field] = p_.ConsumeBool() ? json(p_.ConsumeIntegralInRange<int>(-1, 5000))
                                               : p_.ConsumeBool() ? json(p_.PickValueInArray({"low", "medium", "high", "max"}))
                                                                  : value(1);
                break;
            }
            default: body[string()] = p_.ConsumeBool() ? number() : value(2); break;
        }
    }
    return body;
}

json JsonGen::responses_body() {
    static const std::vector<std::string> item_types = {"message", "function_call", "function_call_output", "reasoning",
                                                        "item_reference", "web_search_call", "input_text", ""};
    static const std::vector<std::string> part_types = {"input_text", "output_text", "refusal", "input_image",
                                                        "input_file", "summary_text", "reasoning_text"};
    static const std::vector<std::string> tool_types = {"function", "function", "function", "web_search", "file_search",
                                                        "code_interpreter", "mcp", "custom", "computer_use_preview"};
    static const std::vector<std::string> roles = {"user", "system", "developer", "assistant", "tool"};
    auto parts = [&] {
        json ps = json::array();
        const int n = p_.ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < n; ++i) {
            json part = {{"type", pick(part_types)}, {"text", p_.ConsumeIntegralInRange<int>(0, 7) ? json(string()) : value(1)}};
            if (p_.ConsumeIntegralInRange<int>(0, 5) == 0) part[string()] = value(1);
            ps.push_back(std::move(part));
        }
        return ps;
    };
    json body = json::object();
    if (p_.ConsumeIntegralInRange<int>(0, 3) == 0) {
        body["input"] = p_.ConsumeBool() ? json(string()) : value(2);
    } else {
        json items = json::array();
        const int n = p_.ConsumeIntegralInRange<int>(0, 6);
        for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
            json item = json::object();
            const std::string type = pick(item_types);
            if (!type.empty() || p_.ConsumeBool()) item["type"] = type;
            item["role"] = pick(roles);
            item["content"] = p_.ConsumeBool() ? json(string()) : parts();
            item["call_id"] = p_.ConsumeIntegralInRange<int>(0, 7) ? json(pick({"c1", "c2"})) : value(0);
            item["name"] = string();
            item["arguments"] = p_.ConsumeBool() ? json("{\"a\": 1}") : json(string());
            item["output"] = p_.ConsumeBool() ? json(string()) : parts();
            if (type == "reasoning") item[p_.ConsumeBool() ? "summary" : "content"] = parts();
            // Most items carry only their own keys: drop the others at random.
            for (const char* key : {"role", "content", "call_id", "name", "arguments", "output"})
                if (p_.ConsumeIntegralInRange<int>(0, 3) == 0 ||
                    (type == "message" && key != std::string("role") && key != std::string("content")))
                    item.erase(key);
            if (p_.ConsumeIntegralInRange<int>(0, 5) == 0) item[p_.ConsumeBool() ? "id" : "status"] = string();
            items.push_back(std::move(item));
        }
        body["input"] = std::move(items);
    }
    const int n = p_.ConsumeIntegralInRange<int>(0, 8);
    for (int i = 0; i < n && p_.remaining_bytes(); ++i) {
        switch (p_.ConsumeIntegralInRange<int>(0, 13)) {
            case 0: body["instructions"] = p_.ConsumeBool() ? json(string()) : value(1); break;
            case 1: {
                json tools = json::array();
                for (const json& t : this->tools()) {
                    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
                        tools.push_back(t);
                        continue;
                    }
                    json flat = t["function"];
                    flat["type"] = pick(tool_types);
                    tools.push_back(std::move(flat));
                }
                body["tools"] = std::move(tools);
                break;
            }
            case 2: {
                switch (p_.ConsumeIntegralInRange<int>(0, 3)) {
                    case 0: body["tool_choice"] = p_.PickValueInArray({"auto", "none", "required"}); break;
                    case 1: body["tool_choice"] = {{"type", pick(tool_types)}, {"name", string()}}; break;
                    default: body["tool_choice"] = value(2); break;
                }
                break;
            }
            case 3:
                body["text"] = {{"format", {{"type", "json_schema"}, {"name", string()}, {"schema", schema(4)},
                                            {"strict", p_.ConsumeBool()}}}};
                break;
            case 4: body["text"] = p_.ConsumeBool() ? json{{"format", {{"type", "json_object"}}}} : value(2); break;
            case 5: body["reasoning"] = {{p_.ConsumeBool() ? "summary" : "effort", pick({"auto", "detailed", "concise", "low"})}}; break;
            case 6: body["max_output_tokens"] = number(); break;
            case 7: body["previous_response_id"] = p_.ConsumeBool() ? json("resp_1") : value(0); break;
            case 8: body["store"] = value(0); break;
            case 9: body["metadata"] = p_.ConsumeBool() ? json{{string(), string()}} : value(1); break;
            case 10: body["parallel_tool_calls"] = value(0); break;
            case 11: body["model"] = p_.ConsumeBool() ? json("fuzz-model") : value(0); break;
            case 12: body[pick({"temperature", "top_p", "truncation", "include", "background", "stream"})] = value(1); break;
            default: body[string()] = p_.ConsumeBool() ? number() : value(2); break;
        }
    }
    return body;
}

json JsonGen::chat_chunk() {
    if (p_.ConsumeIntegralInRange<int>(0, 9) == 0) return value(3);
    json delta = json::object();
    if (p_.ConsumeBool()) delta["reasoning_content"] = string();
    if (p_.ConsumeBool()) delta["content"] = string();
    if (p_.ConsumeIntegralInRange<int>(0, 2) == 0) {
        json call = {{"index", p_.ConsumeIntegralInRange<int>(0, 2)}};
        json fn = {{"arguments", string()}};
        if (p_.ConsumeBool()) {
            call["id"] = "call_" + string();
            call["type"] = "function";
            fn["name"] = string();
        }
        call["function"] = std::move(fn);
        delta["tool_calls"] = json::array({std::move(call)});
    }
    json finish = p_.ConsumeIntegralInRange<int>(0, 4) == 0 ? json(pick({"stop", "length", "tool_calls"})) : json(nullptr);
    return {{"object", "chat.completion.chunk"},
            {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
}

// ---- the gateway pipeline ----

void run_completion_pipeline(const json& body, server::Endpoint endpoint, const chat::ChatTemplate* tmpl,
                             const tokenizer::Tokenizer* tok) {
    server::CompletionParams p = server::parse_completion_request(body, endpoint);
    server::apply_tools(p, tmpl);
    if (!p.model.empty() && p.model != "fuzz-model")
        throw server::ApiError(404, "the model does not exist", "invalid_request_error", "model", "model_not_found");
    if (!tok) return;
    const int64_t vocab = tok->n_vocab();
    server::TokenizedPrompts prompts = server::tokenize_prompts(p, *tok, tmpl, vocab, {.n_batch = 512, .n_ctx = 2048});
    const bool opens = prompts.opens_thinking;
    server::EngineRequests requests = server::make_engine_requests(
        p, std::move(prompts), {.context = 2048, .vocab_size = vocab, .max_prompt_tokens = 0, .max_tokens_limit = 4096});
    // As Gateway::launch: the reasoning prefix on the grammar and the thinking budget.
    server::apply_reasoning(p,
                            {.template_thinks = tmpl && chat::template_thinks(tmpl->source()),
                             .prompt_opens = opens,
                             .format = tmpl ? chat::template_reasoning_format(tmpl->source()) : chat::ReasoningFormat::none},
                            requests);
    for (const auto& r : requests.subs)
        if (r.prompt.empty() || int64_t(r.prompt.size()) > 2048) std::abort();  // make_engine_requests' contract
}

void run_responses_pipeline(const json& body, const chat::ChatTemplate* tmpl, const tokenizer::Tokenizer* tok) {
    const server::ResponsesRequest r = server::parse_responses_request(body);
    if (!r.previous_response_id.empty())
        throw server::ApiError(404, "no stored response", "invalid_request_error", "previous_response_id",
                               "previous_response_not_found");
    try {
        run_completion_pipeline(server::responses_chat_body(r, r.input_items), server::Endpoint::chat_completions, tmpl, tok);
    } catch (const server::ApiError& e) {
        throw server::map_chat_error(e);
    }
}

void run_embedding_pipeline(const json& body, const tokenizer::Tokenizer* tok) {
    server::EmbeddingParams p = server::parse_embedding_request(body);
    if (!tok) return;
    for (const auto& input : p.inputs) {
        if (const auto* text = std::get_if<std::string>(&input)) {
            (void)tok->encode(*text);
        } else {
            for (int32_t id : std::get<std::vector<int32_t>>(input))
                if (id < 0 || id >= tok->n_vocab())
                    throw server::ApiError::invalid(fmt::format("token id {} is out of range", id), "input");
        }
    }
}

}  // namespace pagoda::fuzz
