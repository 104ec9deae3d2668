#include "server/gateway.h"
#include "server/image_url.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "chat/reasoning.h"
#include "engine/start_rate.h"
#include "server/lora_choice.h"
#include "server/openai_engine_request.h"
#include "server/responses_events.h"
#include "server/tool_request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {

using json = nlohmann::json;

void Gateway::admit_load(const ApiKey* key, const std::string& key_name, int64_t reserved_tokens,
                         const std::string& size_param) {
    // A long queue means new work would only wait; refuse at once instead.
    const engine::EngineStats stats = engine_->stats();
    if (stats.waiting_requests > options_.max_queue) {
        ApiError e = ApiError::unavailable(fmt::format("the server is overloaded ({} requests waiting); retry later",
                                                       stats.waiting_requests),
                                           "queue_full");
        // When the queue should be back within its limit at the measured start rate.
        e.retry_after = double(engine::retry_after_seconds(stats.waiting_requests - options_.max_queue, stats.start_rate));
        metrics_.on_rejection(key_name, "queue_full");
        throw e;
    }
    if (!key) return;
    if (auto r = limiter_.admit(key->name, key->limits, reserved_tokens, now_seconds())) {
        metrics_.on_rejection(key_name, reject_reason_name(r->reason));
        // Larger than a whole minute of the key's tokens: no wait would help, so this is not a
        // 429 (clients retry those) but the request's own fault.
        if (r->reason == RejectReason::too_large)
            throw ApiError::invalid(r->message + "; retrying cannot succeed", size_param, "request_too_large");
        throw ApiError::rate_limited(r->message, r->retry_after, "rate_limit_exceeded");
    }
}

void Gateway::admit_or_throw(const std::string& key_name) {
    auto reject = [&](const std::string& reason, ApiError e) -> ApiError {
        metrics_.on_rejection(key_name, reason);
        return e;
    };
    if (draining_) {
        // Retry-After: another instance (or this one, restarted) can take it at once.
        ApiError e = ApiError::unavailable("the server is shutting down; retry (another instance will answer)",
                                           "shutting_down");
        e.retry_after = 1;
        throw reject("draining", e);
    }
    if (state() == State::loading) {
        ApiError e = ApiError::unavailable("the model is still loading; retry shortly", "model_loading");
        e.retry_after = 1;
        throw reject("loading", e);
    }
    if (state() == State::failed)
        throw reject("failed", ApiError::unavailable("the model failed to load: " + load_error_, "model_failed"));
}

Gateway::Gateway(GatewayOptions options, ApiKeyTable keys, ModelLoader loader)
    : options_(std::move(options)),
      keys_(std::move(keys)),
      loader_(std::move(loader)),
      responses_store_(options_.responses_max, options_.responses_ttl),
      metrics_(options_.metrics_compat, options_.model_name) {
    started_unix_ =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Gateway::~Gateway() { stop_engine(); }

double Gateway::now_seconds() const {
    return std::chrono::duration<double>(SteadyClock::now() - epoch_).count();
}

std::string Gateway::new_request_id() { return ids_.next(); }

void Gateway::load() {
    try {
        const auto t0 = SteadyClock::now();
        engine::EngineOptions eo;
        eo.scheduler = options_.scheduler;
        eo.speculative = options_.speculative;
        const int64_t budget = options_.scheduler.max_batched_tokens;
        eo.on_step = [this, budget](const engine::StepInfo& s) { metrics_.on_step(s, budget); };
        eo.on_request_finished = [this](const engine::FinishedRequest& f) { metrics_.on_request_finished(f); };
        LoadedModel loaded = loader_(std::move(eo));
        if (!loaded.engine || !loaded.engine->tokenizer()) fail("the model loader returned no engine with a tokenizer");
        if (!options_.chat_template.empty()) {
            template_ = chat::ChatTemplate::from_name_or_file(options_.chat_template);
        } else if (!loaded.chat_template.empty()) {
            template_ = chat::ChatTemplate::from_source(loaded.chat_template, "gguf");
        } else {
            log_warn("the model has no tokenizer.chat_template; chat requests use the builtin 'chatml' "
                     "(choose another with --chat-template)");
            template_ = chat::ChatTemplate::builtin("chatml");
        }
        reasoning_format_ = options_.reasoning_format.empty()
                                ? chat::template_reasoning_format(template_->source())
                                : chat::parse_reasoning_format(options_.reasoning_format);
        split_reasoning_ = reasoning_format_ != chat::ReasoningFormat::none;
        if (!options_.pooling.empty()) {
            const auto p = engine::parse_pooling(options_.pooling);
            if (!p) fail("--pooling {} is not one of mean, last, cls", options_.pooling);
            pooling_ = *p;
        } else {
            pooling_ = loaded.pooling.value_or(engine::Pooling::last);
        }
        setup_rerank(loaded);  // gateway_rerank.cpp; needs template_
        system_fingerprint_ = loaded.system_fingerprint;  // before state_ turns ready: requests read it
        loras_ = std::move(loaded.loras);
        images_ = std::move(loaded.images);
        {
            std::lock_guard lock(engine_mutex_);
            engine_ = std::move(loaded.engine);
        }
        const auto& info = engine_->model_info();
        metrics_.set_cache_config(info.block_size, info.n_kv_blocks, kv::kv_dtype_name(info.kv_layout.dtype));
        metrics_.set_time_to_ready(now_seconds());  // the gateway is built as the server starts
        state_ = State::ready;
        log_info("serve: model '{}' ready in {:.2f} s: {}; KV {} blocks of {} tokens ({}); context limit {}; embeddings: {} "
                 "pooling, {} dimensions; system_fingerprint {}",
                 options_.model_name, std::chrono::duration<double>(SteadyClock::now() - t0).count(),
                 loaded.description, info.n_kv_blocks, info.block_size, kv::kv_dtype_name(info.kv_layout.dtype), engine_->context_limit(),
                 engine::pooling_name(pooling_), info.hidden_size,
                 system_fingerprint_.empty() ? std::string("none") : system_fingerprint_);
    } catch (const std::exception& e) {
        load_error_ = e.what();
        state_ = State::failed;
        throw;
    }
}

void Gateway::cut_off_remaining() {
    cut_off_ = true;  // before the cancellations, so every job they end sees it
    stop_engine();
}

void Gateway::stop_engine() {
    std::lock_guard lock(engine_mutex_);
    if (engine_) engine_->shutdown(false);  // cancels what is left; their final deltas still arrive
}

const ApiKey* Gateway::authenticate(std::string_view header) {
    if (keys_.empty()) return nullptr;
    std::string_view token = bearer_token(header);
    const ApiKey* key = keys_.find(token);
    if (!key) {
        metrics_.on_rejection("unknown", "auth");
        if (header.empty())
            throw ApiError::unauthorized("missing API key: send 'Authorization: Bearer YOUR_KEY' (or 'x-api-key: YOUR_KEY')");
        throw ApiError::unauthorized("incorrect API key provided");
    }
    return key;
}

void Gateway::record_rejection(const ApiKey* key, const std::string& reason) {
    metrics_.on_rejection(key ? key->name : "anonymous", reason);
}

SimpleResponse Gateway::health() const {
    switch (state()) {
        case State::ready:
            if (lame_duck_) return {503, "application/json", R"({"status":"draining"})"};
            return {200, "application/json", R"({"status":"ok"})"};
        case State::loading: return {503, "application/json", R"({"status":"loading"})", 1.0};
        case State::failed:
            return {503, "application/json", dump_json(json{{"status", "failed"}, {"error", load_error_}})};
    }
    return {500, "application/json", "{}"};
}

SimpleResponse Gateway::liveness() const { return {200, "application/json", R"({"status":"alive"})"}; }

SimpleResponse Gateway::readiness() const {
    if (state() != State::ready || lame_duck_) return health();
    const int64_t waiting = engine_->stats().waiting_requests;
    if (waiting > options_.max_queue)  // the admission rule of start(): new requests would get 503
        return {503, "application/json", dump_json(json{{"status", "queue_full"}, {"waiting", waiting}}), 1.0};
    return {200, "application/json", R"({"status":"ready"})"};
}

json Gateway::model_card() const {
    json card = {{"id", options_.model_name}, {"object", "model"}, {"created", started_unix_}, {"owned_by", "pagoda"}};
    if (state() == State::ready) {
        card["max_model_len"] = engine_->context_limit();
        card["vocab_size"] = engine_->model_info().vocab_size;
        // What the model reads (the OpenRouter-style field): images with --mmproj.
        card["input_modalities"] = images_ ? json::array({"text", "image"}) : json::array({"text"});
    }
    return card;
}

SimpleResponse Gateway::models() const {
    json data = json::array({model_card()});
    if (loras_)  // each adapter is a model of its own, its parent the base
        for (auto& card : loras_->model_cards(options_.model_name, started_unix_)) data.push_back(std::move(card));
    return {200, "application/json", dump_json(json{{"object", "list"}, {"data", std::move(data)}})};
}

SimpleResponse Gateway::model(const std::string& id) const {
    if (loras_ && id != options_.model_name)
        for (auto& card : loras_->model_cards(options_.model_name, started_unix_))
            if (card["id"] == id) return {200, "application/json", dump_json(card)};
    if (id != options_.model_name)
        throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", id, options_.model_name),
                       "invalid_request_error", "model", "model_not_found");
    return {200, "application/json", dump_json(model_card())};
}

SimpleResponse Gateway::metrics() {
    engine::EngineStats stats;
    const bool ready = state() == State::ready;
    if (ready) stats = engine_->stats();
    if (ready && images_)
        if (auto cache = images_->cache_stats()) metrics_.set_image_cache(*cache);
    if (ready) metrics_.set_lora_info(loras_ ? loras_->max_active() : 0, stats);
    return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(ready ? &stats : nullptr, ready)};
}

std::shared_ptr<Job> Gateway::start(Endpoint endpoint, const nlohmann::ordered_json& body, const ApiKey* key,
                                    const std::string& request_id, DeltaSink sink, std::string response_id) {
    if (endpoint == Endpoint::embeddings) return start_embeddings(body, key, request_id, std::move(sink));
    if (endpoint == Endpoint::rerank || endpoint == Endpoint::score)
        return start_rerank(endpoint, body, key, request_id, std::move(sink));
    if (endpoint == Endpoint::responses) return start_responses(body, key, request_id, std::move(sink), std::move(response_id));
    if (response_id.empty()) response_id = new_request_id();
    const std::string key_name = key ? key->name : "anonymous";
    admit_or_throw(key_name);

    CompletionParams p;
    std::optional<chat::ToolCallFormat> tool_format;
    try {
        p = parse_completion_request(body, endpoint);
        tool_format = apply_tools(p, template_ ? &*template_ : nullptr);
        endpoint = p.endpoint;  // /infill is answered as a completion
    } catch (const ApiError&) {
        metrics_.on_rejection(key_name, "invalid");
        throw;
    }
    // The response id is the server's, unique, whatever X-Request-Id the client sent.
    std::string id = (endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-") + response_id;
    return launch(std::move(p), tool_format, key, request_id, std::move(sink), std::move(id), [](Job&) {});
}

std::vector<vision::EncodedImage> Gateway::encode_images(const CompletionParams& p) {
    const bool chat = p.endpoint == Endpoint::chat_completions;
    std::vector<ImagePart> parts;  // chat: data: URLs; completions: p.multimodal_data's base64 (url unused)
    if (chat) parts = image_parts(p.messages);
    else
        for (size_t i = 0; i < p.multimodal_data.size(); ++i)
            parts.push_back({fmt::format("prompt.multimodal_data[{}]", i), {}});
    if (parts.empty()) return {};
    // A remote URL on a server that fetches none is refused naming the URL, before anything else.
    if (chat && !options_.image_urls.allow)
        for (const ImagePart& part : parts)
            if (is_http_url(part.url))
                throw ApiError::invalid(fmt::format("'{}': remote image URLs are not fetched; send a data: URL (the "
                                                    "server runs without --allow-image-urls)",
                                                    part.where),
                                        part.url_param, "unsupported_parameter");
    if (!images_)
        throw ApiError::invalid(fmt::format("'{}': this model takes no images (the server runs without --mmproj)",
                                            parts[0].where),
                                parts[0].where, "unsupported_parameter");
    const int64_t step_images = std::min(options_.scheduler.max_image_tokens, options_.scheduler.max_batched_tokens);
    // Gemma 3's fixed size is refused before any decoding; Qwen3-VL's images one by one, by their
    // size, before the tower runs.
    if (images_->tokens_per_image() > step_images)
        throw ApiError::invalid(fmt::format("'{}': an image is {} tokens, more than the {} image tokens one engine step "
                                            "takes (the server's --max-image-tokens / --max-batched-tokens)",
                                            parts[0].where, images_->tokens_per_image(), step_images),
                                parts[0].where, "invalid_image");
    std::vector<vision::EncodedImage> encoded;
    for (size_t i = 0; i < parts.size(); ++i) {
        const ImagePart& part = parts[i];
        if (!chat) {
            encoded.push_back(images_->encode_base64(p.multimodal_data[i], part.where, step_images));
        } else if (is_http_url(part.url)) {
            const std::vector<uint8_t> bytes = fetch_image_url(part.url, options_.image_urls, part.where, part.url_param);
            encoded.push_back(images_->encode_bytes(bytes, part.where, step_images));
        } else {
            encoded.push_back(images_->encode(part.url, part.where, step_images));
        }
    }
    return encoded;
}

std::shared_ptr<Job> Gateway::launch(CompletionParams p, std::optional<chat::ToolCallFormat> tool_format,
                                     const ApiKey* key, const std::string& request_id, DeltaSink sink, std::string id,
                                     const std::function<void(Job&)>& prepare) {
    const std::string key_name = key ? key->name : "anonymous";
    auto reject = [&](const std::string& reason, ApiError e) -> ApiError {
        metrics_.on_rejection(key_name, reason);
        return e;
    };
    // The LoRA adapter: `model` naming one, or the `lora` field (lora_registry.h).
    lora::AdapterRef adapter;
    try {
        adapter = adapter_for(loras_.get(), options_.model_name, p.model, p.lora);
    } catch (const ApiError& e) {
        throw reject("invalid", e);
    }

    // A key claims no better priority class than its key file grants (without keys: any).
    if (key && p.priority < key->best_priority)
        throw reject("invalid", ApiError(400,
                                         fmt::format("priority {} is better than this key may claim (its best is {}; "
                                                     "lower is served sooner)",
                                                     p.priority, key->best_priority),
                                         "invalid_request_error", "priority", "invalid_value"));

    // Prompts -> token ids -> engine requests (limits against the context and vocabulary).
    EngineRequests requests;
    bool prompts_open_thinking = false;
    try {
        const int64_t vocab = engine_->model_info().vocab_size;
        const int64_t context = engine_->context_limit();
        const FimSettings fim{.n_batch = std::min<int64_t>(options_.scheduler.max_batched_tokens, context),
                              .n_ctx = context,
                              .spm = options_.spm_infill};
        // Images are encoded here, on the request's thread (before the template renders: a bad
        // image is refused before any other work).
        std::vector<vision::EncodedImage> encoded = encode_images(p);
        TokenizedPrompts prompts =
            tokenize_prompts(p, *engine_->tokenizer(), template_ ? &*template_ : nullptr, vocab, fim,
                             images_ ? std::string_view(images_->marker()) : std::string_view(kImageMarker));
        prompts_open_thinking = prompts.opens_thinking;
        std::vector<engine::PromptImage> images;
        if (!encoded.empty())
            images = images_->expand(prompts.prompts.at(0), std::move(encoded),
                                     p.endpoint == Endpoint::chat_completions ? "messages" : "prompt");
        requests = make_engine_requests(p, std::move(prompts),
                                        {.context = engine_->context_limit(),
                                         .vocab_size = vocab,
                                         .max_prompt_tokens = options_.max_prompt_tokens,
                                         .max_tokens_limit = options_.max_tokens_limit,
                                         .max_seqs = options_.scheduler.max_seqs});
        if (!images.empty()) requests.subs.at(0).images = std::move(images);  // one prompt (chat, or a prompt object)
        // A grammar gets the model's reasoning block in front; a thinking budget goes to the engine.
        apply_reasoning(p, {.template_thinks = split_reasoning_, .prompt_opens = prompts_open_thinking,
                            .format = reasoning_format_,
                            .budgets = options_.reasoning_budgets},
                        requests);
    } catch (const ApiError&) {
        metrics_.on_rejection(key_name, "invalid");
        throw;
    }

    // The start deadline: the request's `timeout`, else its key's. Refused at once when the queue
    // ahead is expected to take longer to start than that (Retry-After: when it should have).
    std::optional<double> timeout = p.timeout;
    if (!timeout && key && key->start_timeout > 0) timeout = key->start_timeout;
    if (timeout) {
        const engine::EngineStats st = engine_->stats();
        std::optional<double> wait;
        if (st.waiting_requests == 0) wait = 0.0;
        else if (st.start_rate > 0) wait = double(st.waiting_requests) / st.start_rate;
        if (wait && *wait > *timeout) {
            metrics_.on_deadline_miss(key_name, "admission");
            ApiError e = ApiError::unavailable(
                fmt::format("the {} requests waiting ahead are expected to take {:.1f} s to start, longer than this "
                            "request's timeout of {} s; retry after Retry-After seconds",
                            st.waiting_requests, *wait, *timeout),
                "deadline_exceeded");
            e.retry_after = std::max(1.0, std::ceil(*wait));
            throw e;
        }
    }

    for (auto& sub : requests.subs) sub.lora = adapter;
    const int64_t reserved = requests.reserved_tokens;
    admit_load(key, key_name, reserved, p.max_tokens_param);

    ResponseContext ctx;
    ctx.endpoint = p.endpoint;
    ctx.id = std::move(id);
    ctx.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ctx.model = served_model_id(options_.model_name, p.model);
    ctx.system_fingerprint = system_fingerprint_;
    ctx.n = p.n;
    ctx.logprobs = p.logprobs;
    ctx.include_usage = p.stream && p.include_usage;
    ctx.echo_text = std::move(requests.echo_text);
    ctx.echo_logprobs = p.echo && p.logprobs >= 0;
    ctx.prompt_logprobs = p.prompt_logprobs;
    ctx.first_prompt_token = std::move(requests.first_prompt_token);
    ctx.tokenizer = engine_->tokenizer();
    ctx.split_reasoning = split_reasoning_;
    ctx.reasoning_open = split_reasoning_ && prompts_open_thinking;
    ctx.reasoning_format = reasoning_format_;
    ctx.tool_format = tool_format;
    ctx.tools = p.tools;
    ctx.parallel_tool_calls = p.parallel_tool_calls;
    const size_t n_subs = requests.subs.size();
    std::shared_ptr<Job> job(new Job(*this, request_id, p, std::move(ctx), n_subs));
    job->key_name_ = key_name;
    job->limited_ = key != nullptr;
    job->reserved_tokens_ = reserved;
    prepare(*job);

    for (size_t sub = 0; sub < n_subs; ++sub) {
        engine::Request& r = requests.subs[sub];
        r.priority = p.priority;
        r.tenant = key ? key->tenant : 0;
        r.weight = key ? key->weight : 1;
        if (timeout)
            r.start_deadline = engine::Clock::now() +
                               std::chrono::duration_cast<engine::Clock::duration>(std::chrono::duration<double>(*timeout));
        try {
            auto handle = engine_->submit(std::move(r), [sink, sub](const engine::Delta& d) { sink(sub, d); });
            job->engine_ids_.push_back(handle.id());
        } catch (const Error& e) {
            job->cancel();
            job->finish(400);
            metrics_.on_rejection(key_name, "invalid");
            throw ApiError::invalid(e.what());
        }
    }
    return job;
}

}  // namespace pagoda::server
