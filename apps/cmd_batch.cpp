// `pagoda batch`: offline completions. Each line of the input is either an OpenAI /v1/completions
// request body (plus an optional string custom_id), or a line of OpenAI's Batch API
// ({"custom_id", "method": "POST", "url": "/v1/completions" | "/v1/chat/completions", "body"}),
// parsed, tokenised and limited exactly as the HTTP server does (server::parse_completion_request,
// tokenize_prompts, make_engine_requests; chat through the chat template `serve` would use). Output,
// one line per input line in input order: for a body line its response object, or the server's
// error object, with the line's number ("line") and custom_id; for a Batch API line OpenAI's batch
// output shape ({"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}).
// All requests run through one continuous-batching engine.
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/kv_flags.h"
#include "apps/profile_flags.h"
#include "apps/prefix_tier_flags.h"
#include "apps/speculative_flags.h"
#include "chat/chat_template.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "apps/lora_flags.h"
#include "apps/model_flags.h"
#include "apps/progress.h"
#include "apps/text_file.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/model_file.h"
#include "model/system_fingerprint.h"
#include "server/lora_registry.h"
#include "server/api_error.h"
#include "server/openai_engine_request.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;
using server::ApiError;

struct BatchOptions {
    SpeculativeFlags spec;
    std::string model, input, output, chat_template;
    int threads = 0;
    int64_t max_batched_tokens = 2048, ctx = 0;
    int32_t max_seqs = 64;
    KvFlags kv;
    ProfileFlags profile;
    PrefixTierFlags tier;
    ModelFlags compute;
    LoraFlags lora;
};

struct Line {
    json custom_id = nullptr;  // echoed as given
    bool batch_api = false;    // an OpenAI Batch API line: answered in its output shape
    server::Endpoint endpoint = server::Endpoint::completions;
    std::optional<ApiError> error;
    std::optional<server::CompletionParams> params;
    server::TokenizedPrompts prompts;
    std::unique_ptr<server::ResponseAssembler> result;
};

// The chat template for chat lines, chosen as `serve` chooses: --chat-template, else the model's,
// else chatml. The model's is built on first use, so a batch without chat lines never parses it; a
// --chat-template is parsed at once, so a bad one fails the command rather than every chat line.
class ChatTemplateChoice {
public:
    ChatTemplateChoice(std::string flag, std::string from_model) : flag_(std::move(flag)), from_model_(std::move(from_model)) {
        if (!flag_.empty()) get();
    }
    const chat::ChatTemplate& get() {
        if (!template_) {
            if (!flag_.empty()) {
                template_ = chat::ChatTemplate::from_name_or_file(flag_);
            } else if (!from_model_.empty()) {
                template_ = chat::ChatTemplate::from_source(from_model_, "gguf");
            } else {
                log_warn("the model has no tokenizer.chat_template; chat lines use the builtin 'chatml' (--chat-template)");
                template_ = chat::ChatTemplate::builtin("chatml");
            }
        }
        return *template_;
    }

private:
    std::string flag_, from_model_;
    std::optional<chat::ChatTemplate> template_;
};

// The endpoint a Batch API line names; refuses other methods and URLs as the batch service does.
server::Endpoint batch_api_endpoint(const json& line) {
    if (line.contains("method") && line["method"] != "POST")
        throw ApiError::invalid("'method' must be \"POST\"", "method", "invalid_value");
    if (!line.contains("url") || !line["url"].is_string())
        throw ApiError::invalid("a Batch API line needs 'url': /v1/completions or /v1/chat/completions", "url");
    const std::string url = line["url"];
    if (url == "/v1/completions") return server::Endpoint::completions;
    if (url == "/v1/chat/completions") return server::Endpoint::chat_completions;
    throw ApiError::invalid(fmt::format("'url' {} is not served here: use /v1/completions or /v1/chat/completions", url),
                            "url", "invalid_value");
}

// Reads one input line into `line` (params and tokenised prompts), or records why it cannot run.
void parse_line(const std::string& text, const tokenizer::Tokenizer& tok, int64_t vocab_size, ChatTemplateChoice& chat,
                const server::FimSettings& fim, Line& line) {
    try {
        if (text.find_first_not_of(" \t\r") == std::string::npos)
            throw ApiError::invalid("the line is empty; expected a JSON request object", {}, "invalid_json");
        json body = server::parse_json_body(text);
        if (body.is_object() && body.contains("custom_id")) {
            line.custom_id = body["custom_id"];
            if (!line.custom_id.is_null() && !line.custom_id.is_string())
                throw ApiError::invalid("'custom_id' must be a string", "custom_id", "invalid_type");
        }
        if (body.is_object() && body.contains("body")) {
            line.batch_api = true;
            line.endpoint = batch_api_endpoint(body);
            body = body["body"];
        } else if (body.is_object()) {
            body.erase("custom_id");  // the line's, not a request field (which would be refused)
        }
        line.params = server::parse_completion_request(body, line.endpoint);
        const chat::ChatTemplate* chat_template =
            line.endpoint == server::Endpoint::chat_completions ? &chat.get() : nullptr;
        line.prompts = server::tokenize_prompts(*line.params, tok, chat_template, vocab_size, fim);
    } catch (const ApiError& e) {
        line.error = e;
    } catch (const Error& e) {
        line.error = ApiError::invalid(e.what());
    }
}

// OpenAI's batch output line for line `i`: the response (or error) body with its HTTP status.
json batch_api_output(size_t i, const Line& line, const std::optional<ApiError>& error, json body) {
    return {{"id", fmt::format("batch_req_{}", i + 1)},
            {"custom_id", line.custom_id},
            {"response", {{"status_code", error ? error->status : 200},
                          {"request_id", fmt::format("req_{}", i + 1)},
                          {"body", std::move(body)}}},
            {"error", nullptr}};
}

int run_batch(const BatchOptions& o) {
    std::istringstream in(read_text_file(o.input, "input file"));
    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model, o.compute.file_options(o.threads));
    const model::ModelConfig config = model::read_config(*file);
    std::shared_ptr<const tokenizer::Tokenizer> tok(tokenizer::Tokenizer::from_gguf(*file));
    const std::string model_name = std::filesystem::path(o.model).stem().string();
    const int64_t vocab_size = config.vocab_size;

    ChatTemplateChoice chat(o.chat_template, file->get_string_or("tokenizer.chat_template", ""));
    std::vector<Line> lines;
    int64_t tokens_wanted = 0;
    const int64_t ctx = o.ctx > 0 ? o.ctx : config.context_length;
    const server::FimSettings fim{.n_batch = std::min<int64_t>(o.max_batched_tokens, ctx), .n_ctx = ctx};
    for (std::string text; std::getline(in, text);) {
        Line& line = lines.emplace_back();
        parse_line(text, *tok, vocab_size, chat, fim, line);
        if (line.error) continue;
        const int64_t max_tokens = line.params->max_tokens.value_or(16);
        for (const auto& ids : line.prompts.prompts) tokens_wanted += (int64_t(ids.size()) + max_tokens) * line.params->n;
    }
    tokens_wanted = std::clamp<int64_t>(tokens_wanted, ctx, ctx * o.max_seqs);

    const model::KvOptions kv = o.kv.options();
    engine::EngineOptions options;
    options.scheduler.max_batched_tokens = o.max_batched_tokens;
    options.scheduler.max_seqs = o.max_seqs;
    options.prefix_caching = kv.prefix_caching;
    options.prefix_tier = o.tier.options(kv.prefix_caching);
    options.state_snapshots = o.kv.state_snapshots;
    model::StepModelOptions model_options = o.compute.options(o.threads, kv, tokens_wanted, o.ctx, o.max_batched_tokens);
    model_options.state_slots = o.max_seqs + (kv.prefix_caching ? o.kv.state_snapshots : 0);  // recurrent models only
    model_options.lora = o.lora.any();
    model_options.lora_storage = o.lora.storage(o.lora.any());
    auto target = model::open_step_model(file, model_options);
    // A line picks an adapter by `model` (its name) or `lora` ([{"id", "scale"}], ids in flag order).
    std::optional<server::LoraRegistry> loras;
    if (o.lora.any()) {
        loras.emplace();
        for (auto& adapter : o.lora.load(*target)) loras->add(std::move(adapter));
    }
    options.speculative = o.spec.resolve(*tok, *target, model_options);
    engine::Engine eng(std::move(target), tok, options);
    const std::string fingerprint = model::system_fingerprint(model::fingerprint_parts(eng.model_info()));
    const server::EngineLimits limits{.context = eng.context_limit(), .vocab_size = vocab_size};

    std::mutex mutex;
    std::condition_variable cv;
    size_t done = 0, submitted = 0;  // engine requests (one per prompt of a line)
    const int64_t created = int64_t(std::time(nullptr));
    const auto run_start = std::chrono::steady_clock::now();  // the model is loaded: time the requests alone
    for (size_t i = 0; i < lines.size(); ++i) {
        Line& line = lines[i];
        if (line.error) continue;
        const server::CompletionParams& p = *line.params;
        std::vector<engine::RequestId> ids;
        try {
            lora::AdapterRef adapter;
            const bool names_base = p.model.empty() || p.model == model_name;
            if (!names_base && !(loras && loras->has(p.model)))
                throw ApiError(404, fmt::format("the model '{}' does not exist; this batch runs '{}'", p.model, model_name),
                               "invalid_request_error", "model", "model_not_found");
            if (!p.lora.empty() && !loras)
                throw ApiError::invalid("'lora' names an adapter, but this batch has none (--lora)", "lora", "invalid_value");
            if (loras) adapter = loras->resolve(names_base ? std::string() : p.model, p.lora);
            server::EngineRequests requests = server::make_engine_requests(p, std::move(line.prompts), limits);
            for (auto& sub : requests.subs) sub.lora = adapter;
            server::ResponseContext rc;
            rc.endpoint = line.endpoint;
            const char* prefix = line.endpoint == server::Endpoint::chat_completions ? "chatcmpl-" : "cmpl-";
            rc.id = prefix + (line.custom_id.is_string() ? line.custom_id.get<std::string>() : std::to_string(i + 1));
            rc.created = created;
            rc.model = p.model.empty() ? model_name : p.model;
            rc.system_fingerprint = fingerprint;
            rc.n = p.n;
            rc.logprobs = p.logprobs;
            rc.echo_text = std::move(requests.echo_text);
            rc.tokenizer = tok.get();
            line.result = std::make_unique<server::ResponseAssembler>(std::move(rc), requests.subs.size());
            for (size_t sub = 0; sub < requests.subs.size(); ++sub) {
                server::ResponseAssembler* result = line.result.get();
                auto handle = eng.submit(std::move(requests.subs[sub]), [&, result, sub](const engine::Delta& d) {
                    std::lock_guard lock(mutex);
                    result->add(sub, d);
                    if (d.request_done) {
                        ++done;
                        cv.notify_all();
                    }
                });
                ids.push_back(handle.id());
                ++submitted;
            }
        } catch (const ApiError& e) {
            line.error = e;
        } catch (const Error& e) {
            line.error = ApiError::invalid(e.what());
        }
        if (line.error)
            for (engine::RequestId id : ids) eng.cancel(id);  // the line failed as a whole; their last deltas still count
    }
    {
        Progress progress("requests", submitted);
        std::unique_lock lock(mutex);
        while (done < submitted) {
            progress.update(done);
            cv.wait_for(lock, std::chrono::milliseconds(200));
        }
        progress.update(done);
    }
    const double run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    eng.shutdown(true);

    std::ofstream out(o.output);
    if (!out) fail("cannot create the output file '{}'", o.output);
    size_t failures = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        const Line& line = lines[i];
        std::optional<ApiError> error = line.error;
        if (!error && line.result->error()) error = ApiError::internal(*line.result->error());
        json j = error ? error->body() : line.result->response();
        failures += error.has_value();
        if (line.batch_api) {
            j = batch_api_output(i, line, error, std::move(j));
        } else {
            j["line"] = i + 1;
            if (!line.custom_id.is_null()) j["custom_id"] = line.custom_id;
        }
        out << server::dump_json(j) << '\n';
    }
    if (!out) fail("writing '{}' failed", o.output);
    auto s = eng.stats();
    std::fprintf(stderr, "pagoda batch: %zu requests, %zu failed; %lld prompt + %lld generated tokens, %.0f%% prefix-cache hits, %lld preemptions\n",
                 lines.size(), failures, (long long)s.prompt_tokens, (long long)s.generation_tokens,
                 100.0 * s.prefix_hit_rate(), (long long)s.preemptions);
    std::fprintf(stderr, "pagoda batch: requests ran %.2f s after the model loaded (%.1f generated tokens/s)\n", run_seconds,
                 run_seconds > 0 ? double(s.generation_tokens) / run_seconds : 0.0);
    if (o.spec.enabled())
        std::fprintf(stderr, "pagoda batch: speculation: %lld drafted, %lld accepted (%.0f%%), %lld steps\n",
                     (long long)s.draft_tokens, (long long)s.accepted_draft_tokens,
                     s.draft_tokens ? 100.0 * double(s.accepted_draft_tokens) / double(s.draft_tokens) : 0.0,
                     (long long)s.steps);
    return 0;  // per-line failures are reported in the output
}

CommandRegistration reg("batch", "Run a JSONL file of OpenAI completion requests (or Batch API lines) through the engine", [](CLI::App& sub) {
    auto o = std::make_shared<BatchOptions>();
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    sub.add_option("-i,--input", o->input, "Requests, one JSON object per line")->required();
    sub.add_option("-o,--output", o->output, "Responses, one JSON object per line, in input order")->required();
    add_threads_option(sub, o->threads);
    o->compute.add_to(sub);
    o->lora.add_to(sub);
    sub.add_option("--max-batched-tokens", o->max_batched_tokens, "Tokens per engine step")->check(in_range(1, 1 << 20));
    sub.add_option("--max-seqs,--parallel", o->max_seqs, "Sequences running at once (-np, as llama.cpp)")
        ->check(in_range(1, 4096));
    o->kv.add_to(sub);
    o->profile.add_to(sub);
    o->tier.add_to(sub);
    o->spec.add_to(sub);
    sub.add_option("--chat-template", o->chat_template,
                   "For /v1/chat/completions lines: a builtin name (chatml, llama2, llama3, ...) or a Jinja file "
                   "(empty: the model's, else chatml)");
    sub.add_option("-c,--ctx-size,--ctx", o->ctx, "Context per request: prompt + output tokens at most (0: the model's trained context)")->check(in_range(0, 1 << 24));
    return [o] {
        o->profile.apply(o->model, o->compute, &o->threads, &o->kv.block_size, &o->max_batched_tokens, &o->max_seqs);
        return run_batch(*o);
    };
});

}  // namespace
}  // namespace pagoda::app
