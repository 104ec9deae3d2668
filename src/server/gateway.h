// The gateway: everything between a parsed HTTP/WebSocket request and the engine, without sockets.
// It owns the engine once its ModelLoader has built it (load(), on a background thread), the chat
// template, API keys, rate limits and metrics; it never sees model files or compute. The transport
// (http_session.cpp, websocket_session.cpp) calls authenticate(), the simple endpoints, and start()
// for completions; a started Job delivers the engine's deltas through the transport's callback
// (engine thread), and the transport feeds them back into the Job on its own strand to get response
// chunks. Policy order for a completion: draining/loading (503) -> body -> validation (400) ->
// prompt and max_tokens limits (400) -> admission queue (503) -> key limits (429).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "model/classifier_head.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/api_keys.h"
#include "server/embedding_response.h"
#include "server/lora_registry.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/rate_limiter.h"
#include "server/image_fetch.h"
#include "server/image_input.h"
#include "server/reasoning_request.h"
#include "server/request_ids.h"
#include "server/rerank_prompt.h"
#include "server/response_store.h"
#include "server/server_metrics.h"

namespace pagoda::server {

struct GatewayOptions {
    std::string model_name;             // the model id in the API
    engine::SchedulerConfig scheduler;
    engine::SpeculativeOptions speculative;  // prompt-lookup drafting (off by default)
    int64_t max_queue = 256;            // new requests get 503 while more than this many wait
    int64_t max_prompt_tokens = 0;      // 0: the context limit
    int64_t max_tokens_limit = 4096;    // largest max_tokens accepted
    std::string chat_template;          // name or file; empty: the model's, else chatml
    MetricsCompat metrics_compat = MetricsCompat::none;  // vllm: also serve vLLM's metric names
    ImageFetchOptions image_urls;       // http(s) image URLs: refused unless image_urls.allow
    bool open_health = true, open_metrics = true;
    // Chat reasoning split (chat/reasoning.h): "none", "deepseek", or "" for deepseek when the chat
    // template thinks (mentions <think>).
    std::string reasoning_format;
    // reasoning_effort low / medium / high -> thinking budgets in tokens (--reasoning-budgets).
    ReasoningBudgets reasoning_budgets;
    // /v1/embeddings pooling: "mean", "last", "cls", or "" for the model's (GGUF pooling_type),
    // else last (the token that has seen the whole input under causal attention).
    std::string pooling;
    // POST /v1/responses with store (the default): at most this many responses are kept, each for
    // this many seconds, for previous_response_id and GET /v1/responses/{id} (response_store.h).
    size_t responses_max = 1000;
    double responses_ttl = 3600;
    // Fill-in-the-middle order: suffix first (SPM) instead of prefix first (PSM), as llama-server's
    // --spm-infill.
    bool spm_infill = false;
    // /v1/rerank and /v1/score with a decoder reranker (rerank_prompt.h): a file whose text is the
    // prompt form ({query}, {document}); empty: the model's rerank template, else its chat template.
    std::string rerank_template;
    // The answer tokens "YES,NO" (vocabulary texts or ids); empty: "yes" and "no".
    std::string rerank_tokens;
};

using SteadyClock = std::chrono::steady_clock;

// What the gateway takes from a loaded model.
struct LoadedModel {
    std::unique_ptr<engine::Engine> engine;  // running, with a tokenizer (prompts and logprob strings use it)
    std::string chat_template;  // the model's own Jinja template (GGUF tokenizer.chat_template); empty: none
    std::string description;    // one line for the start-up log, e.g. the architecture and size
    std::optional<engine::Pooling> pooling;  // the model's own embedding pooling, if its file names one
    // Responses' system_fingerprint (model/system_fingerprint.h); empty: null in responses.
    std::string system_fingerprint;
    std::string rerank_template;  // GGUF tokenizer.chat_template.rerank (llama.cpp's key); empty: none
    // GGUF {arch}.pooling_type 4 (rank): a reranker scored by its classification head on the pooled
    // last hidden state (model/classifier_head.h); null for other models.
    std::shared_ptr<const model::ClassifierHead> classifier_head;
    bool add_sep = false;  // GGUF tokenizer.ggml.add_sep_token: a rank model's pairs are joined by SEP
    // The LoRA adapters served on this model (--lora; run-time loads when it has a loader); null: none.
    std::shared_ptr<LoraRegistry> loras;
    // The model's image input (--mmproj): chat image parts are encoded by it; null: images refused.
    std::shared_ptr<ImageInput> images;
};

// Opens the model and starts its engine; runs on the thread that calls Gateway::load(). `options`
// carries the scheduler settings and the gateway's metric hooks (on_step, on_request_finished):
// the Engine must be built with them, plus whatever the loader owns (prefix caching, context cap).
// Throws pagoda::Error when the model cannot be loaded.
using ModelLoader = std::function<LoadedModel(engine::EngineOptions options)>;

class Gateway;
class ResponsesStream;

// One API request in flight (one or more engine requests). Methods other than cancel() are called
// from the owning transport strand only.
class Job {
public:
    ~Job();
    const std::string& request_id() const { return request_id_; }
    Endpoint endpoint() const { return params_.endpoint; }
    bool stream() const { return params_.stream; }
    // POST /v1/responses: the chunks are Responses events (responses_events.h), each to be sent as
    // an SSE event named by its `type`, the last of them ending the stream (no [DONE]).
    bool responses() const { return responses_ != nullptr; }
    const CompletionParams& params() const { return params_; }
    const std::string& key_name() const { return key_name_; }

    // /v1/messages (gateway_anthropic.cpp): chunks are Anthropic stream events, the response a message.
    bool anthropic() const { return messages_ != nullptr; }
    std::vector<nlohmann::json> opening_chunks() const;
    std::vector<nlohmann::json> add(size_t sub, const engine::Delta& delta);
    bool done() const { return collected_ ? collected_->done() : assembler_.done(); }
    const ResponseAssembler& assembler() const { return assembler_; }
    // Once done(): the whole (non-streaming) response body.
    nlohmann::json response() const;
    // Once done(): why the request failed — an engine error (500), its start deadline passing in
    // the queue (503 deadline_exceeded), or the end of the shutdown timeout cutting it off
    // (503 shutting_down) — or nullopt when it completed or its client
    // cancelled it. Transports answer with this error instead of a normal ending.
    std::optional<ApiError> failure() const;

    // Cancels the engine requests still running (any thread; idempotent).
    void cancel();
    // Releases limits and counts the request (status: HTTP status sent). Idempotent; the
    // destructor calls it with 499 if the transport never did (client gone).
    void finish(int status);
    // Keeps `owner` (the gateway's holder, when a ModelRouter may free it) alive until finish():
    // a gateway is never freed under a request that is still running on it.
    void keep_alive(std::shared_ptr<const void> owner) { owner_ = std::move(owner); }

private:
    friend class Gateway;
    Job(Gateway& gateway, std::string request_id, CompletionParams params, ResponseContext ctx, size_t n_subs);

    Gateway& gateway_;
    std::string request_id_;
    CompletionParams params_;
    ResponseAssembler assembler_;
    // Set for /v1/embeddings, /v1/rerank and /v1/score (then assembler_ is unused): one result per sub.
    std::unique_ptr<CollectedResponse> collected_;
    std::unique_ptr<ResponsesStream> responses_;      // set for /v1/responses (fed the assembler's chunks)
    nlohmann::json responses_conversation_;           // /v1/responses: the input items, stored with the output
    std::unique_ptr<MessageBuilder> messages_;  // set for /v1/messages: fed assembler_'s chunks
    std::vector<nlohmann::json> add_message(size_t sub, const engine::Delta& delta);
    std::string key_name_ = "anonymous";
    std::vector<engine::RequestId> engine_ids_;
    int64_t reserved_tokens_ = 0;
    bool limited_ = false;
    std::optional<std::string> deadline_missed_;  // the engine dropped it unstarted at its deadline (why)
    std::atomic<bool> finished_{false};
    std::shared_ptr<const void> owner_;  // released by finish()
};

// Called on the engine thread for each delta of sub-request `sub`.
using DeltaSink = std::function<void(size_t sub, const engine::Delta& delta)>;

struct SimpleResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::optional<double> retry_after;
};

class Gateway {
public:
    Gateway(GatewayOptions options, ApiKeyTable keys, ModelLoader loader);
    ~Gateway();

    // Runs the loader and chooses the chat template; until it returns, state() is loading (so
    // /health says so). Blocking: run it on its own thread. Throws on failure (state becomes failed).
    void load();
    enum class State { loading, ready, failed };
    State state() const { return state_.load(); }
    const std::string& load_error() const { return load_error_; }

    // The caller's key (nullptr: open server). Throws ApiError 401.
    const ApiKey* authenticate(std::string_view authorization_header);
    bool auth_required() const { return !keys_.empty(); }
    bool open_health() const { return options_.open_health; }
    bool open_metrics() const { return options_.open_metrics; }

    // /health: 200 once ready, 503 while loading, draining or failed (kept for existing clients).
    SimpleResponse health() const;
    // /livez (liveness): 200 whenever the process answers, whatever the model's state; a probe
    // that fails here means the process is wedged and should be restarted.
    SimpleResponse liveness() const;
    // /readyz (readiness): 200 when new work would be admitted: model loaded, not draining, the
    // queue not over --max-queue; else 503 naming why (loading, failed, draining, queue_full).
    SimpleResponse readiness() const;
    // /v1/models, and /v1/models/{id} (404 model_not_found for another id). `created` is the Unix
    // time this server started.
    SimpleResponse models() const;
    SimpleResponse model(const std::string& id) const;
    // LoRA adapters (gateway_lora.cpp): vLLM's run-time load / unload (bodies {"lora_name",
    // "lora_path"} / {"lora_name"}; 400 unless --allow-runtime-lora) and llama-server's GET /lora-adapters.
    SimpleResponse load_lora_adapter(const nlohmann::json& body);
    SimpleResponse unload_lora_adapter(const nlohmann::json& body);
    SimpleResponse lora_adapters() const;
    SimpleResponse metrics();
    // GET /v1/state: the dashboard's JSON (dashboard_state.h; defined in gateway_dashboard.cpp).
    SimpleResponse live_state();
    // POST /tokenize and /detokenize (tokenize_request.h; defined in gateway_tokenize.cpp): 503 until
    // the model is ready, ApiError 400 for a bad body.
    SimpleResponse tokenize(const nlohmann::json& body) const;
    SimpleResponse detokenize(const nlohmann::json& body) const;

    // Starts a completion, or an embedding for Endpoint::embeddings (gateway_embeddings.cpp).
    // Throws ApiError for every refusal. `request_id` names it in logs (the client's X-Request-Id,
    // echoed); the response `id` is built from `response_id`, a fresh server id when empty — never
    // from what a client sent, so response ids stay unique.
    // `body` keeps its keys in the order sent (parse_json_body), so JSON schemas keep theirs.
    std::shared_ptr<Job> start(Endpoint endpoint, const nlohmann::ordered_json& body, const ApiKey* key,
                               const std::string& request_id, DeltaSink sink, std::string response_id = {});
    engine::Pooling pooling() const { return pooling_; }
    // GET and DELETE /v1/responses/{id} (gateway_responses.cpp): a stored response, or 404.
    SimpleResponse stored_response(const std::string& id);
    SimpleResponse delete_response(const std::string& id);
    // Anthropic's POST /v1/messages: translated to a chat request and started as one (gateway_anthropic.cpp).
    std::shared_ptr<Job> start_messages(const nlohmann::ordered_json& body, const ApiKey* key, const std::string& request_id,
                                        DeltaSink sink, std::string response_id = {});
    // POST /v1/messages/count_tokens: {"input_tokens": N}, the prompt /v1/messages would run.
    SimpleResponse count_message_tokens(const nlohmann::ordered_json& body, const ApiKey* key);

    // Shutdown, in three stages. The lame duck: /readyz and /health fail (503 draining) so
    // balancers stop sending, while new requests are still admitted and served (what a balancer
    // sends before its health check notices). Then the drain: stop admitting (503 shutting_down),
    // and when the shutdown timeout is over, cut off what is left (those requests fail with 503
    // shutting_down), and stop the engine.
    void begin_lame_duck() { lame_duck_ = true; }
    void begin_drain() { lame_duck_ = true, draining_ = true; }
    bool draining() const { return draining_; }
    int64_t active_jobs() const { return active_jobs_.load(); }
    void cut_off_remaining();
    void stop_engine();

    ServerMetrics& server_metrics() { return metrics_; }
    const std::string& model_name() const { return options_.model_name; }
    void record_rejection(const ApiKey* key, const std::string& reason);
    double now_seconds() const;
    std::string new_request_id();

private:
    friend class Job;
    std::shared_ptr<Job> start_embeddings(const nlohmann::json& body, const ApiKey* key, const std::string& request_id,
                                          DeltaSink sink);
    // POST /v1/rerank and /v1/score (gateway_rerank.cpp): one scoring request per document or pair.
    std::shared_ptr<Job> start_rerank(Endpoint endpoint, const nlohmann::json& body, const ApiKey* key,
                                      const std::string& request_id, DeltaSink sink);
    // At load: how this model reranks (decoder prompt and answer tokens), or why it cannot.
    void setup_rerank(const LoadedModel& loaded);
    // Submits a collected job's engine requests, each delta to `sink` as sub-request `sub`. One the
    // engine refuses cancels the job and is a 400 naming `param_of(sub)`.
    void submit_collected(Job& job, std::vector<engine::Request>& requests, const DeltaSink& sink,
                          const std::string& key_name, const std::function<std::string(size_t)>& param_of);
    // POST /v1/responses (gateway_responses.cpp): the request as a chat request through launch().
    std::shared_ptr<Job> start_responses(const nlohmann::ordered_json& body, const ApiKey* key, const std::string& request_id,
                                         DeltaSink sink, std::string response_id);
    // A parsed chat or completions request from the model check to its submission: tokenize, check
    // against the model, admit, build the Job (response id `id`; `prepare` runs on it before the
    // engine can deliver anything) and submit. Throws ApiError.
    // A chat request's image parts, or a completions prompt object's multimodal_data, encoded in
    // order (image_input.h); none for other requests.
    // ApiError 400 naming the part: no --mmproj, an image larger than a step's image tokens, an
    // unreadable one.
    std::vector<vision::EncodedImage> encode_images(const CompletionParams& p);
    std::shared_ptr<Job> launch(CompletionParams p, std::optional<chat::ToolCallFormat> tool_format, const ApiKey* key,
                                const std::string& request_id, DeltaSink sink, std::string id,
                                const std::function<void(Job&)>& prepare);
    // A finished /v1/responses job with store: its response and conversation into responses_store_.
    void store_response(const ResponsesStream& stream, const nlohmann::json& conversation);
    // The admission checks every request passes (draining, loading, failed); throws ApiError.
    void admit_or_throw(const std::string& key_name);
    // The admission checks of work about to be submitted: the queue cap (503) and the key's limits
    // (429, or 400 naming size_param for a request no wait would let through).
    void admit_load(const ApiKey* key, const std::string& key_name, int64_t reserved_tokens,
                    const std::string& size_param);
    nlohmann::json model_card() const;

    GatewayOptions options_;
    ApiKeyTable keys_;
    ModelLoader loader_;
    std::atomic<State> state_{State::loading};
    std::string load_error_;
    std::optional<chat::ChatTemplate> template_;
    bool split_reasoning_ = false;  // from options_.reasoning_format and the template, at load
    chat::ReasoningFormat reasoning_format_ = chat::ReasoningFormat::none;
    engine::Pooling pooling_ = engine::Pooling::last;  // from options_.pooling and the model, at load
    // Decoder reranking (setup_rerank): the prompt form and the yes/no token ids; when unset,
    // rerank_unsupported_ says why /v1/rerank and /v1/score are refused.
    std::optional<RerankPrompt> rerank_prompt_;
    std::pair<int32_t, int32_t> rerank_tokens_{-1, -1};
    // A classification-head reranker (pooling_type rank): the head scores each pair's pooled last
    // hidden state; the pair is rerank_prompt_'s form when one is given, else an encoder's tokenizer
    // pair template (Tokenizer::encode_pair, with its token types), else rerank_pair_tokens().
    std::shared_ptr<const model::ClassifierHead> rerank_head_;
    bool rerank_add_sep_ = false;
    std::string rerank_unsupported_;
    std::string system_fingerprint_;  // from the loader, at load
    std::unique_ptr<engine::Engine> engine_;
    std::shared_ptr<ImageInput> images_;  // from the loader (null: no image input); set before ready
    std::shared_ptr<LoraRegistry> loras_;  // from the loader (null: no adapters); set before ready
    std::mutex engine_mutex_;  // guards engine_ replacement (load / stop)
    RateLimiter limiter_;
    ResponseStore responses_store_;
    ServerMetrics metrics_;
    std::atomic<bool> lame_duck_{false};  // not ready, still admitting
    std::atomic<bool> draining_{false};   // not admitting
    std::atomic<bool> cut_off_{false};  // cut_off_remaining() ran: cancellations are the server's
    std::atomic<int64_t> active_jobs_{0};
    RequestIds ids_;
    int64_t started_unix_ = 0;  // /v1/models `created`
    SteadyClock::time_point epoch_ = SteadyClock::now();
};

}  // namespace pagoda::server
