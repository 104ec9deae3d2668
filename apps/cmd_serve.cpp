// `pagoda serve`: the OpenAI-compatible HTTP/SSE/WebSocket server (src/server/) over one model, or
// over several loaded on demand (serve_models.h, server/model_router.h).
#include <chrono>
#include <filesystem>
#include <map>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/kv_flags.h"
#include "apps/profile_flags.h"
#include "apps/prefix_tier_flags.h"
#include "apps/speculative_flags.h"
#include "apps/lora_flags.h"
#include "apps/model_flags.h"
#include "apps/serve_loader.h"
#include "apps/serve_models.h"
#include "apps/text_file.h"
#include "chat/chat_template.h"
#include "core/error.h"
#include "server/api_keys.h"
#include "server/gateway.h"
#include "server/http_server.h"
#include "server/model_router.h"

namespace pagoda::app {
namespace {

struct ServeOptions {
    SpeculativeFlags spec;
    ServeModelOptions model;
    server::GatewayOptions gateway;
    server::HttpServerOptions http;
    std::string api_key_file, api_key, admin_key;
    std::vector<std::string> model_args;  // -m, repeatable
    std::vector<std::string> names;       // --model-name/--alias: a name, or ID=PATH entries
    std::string models_dir, models_memory;
    bool open_health = false, open_metrics = false;
    int64_t max_batched_tokens = 2048;
    int64_t max_image_tokens = 1024;  // image rows per engine step (an image runs whole in one step)
    int64_t image_url_max_mb = 20;    // --image-url-max-mb
    double image_url_timeout = 10;    // --image-url-timeout, seconds
    int32_t max_seqs = 64;
    int64_t ctx = 0;
    KvFlags kv;
    ProfileFlags profile;
    PrefixTierFlags tier;
    ModelFlags compute;
    LoraFlags lora;
    std::string metrics_compat = "none";
    std::string scheduling_policy = "fair";
};

// The keys of --api-key-file plus the one of --api-key (named "api-key" in logs and metrics).
server::ApiKeyTable load_keys(const ServeOptions& o) {
    if (o.api_key.empty() && o.admin_key.empty())
        return o.api_key_file.empty() ? server::ApiKeyTable{} : server::ApiKeyTable::load(o.api_key_file);
    std::string key_lines;
    for (const auto& [flag, key, settings] : {std::tuple{"--api-key", o.api_key, " name=api-key\n"},
                                              std::tuple{"--admin-key", o.admin_key, " name=admin admin=true\n"}}) {
        if (key.empty()) continue;
        if (key.find_first_of(" \t\r\n#") != std::string::npos) fail("{}: a key must not contain spaces or '#'", flag);
        (void)server::ApiKeyTable::parse(key + settings, flag);  // its errors name the flag
        key_lines += key + settings;
    }
    if (o.api_key_file.empty()) return server::ApiKeyTable::parse(key_lines, "--api-key/--admin-key");
    return server::ApiKeyTable::parse(read_text_file(o.api_key_file, "API key file") + "\n" + key_lines, o.api_key_file);
}

// A model's serve options with its models.json settings (ctx_size, kv_memory) applied.
ServeModelOptions with_settings(ServeModelOptions m, const server::ModelSource& s) {
    m.path = s.path;
    if (s.settings.ctx_size) m.max_context = *s.settings.ctx_size;
    if (s.settings.kv_memory) m.kv.memory = *s.settings.kv_memory;
    return m;
}

// Several models (-m A -m B, --models-dir, --alias ID=PATH): each loads on its first request.
int serve_many(ServeOptions& o, server::ApiKeyTable keys) {
    std::vector<std::string> aliases;
    for (const auto& n : o.names)
        if (n.find('=') != std::string::npos) aliases.push_back(n);
        else fail("--model-name {}: with several models each is named by its file, or by ID=PATH", n);
    if (!o.model.draft_model.empty()) fail("--draft-model serves one model; with several models it is not supported yet");
    if (!o.model.mmproj.empty()) fail("--mmproj is one model's projector; with several models it is not supported yet");
    server::MultiModelOptions mo;
    mo.gateway = o.gateway;
    mo.models = collect_model_sources(o.model_args, aliases, o.models_dir);
    mo.allow_runtime_lora = o.model.allow_runtime_lora;  // POST /v1/load_lora_adapter names the base
    // --lora MODEL:NAME=PATH[:SCALE]: each adapter belongs to one base and loads (again) with it.
    std::map<std::string, std::vector<LoraSpec>> loras_of;
    std::vector<std::pair<std::string, LoraSpec>> specs;  // (base, adapter)
    for (LoraSpec spec : o.model.loras) {
        const size_t colon = spec.name.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == spec.name.size())
            fail("--lora {}: with several models name the adapter's base model: --lora MODEL:NAME=PATH[:SCALE]",
                 spec.path);
        const std::string base = spec.name.substr(0, colon);
        spec.name = spec.name.substr(colon + 1);
        specs.emplace_back(base, std::move(spec));
    }
    for (const auto& source : mo.models)  // models.json "lora": as --lora ID:NAME=PATH[:SCALE]
        for (const auto& l : source.settings.loras) specs.emplace_back(source.id, LoraSpec{l.name, l.path, l.scale});
    for (auto& [base, spec] : specs) {
        // An adapter's name is a model id: one base only (the router refuses an unknown base or a model's id).
        if (!mo.adapter_bases.emplace(spec.name, base).second)
            fail("--lora {}:{}: the adapter name '{}' is also given to '{}'; adapter names are model ids, one each",
                 base, spec.name, spec.name, mo.adapter_bases[spec.name]);
        loras_of[base].push_back(std::move(spec));
    }
    mo.memory_budget = o.models_memory.empty() ? 0 : parse_models_memory(o.models_memory);
    mo.estimate = [model = o.model, seqs = o.max_seqs](const server::ModelSource& s) {
        return estimate_model_memory(s.path, with_settings(model, s), s.settings.max_seqs.value_or(seqs));
    };
    server::ModelRouter router(std::move(mo), std::move(keys), [model = o.model, loras_of](const server::ModelSource& s, engine::EngineOptions eo) {
        ServeModelOptions m = with_settings(model, s);
        auto it = loras_of.find(s.id);
        m.loras = it == loras_of.end() ? std::vector<LoraSpec>{} : it->second;
        return load_serve_model(m, std::move(eo));
    });
    return server::run_http_server(router, o.http);
}

int serve(ServeOptions& o) {
    if (o.model_args.empty() && o.models_dir.empty()) fail("no model: give -m PATH (repeatable) or --models-dir DIR");
    // One model unless several are named (-m twice, -m ID=PATH, --alias ID=PATH, --models-dir).
    const bool many = o.model_args.size() != 1 || !o.models_dir.empty() ||
                      std::any_of(o.names.begin(), o.names.end(), [](const auto& n) { return n.find('=') != std::string::npos; }) ||
                      (!std::filesystem::exists(o.model_args[0]) && o.model_args[0].find('=') != std::string::npos);
    if (!many) {
        o.model.path = o.model_args[0];
        if (o.names.size() > 1) fail("--model-name is given {} times for one model", o.names.size());
        if (!o.names.empty()) o.gateway.model_name = o.names[0];
    }
    if (!o.models_memory.empty() && !many) fail("--models-memory applies to several models (-m A -m B, --models-dir)");
    // Cheap checks before listening, so a typo fails at once rather than after the port is up.
    if (!many && !std::filesystem::is_regular_file(o.model.path) && !std::filesystem::is_directory(o.model.path))
        fail("the model '{}' is neither a GGUF file nor a Hugging Face model folder", o.model.path);
    // Before the loader thread uploads any weight: the profile's kernel plan decides the packing.
    if (!many) o.profile.apply(o.model.path, o.compute, &o.model.threads, &o.kv.block_size, &o.max_batched_tokens, &o.max_seqs);
    server::ApiKeyTable keys = load_keys(o);
    o.gateway.scheduler.max_batched_tokens = o.max_batched_tokens;
    o.gateway.scheduler.max_seqs = o.max_seqs;
    o.gateway.scheduler.max_image_tokens = o.max_image_tokens;
    o.gateway.image_urls.max_bytes = uint64_t(o.image_url_max_mb) << 20;
    o.gateway.image_urls.timeout = std::chrono::milliseconds(int64_t(o.image_url_timeout * 1000));
    o.gateway.scheduler.policy = engine::parse_scheduling_policy(o.scheduling_policy);
    o.gateway.scheduler.validate();
    o.spec.options.validate();
    o.gateway.speculative = o.spec.options;
    o.model.draft_model = o.spec.draft_model;
    o.model.draft_profile = o.spec.draft_profile;
    if (!o.spec.draft_profile.empty() && o.spec.draft_model.empty()) fail("--draft-profile needs --draft-model");
    o.model.kv = o.kv.options();
    o.model.state_snapshots = o.kv.state_snapshots;
    o.model.prefix_tier = o.tier.options(o.model.kv.prefix_caching);
    o.model.backend = o.compute.backend;
    o.model.mmproj_backend = o.compute.tower_backend();
    o.model.fusion = !o.compute.no_fusion;
    o.model.quantize = o.compute.quantize;
    o.model.max_context = o.ctx;
    o.model.loras = o.lora.specs();  // parse errors before the port is up
    o.model.lora_storage = o.lora.storage(o.model.lora());
    if (o.model.max_loras > 0 && !o.model.lora())
        fail("--max-loras caps LoRA adapters: give --lora or --allow-runtime-lora with it");
    if (o.gateway.model_name.empty()) o.gateway.model_name = std::filesystem::path(o.model.path).stem().string();
    // Without keys the server is open anyway; with keys, /health and /metrics need one unless opened.
    o.gateway.open_health = keys.empty() || o.open_health;
    o.gateway.open_metrics = keys.empty() || o.open_metrics;
    o.gateway.metrics_compat = o.metrics_compat == "vllm" ? server::MetricsCompat::vllm : server::MetricsCompat::none;
    if (!o.gateway.chat_template.empty())  // parse now: a bad template is a start-up error
        (void)chat::ChatTemplate::from_name_or_file(o.gateway.chat_template);
    if (many) return serve_many(o, std::move(keys));
    server::Gateway gateway(o.gateway, std::move(keys),
                            [model = o.model](engine::EngineOptions eo) { return load_serve_model(model, std::move(eo)); });
    server::ModelRouter router(gateway);
    return server::run_http_server(router, o.http);
}

CommandRegistration reg("serve", "OpenAI-compatible HTTP server (SSE and WebSocket streaming, live /dashboard)", [](CLI::App& sub) {
    auto o = std::make_shared<ServeOptions>();
    sub.add_option("-m,--model", o->model_args,
                   std::string(model::kModelPathHelp) +
                       "; repeat it to serve several models, loaded on first request (each named by its file, or "
                       "-m ID=PATH); requests without a model go to the first");
    sub.add_option("--models-dir", o->models_dir,
                   "Serve every *.gguf file and Hugging Face folder in DIR (named by file or folder, or by DIR/models.json: "
                   "{\"id\": \"path\"} or {\"id\": {\"path\": ..., \"ctx_size\": N, ...}} with per-model settings), "
                   "each loaded on its first request");
    sub.add_option("--models-memory", o->models_memory,
                   "With several models: memory for the loaded ones (weights + KV pool), e.g. 16GiB or auto (80% of free "
                   "memory); idle models are unloaded least recently used first to make room (default: no limit)");
    sub.add_option("--admin-key", o->admin_key,
                   "One more key that may also call /admin (POST /admin/models/{id}/reload); a key file grants it with "
                   "admin=true");
    sub.add_option("--host", o->http.host, "Address or host name to listen on (a name binds its first IPv4 address, else its first IPv6)");
    sub.add_option("--port", o->http.port, "Port (0: any free port, printed at start)")->check(in_range(0, 65535));
    add_threads_option(sub, o->model.threads);
    sub.add_option("--io-threads", o->http.io_threads, "HTTP I/O threads")->check(in_range(1, 64));
    sub.add_option("--max-batched-tokens", o->max_batched_tokens, "Token budget of one engine step")
        ->check(in_range(int64_t(1), int64_t(1) << 24));
    sub.add_option("--mmproj", o->model.mmproj,
                   "Gemma 3's or Qwen3-VL's vision projector (llama.cpp's mmproj GGUF): chat requests may then carry images "
                   "(data: URLs)");
    sub.add_option("--max-image-tokens", o->max_image_tokens,
                   "Image tokens one engine step computes (an image runs whole in one step; a larger one is refused)")
        ->check(in_range(int64_t(1), int64_t(1) << 24));
    sub.add_option("--image-cache-mb", o->model.image_cache_mb,
                   "Encoded-image cache in MiB: the vision tower's output by picture, so a repeated image skips the "
                   "tower (least recently used dropped first; 0: off)")
        ->check(in_range(int64_t(0), int64_t(1) << 20));
    sub.add_flag("--allow-image-urls", o->gateway.image_urls.allow,
                 "Fetch http:// and https:// image URLs in chat requests (off: only data: URLs are taken)");
    sub.add_option("--image-url-max-mb", o->image_url_max_mb, "Largest image a URL may return, in MiB")
        ->check(in_range(int64_t(1), int64_t(1024)));
    sub.add_option("--image-url-timeout", o->image_url_timeout,
                   "Seconds one image URL's fetch may take in all (DNS, connect, TLS, at most 3 redirects, body)")
        ->check(in_range(0.001, 600.0));
    sub.add_flag("--image-url-allow-private", o->gateway.image_urls.allow_private,
                 "Also fetch image URLs whose host is a loopback, private or link-local address (off: such URLs are "
                 "refused, so a request cannot make the server reach its own network)");
    sub.add_option("--max-seqs,--parallel", o->max_seqs, "Sequences running at once (-np, as llama.cpp)")
        ->check(in_range(1, 4096));
    sub.add_option("-c,--ctx-size", o->ctx,
                   "Context per sequence: prompt + output tokens at most (0: the model's trained context); "
                   "without --kv-memory the KV cache holds this, or 256 tokens per sequence, whichever is more")
        ->check(in_range(int64_t(0), int64_t(1) << 24));
    o->kv.add_to(sub);
    o->profile.add_to(sub);
    o->tier.add_to(sub);
    o->spec.add_to(sub);
    o->compute.add_to(sub);
    o->compute.add_mmproj_backend_to(sub);
    o->lora.add_to(sub);
    sub.add_flag("--allow-runtime-lora", o->model.allow_runtime_lora,
                 "Serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's; with several models the body's "
                 "\"base\" names the adapter's model); with API keys, an admin key");
    sub.add_option("--max-loras", o->model.max_loras,
                   "LoRA adapters in memory at once (0: no cap); past it the least recently used idle one is dropped "
                   "and read again when next asked for")
        ->check(in_range(size_t(0), size_t(1) << 16));
    sub.add_option("--api-key-file", o->api_key_file,
                   "Keys, one per line: KEY [name=NAME] [rpm=N] [tpm=N] [concurrency=N] [weight=W] [priority=P] [timeout=S] "
                   "(without keys: open server)");
    sub.add_option("--scheduling-policy", o->scheduling_policy,
                   "Which waiting request runs next: fair (default: request priority, then the API key furthest behind "
                   "its weighted share of tokens, then arrival), priority (priority, then arrival) or fcfs (arrival)")
        ->check(CLI::IsMember({"fcfs", "priority", "fair"}));
    sub.add_option("--api-key", o->api_key, "One more key, without limits (as llama-server and vLLM)");
    sub.add_flag("--open-health", o->open_health, "With keys: serve /health, /livez and /readyz without a key");
    sub.add_flag("--open-metrics", o->open_metrics, "With keys: serve /metrics and /v1/state (the dashboard's data) without a key");
    sub.add_option("--metrics-compat", o->metrics_compat,
                   "vllm: /metrics also serves the series under vLLM's names (vllm:num_requests_waiting, ...)")
        ->check(CLI::IsMember({"none", "vllm"}));
    sub.add_option("--max-queue", o->gateway.max_queue, "New requests get 503 while more than this many requests wait")
        ->check(in_range(int64_t(0), int64_t(1) << 30));
    sub.add_option("--max-body-bytes", o->http.max_body_bytes, "Largest request body (413 beyond)")
        ->check(in_range(uint64_t(1024), uint64_t(1) << 32));
    sub.add_option("--max-prompt-tokens", o->gateway.max_prompt_tokens, "Longest prompt accepted (0: the context)")
        ->check(in_range(int64_t(0), int64_t(1) << 30));
    sub.add_option("--max-tokens-limit", o->gateway.max_tokens_limit, "Largest max_tokens accepted")
        ->check(in_range(int64_t(1), int64_t(1) << 30));
    sub.add_option("--chat-template", o->gateway.chat_template,
                   "Chat template: a builtin name (chatml, llama2, llama3, ...) or a Jinja file (default: the model's)");
    sub.add_option("--reasoning-format", o->gateway.reasoning_format,
                   "Chat reasoning: deepseek (<think> to reasoning_content), harmony (gpt-oss's analysis channel to "
                   "reasoning_content), gemma4 (Gemma 4's <|channel>thought channel to reasoning_content) or none (left "
                   "in content); default: harmony when the chat template has <|channel|> and <|message|>, gemma4 when "
                   "it has <|channel> and <channel|>, deepseek when it mentions <think>")
        ->check(CLI::IsMember({"none", "deepseek", "harmony", "gemma4"}));
    sub.add_option_function<std::string>(
           "--reasoning-budgets",
           [o](const std::string& v) {
               try {
                   o->gateway.reasoning_budgets = server::parse_reasoning_budgets(v);
               } catch (const Error& e) {
                   throw CLI::ValidationError("--reasoning-budgets", e.what());
               }
           },
           "Thinking budgets in tokens for reasoning_effort low,medium,high (default 512,2048,8192): at the budget "
           "the server closes the model's reasoning block");
    sub.add_flag("--spm-infill", o->gateway.spm_infill,
                 "Fill-in-the-middle prompts put the suffix first (SPM) instead of the prefix (PSM), as llama-server's "
                 "flag, for models trained that way");
    sub.add_option("--cors-origin", o->http.cors_origins,
                   "Let browser pages from this origin call the API (CORS; repeat it or give a comma list; * allows any); "
                   "off by default")
        ->delimiter(',');
    sub.add_option("--ssl-cert", o->http.ssl_cert, "Serve HTTPS and WSS with this PEM certificate (chain); needs --ssl-key");
    sub.add_option("--ssl-key", o->http.ssl_key, "The PEM private key of --ssl-cert");
    sub.add_option("--pooling", o->gateway.pooling,
                   "/v1/embeddings pooling of the final hidden states: mean, last or cls (first token); default: the "
                   "model's {arch}.pooling_type, else last")
        ->check(CLI::IsMember({"mean", "last", "cls"}));
    sub.add_option("--rerank-template", o->gateway.rerank_template,
                   "/v1/rerank and /v1/score with a decoder reranker: a file whose text is the prompt, with {query} "
                   "and {document} where they go (default: the model's tokenizer.chat_template.rerank, else its chat "
                   "template with Qwen3-Reranker's instruction)");
    sub.add_option("--rerank-tokens", o->gateway.rerank_tokens,
                   "The decoder reranker's answer tokens YES,NO (vocabulary texts, or ids); the score is "
                   "sigmoid(logit(YES) - logit(NO)) at the prompt's end (default: yes,no)");
    sub.add_option("--responses-max", o->gateway.responses_max,
                   "/v1/responses store: at most this many responses are kept for previous_response_id (the oldest "
                   "go first; 0 stores none; in memory only, a restart loses them)")
        ->check(in_range(size_t(0), size_t(1) << 24));
    sub.add_option("--responses-ttl", o->gateway.responses_ttl,
                   "/v1/responses store: seconds a stored response stays available for previous_response_id")
        ->check(in_range(1.0, 30.0 * 86400));
    sub.add_option("--model-name,--alias,--served-model-name", o->names,
                   "Model id in the API (empty: the file name without .gguf); with several models, ID=PATH adds one");
    sub.add_option("--drain-grace", o->http.drain_grace,
                   "On SIGTERM/SIGINT, seconds of lame duck: /readyz fails at once but new requests are still "
                   "served, so a balancer's health check can notice before anything is refused (0: refuse at once; "
                   "a second signal ends it)")
        ->check(in_range(0.0, 3600.0));
    sub.add_option("--shutdown-timeout,--grace-seconds", o->http.shutdown_timeout,
                   "After the drain grace, seconds requests in flight get to finish before they end with an error")
        ->check(in_range(0.0, 3600.0));
    sub.add_option("--request-timeout", o->http.request_timeout, "Seconds a client has to send a whole request")
        ->check(in_range(0.1, 3600.0));
    sub.add_option("--idle-timeout", o->http.idle_timeout, "Seconds a keep-alive connection may wait idle")
        ->check(in_range(0.1, 3600.0));
    sub.add_option("--heartbeat-seconds", o->http.heartbeat_seconds, "SSE keep-alive comment after this long without output")
        ->check(in_range(0.05, 600.0));
    return [o] { return serve(*o); };
});

}  // namespace
}  // namespace pagoda::app
