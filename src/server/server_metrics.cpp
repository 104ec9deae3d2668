#include "server/server_metrics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pagoda::server {

namespace {
const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                             0.75,  1.0,   2.5,  5.0,  7.5,  10,   20,   40,  80,  160};
const std::vector<double> kTokenGapBuckets = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                              0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5};
const std::vector<double> kFractionBuckets = {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
}  // namespace

ServerMetrics::ServerMetrics(MetricsCompat compat, const std::string& model_name) : compat_(compat) {
    auto& r = registry_;
    // As vLLM's series: the served model's name on every sample, so one dashboard tells models apart.
    if (!model_name.empty()) r.set_constant_labels({{"model_name", model_name}});
    r.add_gauge("pagoda:model_ready", "1 when the model is loaded and requests are served, 0 while loading");
    r.add_gauge("pagoda:time_to_ready_seconds", "Seconds from the server's start to the model being ready (0 until then)");
    r.add_gauge("pagoda:num_requests_running", "Requests with sequences in the running batch");
    r.add_gauge("pagoda:num_requests_waiting", "Requests waiting to be scheduled");
    r.add_gauge("pagoda:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0 to 1)");
    r.add_gauge("pagoda:kv_cache_blocks", "KV-cache blocks in the pool");
    r.add_gauge("pagoda:kv_cache_blocks_cached", "Free KV-cache blocks still holding reusable prefix data");
    r.add_gauge("pagoda:cache_config_info",
                "KV-cache configuration in the labels (value 1): tokens per block, blocks, element type",
                {"block_size", "num_blocks", "cache_dtype"});
    r.add_counter("pagoda:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache");
    r.add_counter("pagoda:prefix_cache_hits_total", "Prompt tokens found in the prefix cache");
    r.add_counter("pagoda:image_cache_hits_total", "Images whose encoding came from the encoded-image cache (the vision tower skipped)");
    r.add_counter("pagoda:image_cache_misses_total", "Images looked up in the encoded-image cache and run through the vision tower");
    r.add_counter("pagoda:image_cache_evictions_total", "Encoded images dropped from the cache to stay within its bound");
    r.add_gauge("pagoda:image_cache_entries", "Encoded images the cache holds");
    r.add_gauge("pagoda:image_cache_bytes", "Bytes the encoded-image cache holds (embeddings and per-entry overhead)");
    r.add_gauge("pagoda:image_cache_capacity_bytes", "The encoded-image cache's bound (--image-cache-mb; 0: off)");
    r.add_counter("pagoda:prefix_cache_tier_hits_total",
                  "KV blocks a prompt missed in the pool and found in the second prefix-cache tier, by tier",
                  {"tier"});
    r.add_counter("pagoda:prefix_cache_tier_misses_total", "Second-tier lookups that found no valid block");
    r.add_counter("pagoda:prefix_cache_tier_hit_tokens_total", "Prompt tokens loaded from the second tier instead of computed");
    r.add_counter("pagoda:prefix_cache_tier_loaded_bytes_total", "KV bytes loaded from the second tier into the pool");
    r.add_counter("pagoda:prefix_cache_tier_spilled_blocks_total", "Cached KV blocks evicted from the pool into the second tier");
    r.add_counter("pagoda:prefix_cache_tier_spilled_bytes_total", "KV bytes of those blocks");
    r.add_counter("pagoda:prefix_cache_tier_spill_seconds_total", "Engine-thread seconds spent spilling blocks");
    r.add_gauge("pagoda:prefix_cache_tier_blocks", "Blocks held by the second tier, by tier", {"tier"});
    r.add_gauge("pagoda:prefix_cache_tier_bytes", "Bytes held by the second tier, by tier", {"tier"});
    r.add_gauge("pagoda:prefix_cache_tier_capacity_bytes", "The second tier's limit, by tier", {"tier"});
    r.add_counter("pagoda:prefix_cache_tier_file_writes_total", "Block files written");
    r.add_counter("pagoda:prefix_cache_tier_file_rejected_total", "Block files found corrupt, truncated or foreign and removed");
    r.add_counter("pagoda:prefix_cache_tier_file_dropped_total", "Blocks not written because the writer queue was full");
    r.add_counter("pagoda:prefix_cache_tier_file_write_failures_total", "Block files that could not be written");
    r.add_counter("pagoda:prompt_tokens_total", "Prompt tokens of admitted requests");
    r.add_counter("pagoda:prompt_tokens_computed_total", "Prompt tokens actually run through the model (misses, recomputation)");
    r.add_counter("pagoda:generation_tokens_total", "Tokens generated");
    r.add_counter("pagoda:spec_decode_num_draft_tokens_total", "Speculative (prompt-lookup) tokens verified");
    r.add_counter("pagoda:spec_decode_num_accepted_tokens_total", "Speculative tokens accepted (each one a step saved)");
    r.add_counter("pagoda:num_preemptions_total", "Sequences preempted for lack of KV-cache space");
    r.add_counter("pagoda:engine_steps_total", "Engine forward steps run");
    r.add_counter("pagoda:engine_busy_seconds_total", "Seconds the engine spent in forward steps and sampling");
    r.add_counter("pagoda:request_success_total", "Requests finished by the engine, by finish reason",
                  {"finished_reason"});
    r.add_histogram("pagoda:time_to_first_token_seconds", "Arrival to first generated token", kLatencyBuckets);
    r.add_histogram("pagoda:inter_token_latency_seconds", "Gap between consecutive generated tokens", kTokenGapBuckets);
    r.add_histogram("pagoda:e2e_request_latency_seconds", "Arrival to the last token", kLatencyBuckets);
    r.add_histogram("pagoda:request_queue_time_seconds", "Arrival to first scheduled", kLatencyBuckets);
    r.add_histogram("pagoda:request_prompt_tokens", "Prompt tokens per request",
                    {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384});
    r.add_histogram("pagoda:request_generation_tokens", "Generated tokens per request",
                    {1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096});
    r.add_histogram("pagoda:engine_step_utilisation", "Tokens per step as a fraction of --max-batched-tokens",
                    kFractionBuckets);
    r.add_histogram("pagoda:engine_step_duration_seconds", "Wall time of one engine step", kLatencyBuckets);
    r.add_counter("pagoda:api_requests_total", "API requests answered, by key name, endpoint and HTTP status",
                  {"key", "endpoint", "status"});
    r.add_counter("pagoda:api_rejections_total", "API requests refused by the gateway, by key name and reason",
                  {"key", "reason"});
    r.add_counter("pagoda:api_tokens_total",
                  "Tokens of finished API requests, by key name and kind (prompt, completion): the shares fair "
                  "scheduling divides",
                  {"key", "kind"});
    r.add_counter("pagoda:deadline_misses_total",
                  "Requests that could not start by their deadline, by key name and stage (admission: refused on "
                  "arrival; queue: dropped unstarted)",
                  {"key", "stage"});
    r.add_gauge("pagoda:lora_requests_info",
                "LoRA adapters of running and waiting requests in the labels (comma-separated) and how many the "
                "engine may hold at once (0: the server has no adapters); the value is the Unix time of the scrape",
                {"max_lora", "waiting_lora_adapters", "running_lora_adapters"});
    if (compat_ != MetricsCompat::vllm) return;
    // vLLM's names for the same series (vllm/v1/metrics/loggers.py); gpu_cache_usage_perc and
    // time_per_output_token_seconds are the older names some tools still read.
    const std::pair<const char*, const char*> vllm_names[] = {
        {"pagoda:num_requests_running", "vllm:num_requests_running"},
        {"pagoda:num_requests_waiting", "vllm:num_requests_waiting"},
        {"pagoda:kv_cache_usage_perc", "vllm:kv_cache_usage_perc"},
        {"pagoda:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
        {"pagoda:prefix_cache_queries_total", "vllm:prefix_cache_queries_total"},
        {"pagoda:prefix_cache_hits_total", "vllm:prefix_cache_hits_total"},
        {"pagoda:prompt_tokens_total", "vllm:prompt_tokens_total"},
        {"pagoda:generation_tokens_total", "vllm:generation_tokens_total"},
        {"pagoda:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens_total"},
        {"pagoda:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"},
        {"pagoda:num_preemptions_total", "vllm:num_preemptions_total"},
        {"pagoda:request_success_total", "vllm:request_success_total"},
        {"pagoda:time_to_first_token_seconds", "vllm:time_to_first_token_seconds"},
        {"pagoda:inter_token_latency_seconds", "vllm:inter_token_latency_seconds"},
        {"pagoda:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
        {"pagoda:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds"},
        {"pagoda:request_queue_time_seconds", "vllm:request_queue_time_seconds"},
        {"pagoda:request_prompt_tokens", "vllm:request_prompt_tokens"},
        {"pagoda:request_generation_tokens", "vllm:request_generation_tokens"},
    };
    for (const auto& [name, alias] : vllm_names) r.add_alias(name, alias, {{"model_name", model_name}});
    r.add_alias("pagoda:lora_requests_info", "vllm:lora_requests_info", {{"model_name", model_name}});
    // vLLM's info gauge names the pool size num_gpu_blocks whatever the device.
    r.add_gauge("vllm:cache_config_info", "KV-cache configuration in the labels (value 1), vLLM's names",
                {"block_size", "num_gpu_blocks", "cache_dtype"});
}

void ServerMetrics::set_time_to_ready(double seconds) { registry_.set("pagoda:time_to_ready_seconds", seconds); }

void ServerMetrics::set_cache_config(int32_t block_size, int32_t n_blocks, const std::string& cache_dtype) {
    const std::string bs = std::to_string(block_size), n = std::to_string(n_blocks);
    registry_.set("pagoda:cache_config_info", 1, {bs, n, cache_dtype});
    if (compat_ == MetricsCompat::vllm) registry_.set("vllm:cache_config_info", 1, {bs, n, cache_dtype});
}

void ServerMetrics::on_request_finished(const engine::FinishedRequest& f) {
    live_.on_request_finished(f, now());
    auto& r = registry_;
    r.inc("pagoda:request_success_total", {engine::finish_reason_name(f.reason)});
    if (f.timings.ttft >= 0) r.observe("pagoda:time_to_first_token_seconds", f.timings.ttft);
    for (double gap : f.timings.inter_token) r.observe("pagoda:inter_token_latency_seconds", gap);
    r.observe("pagoda:e2e_request_latency_seconds", f.timings.e2e);
    r.observe("pagoda:request_queue_time_seconds", f.timings.queue);
    r.observe("pagoda:request_prompt_tokens", double(f.usage.prompt_tokens));
    r.observe("pagoda:request_generation_tokens", double(f.usage.completion_tokens));
}

void ServerMetrics::on_step(const engine::StepInfo& step, int64_t max_batched_tokens) {
    live_.on_step(step, max_batched_tokens, now());
    if (max_batched_tokens > 0)
        registry_.observe("pagoda:engine_step_utilisation", double(step.n_tokens) / double(max_batched_tokens));
    registry_.observe("pagoda:engine_step_duration_seconds", step.seconds);
    registry_.inc("pagoda:engine_busy_seconds_total", {}, step.seconds);
}

void ServerMetrics::on_api_request(const std::string& key, const std::string& endpoint, int status) {
    live_.on_api_request(key, status, now());
    registry_.inc("pagoda:api_requests_total", {key, endpoint, std::to_string(status)});
}

void ServerMetrics::on_key_tokens(const std::string& key, int64_t prompt_tokens, int64_t completion_tokens) {
    if (prompt_tokens > 0) registry_.inc("pagoda:api_tokens_total", {key, "prompt"}, double(prompt_tokens));
    if (completion_tokens > 0) registry_.inc("pagoda:api_tokens_total", {key, "completion"}, double(completion_tokens));
}

void ServerMetrics::on_deadline_miss(const std::string& key, const std::string& stage) {
    registry_.inc("pagoda:deadline_misses_total", {key, stage});
}

void ServerMetrics::on_rejection(const std::string& key, const std::string& reason) {
    live_.on_rejection(key, reason, now());
    registry_.inc("pagoda:api_rejections_total", {key, reason});
}

void ServerMetrics::set_lora_info(size_t max_lora, const engine::EngineStats& stats) {
    const double unix_now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    registry_.set_only("pagoda:lora_requests_info", unix_now,
                       {std::to_string(max_lora), fmt::format("{}", fmt::join(stats.waiting_lora_adapters, ",")),
                        fmt::format("{}", fmt::join(stats.running_lora_adapters, ","))});
}

void ServerMetrics::set_image_cache(const vision::ImageCacheStats& c) {
    registry_.set("pagoda:image_cache_hits_total", double(c.hits));
    registry_.set("pagoda:image_cache_misses_total", double(c.misses));
    registry_.set("pagoda:image_cache_evictions_total", double(c.evictions));
    registry_.set("pagoda:image_cache_entries", double(c.entries));
    registry_.set("pagoda:image_cache_bytes", double(c.bytes));
    registry_.set("pagoda:image_cache_capacity_bytes", double(c.capacity_bytes));
}

std::string ServerMetrics::render(const engine::EngineStats* s, bool ready) {
    auto& r = registry_;
    r.set("pagoda:model_ready", ready ? 1 : 0);
    if (s) {
        r.set("pagoda:num_requests_running", double(s->running_requests));
        r.set("pagoda:num_requests_waiting", double(s->waiting_requests));
        r.set("pagoda:kv_cache_usage_perc", s->kv_usage);
        r.set("pagoda:kv_cache_blocks", double(s->kv_blocks_total));
        r.set("pagoda:kv_cache_blocks_cached", double(s->kv_blocks_cached));
        r.set("pagoda:prefix_cache_queries_total", double(s->prefix_queried_tokens));
        r.set("pagoda:prefix_cache_hits_total", double(s->prefix_hit_tokens));
        r.set("pagoda:prompt_tokens_total", double(s->prompt_tokens));
        r.set("pagoda:prompt_tokens_computed_total", double(s->computed_prompt_tokens));
        r.set("pagoda:generation_tokens_total", double(s->generation_tokens));
        r.set("pagoda:spec_decode_num_draft_tokens_total", double(s->draft_tokens));
        r.set("pagoda:spec_decode_num_accepted_tokens_total", double(s->accepted_draft_tokens));
        r.set("pagoda:num_preemptions_total", double(s->preemptions));
        r.set("pagoda:engine_steps_total", double(s->steps));
        if (s->tier_host || s->tier_file) {
            r.set("pagoda:prefix_cache_tier_misses_total", double(s->tier_miss_blocks));
            r.set("pagoda:prefix_cache_tier_hit_tokens_total", double(s->tier_hit_tokens));
            r.set("pagoda:prefix_cache_tier_loaded_bytes_total", double(s->tier_hit_bytes));
            r.set("pagoda:prefix_cache_tier_spilled_blocks_total", double(s->tier_spilled_blocks));
            r.set("pagoda:prefix_cache_tier_spilled_bytes_total", double(s->tier_spilled_bytes));
            r.set("pagoda:prefix_cache_tier_spill_seconds_total", s->tier_spill_seconds);
        }
        if (s->tier_host) {
            r.set("pagoda:prefix_cache_tier_hits_total", double(s->tier_host_hit_blocks), {"host"});
            r.set("pagoda:prefix_cache_tier_blocks", double(s->tier_host_blocks), {"host"});
            r.set("pagoda:prefix_cache_tier_bytes", double(s->tier_host_bytes), {"host"});
            r.set("pagoda:prefix_cache_tier_capacity_bytes", double(s->tier_host_capacity_bytes), {"host"});
        }
        if (s->tier_file) {
            r.set("pagoda:prefix_cache_tier_hits_total", double(s->tier_file_hit_blocks), {"file"});
            r.set("pagoda:prefix_cache_tier_blocks", double(s->tier_file_blocks), {"file"});
            r.set("pagoda:prefix_cache_tier_bytes", double(s->tier_file_bytes), {"file"});
            r.set("pagoda:prefix_cache_tier_capacity_bytes", double(s->tier_file_capacity_bytes), {"file"});
            r.set("pagoda:prefix_cache_tier_file_writes_total", double(s->tier_file_written));
            r.set("pagoda:prefix_cache_tier_file_rejected_total", double(s->tier_file_rejected));
            r.set("pagoda:prefix_cache_tier_file_dropped_total", double(s->tier_file_dropped));
            r.set("pagoda:prefix_cache_tier_file_write_failures_total", double(s->tier_file_write_failures));
        }
    }
    return r.render();
}

}  // namespace pagoda::server
