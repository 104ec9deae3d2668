// LiveStats: the dashboard's view of the last minutes (WindowShape: 60 slices of 5 s), fed by the
// same hooks as the Prometheus series (ServerMetrics): TTFT and inter-token latency percentiles,
// prompt and generation tokens per second, steps, step utilisation and engine busy time, and per
// API key the requests answered and refused. Cumulative histograms cannot say "p99 over the last
// five minutes"; these windows can. Thread-safe (one mutex; the engine thread feeds on_step and
// on_request_finished, I/O threads the rest). Every method takes `now`: seconds on one monotonic
// clock (ServerMetrics passes seconds since it was built), so tests control time.
#pragma once
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "server/rolling_window.h"

namespace pagoda::server {

class LiveStats {
public:
    // `start`: the time the server started; rates never count time before it.
    explicit LiveStats(WindowShape shape = {}, double start = 0);

    void on_request_finished(const engine::FinishedRequest& r, double now);
    void on_step(const engine::StepInfo& step, int64_t max_batched_tokens, double now);
    void on_api_request(const std::string& key, int status, double now);
    void on_rejection(const std::string& key, const std::string& reason, double now);

    // The "latency", "throughput" and "keys" parts of the dashboard state (docs/api.md, /v1/state).
    // Current rates are over the last `recent_seconds`; series cover the whole window.
    nlohmann::json to_json(double now, double recent_seconds = 10) const;

private:
    enum StepChannel { prompt_tokens, generated_tokens, steps, utilisation_sum, busy_seconds, n_step_channels };
    enum KeyChannel { requests, errors, rejections, n_key_channels };
    struct KeyWindow {
        RollingSums counts;
        std::map<std::string, RollingSums> reasons;
    };
    KeyWindow& key_window(const std::string& key);  // made on first use; keys are few (the key table)
    // Seconds of [from, to] after the start: what a rate over that span divides by.
    double span(double from, double to) const;
    nlohmann::json latency_json(const RollingQuantiles& q, double now) const;

    WindowShape shape_;
    double start_;
    mutable std::mutex mutex_;
    RollingQuantiles ttft_, itl_;
    RollingSums steps_;
    std::map<std::string, KeyWindow> keys_;
};

}  // namespace pagoda::server
