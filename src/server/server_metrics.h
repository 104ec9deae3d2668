// The metric families pagoda's server exposes at /metrics (see docs/metrics.md), named in the
// style of vLLM's (`pagoda:` prefix), every sample labelled with `model_name`. Engine gauges and counters are
// copied from EngineStats at scrape time; latency histograms are fed from the engine's
// request-finished and step callbacks; per-key counters from the gateway. With
// MetricsCompat::vllm the series tools built for vLLM read (KEDA examples, dashboards, the Gateway
// API Inference Extension's endpoint picker) are served under vLLM's names too, with its
// `model_name` label. The same hooks feed LiveStats, the dashboard's windows over the last minutes.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/engine_core.h"
#include "engine/engine_stats.h"
#include "server/live_stats.h"
#include "server/prometheus.h"
#include "vision/encoded_image_cache.h"

namespace pagoda::server {

enum class MetricsCompat { none, vllm };

class ServerMetrics {
public:
    explicit ServerMetrics(MetricsCompat compat = MetricsCompat::none, const std::string& model_name = {});

    // The KV cache's shape, once the engine is up: the cache_config_info series (value 1).
    // cache_dtype is the KV element type's name (f32, f16, bf16, q8).
    void set_cache_config(int32_t block_size, int32_t n_blocks, const std::string& cache_dtype);
    // Seconds from the server's start to the model being ready (how fast a new instance serves).
    void set_time_to_ready(double seconds);

    void on_request_finished(const engine::FinishedRequest& r);
    void on_step(const engine::StepInfo& step, int64_t max_batched_tokens);
    // Counts an API request that got an answer (status: the HTTP status, or 200 for streams).
    void on_api_request(const std::string& key, const std::string& endpoint, int status);
    void on_rejection(const std::string& key, const std::string& reason);
    // A request that could not start by its deadline: refused on arrival ("admission": the queue's
    // expected wait was longer) or dropped unstarted from the queue ("queue").
    void on_deadline_miss(const std::string& key, const std::string& stage);
    // The tokens a finished request of `key` used: what fair share divides between keys.
    void on_key_tokens(const std::string& key, int64_t prompt_tokens, int64_t completion_tokens);

    // The LoRA adapters of running and waiting requests (from `stats`) and how many the engine may
    // hold at once: pagoda:lora_requests_info, and with MetricsCompat::vllm vLLM's
    // vllm:lora_requests_info, which the Gateway API Inference Extension's endpoint picker reads for
    // adapter affinity. One series whose labels are max_lora and the comma-separated adapter names,
    // valued the Unix time of this call (vLLM's form); a server without adapters shows max_lora 0.
    void set_lora_info(size_t max_lora, const engine::EngineStats& stats);

    // The encoded-image cache's counters (copied at scrape time, as the engine's).
    void set_image_cache(const vision::ImageCacheStats& cache);
    // Renders everything; `stats` is null while the model loads.
    std::string render(const engine::EngineStats* stats, bool ready);

    MetricRegistry& registry() { return registry_; }
    // The dashboard's windowed figures now (LiveStats::to_json).
    nlohmann::json live_json() const { return live_.to_json(now()); }
    // Seconds since this object was built (the clock LiveStats runs on).
    double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count(); }

private:
    MetricRegistry registry_;
    MetricsCompat compat_;
    std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
    LiveStats live_;
};

}  // namespace pagoda::server
