#include "server/live_stats.h"

#include <algorithm>
#include <cmath>

namespace pagoda::server {

using json = nlohmann::json;

namespace {
constexpr double kQuantiles[] = {0.5, 0.9, 0.99};

}  // namespace

LiveStats::LiveStats(WindowShape shape, double start)
    : shape_(shape), start_(start), ttft_(shape), itl_(shape), steps_(shape, n_step_channels) {}

void LiveStats::on_request_finished(const engine::FinishedRequest& r, double now) {
    std::lock_guard lock(mutex_);
    if (r.timings.ttft >= 0) ttft_.add(r.timings.ttft, now);
    for (double gap : r.timings.inter_token) itl_.add(gap, now);
}

void LiveStats::on_step(const engine::StepInfo& s, int64_t max_batched_tokens, double now) {
    std::lock_guard lock(mutex_);
    steps_.add(prompt_tokens, double(s.n_prefill_tokens), now);
    steps_.add(generated_tokens, double(s.n_sampled), now);
    steps_.add(steps, 1, now);
    if (max_batched_tokens > 0) steps_.add(utilisation_sum, double(s.n_tokens) / double(max_batched_tokens), now);
    steps_.add(busy_seconds, s.seconds, now);
}

void LiveStats::on_api_request(const std::string& key, int status, double now) {
    std::lock_guard lock(mutex_);
    KeyWindow& k = key_window(key);
    k.counts.add(requests, 1, now);
    if (status >= 400) k.counts.add(errors, 1, now);
}

void LiveStats::on_rejection(const std::string& key, const std::string& reason, double now) {
    std::lock_guard lock(mutex_);
    KeyWindow& k = key_window(key);
    k.counts.add(rejections, 1, now);
    auto it = k.reasons.find(reason);
    if (it == k.reasons.end()) it = k.reasons.emplace(reason, RollingSums(shape_, 1)).first;
    it->second.add(0, 1, now);
}

LiveStats::KeyWindow& LiveStats::key_window(const std::string& key) {
    auto it = keys_.find(key);
    if (it == keys_.end()) it = keys_.emplace(key, KeyWindow{RollingSums(shape_, n_key_channels), {}}).first;
    return it->second;
}

double LiveStats::span(double from, double to) const { return std::max(0.0, to - std::max(from, start_)); }

json LiveStats::latency_json(const RollingQuantiles& q, double now) const {
    const auto all = q.summary(now, kQuantiles);
    json out = {{"count", all.count}};
    const char* names[] = {"p50", "p90", "p99"};
    for (size_t i = 0; i < 3; ++i) out[names[i]] = all.count ? json(all.quantiles[i]) : json(nullptr);
    out["max"] = all.count ? json(all.max) : json(nullptr);
    json series = json::array();
    for (const auto& p : q.series(now, kQuantiles)) {
        json point = {{"t", p.start - now}, {"count", p.summary.count}};
        for (size_t i = 0; i < 3; ++i) point[names[i]] = p.summary.count ? json(p.summary.quantiles[i]) : json(nullptr);
        series.push_back(std::move(point));
    }
    out["series"] = std::move(series);
    return out;
}

json LiveStats::to_json(double now, double recent_seconds) const {
    std::lock_guard lock(mutex_);
    json out;
    out["window"] = {{"seconds", shape_.window_seconds()}, {"slice_seconds", shape_.slice_seconds},
                     {"recent_seconds", recent_seconds}};
    out["latency"] = {{"ttft", latency_json(ttft_, now)}, {"itl", latency_json(itl_, now)}};

    // Rates over the recent span: from the start of the first slice it touches, so the sums and the
    // time they cover match.
    const double recent_from =
        std::floor((now - recent_seconds) / shape_.slice_seconds) * shape_.slice_seconds;
    const double recent = span(std::max(recent_from, now - shape_.window_seconds()), now);
    auto rate = [&](double sum, double seconds) { return seconds > 0 ? sum / seconds : 0.0; };
    auto recent_sum = [&](int32_t channel) { return steps_.sum(channel, now, recent_seconds); };
    const double n_steps = recent_sum(steps);
    json throughput = {
        {"prompt_tokens_per_s", rate(recent_sum(prompt_tokens), recent)},
        {"generation_tokens_per_s", rate(recent_sum(generated_tokens), recent)},
        {"steps_per_s", rate(n_steps, recent)},
        {"step_utilisation", n_steps > 0 ? json(recent_sum(utilisation_sum) / n_steps) : json(nullptr)},
        {"busy_fraction", std::min(1.0, rate(recent_sum(busy_seconds), recent))},
    };
    json series = json::array();
    for (const auto& p : steps_.series(now)) {
        const double seconds = span(p.start, std::min(now, p.start + shape_.slice_seconds));
        const double k = p.sums[steps];
        series.push_back({{"t", p.start - now},
                          {"prompt_tokens_per_s", rate(p.sums[prompt_tokens], seconds)},
                          {"generation_tokens_per_s", rate(p.sums[generated_tokens], seconds)},
                          {"step_utilisation", k > 0 ? json(p.sums[utilisation_sum] / k) : json(nullptr)},
                          {"busy_fraction", std::min(1.0, rate(p.sums[busy_seconds], seconds))}});
    }
    throughput["series"] = std::move(series);
    out["throughput"] = std::move(throughput);

    json keys = json::array();
    for (const auto& [name, k] : keys_) {
        json reasons = json::object();
        for (const auto& [reason, sums] : k.reasons)
            if (const double n = sums.sum(0, now); n > 0) reasons[reason] = int64_t(n);
        keys.push_back({{"key", name},
                        {"requests_per_s", rate(k.counts.sum(requests, now, recent_seconds), recent)},
                        {"rejections_per_s", rate(k.counts.sum(rejections, now, recent_seconds), recent)},
                        {"requests", int64_t(k.counts.sum(requests, now))},
                        {"errors", int64_t(k.counts.sum(errors, now))},
                        {"rejections", int64_t(k.counts.sum(rejections, now))},
                        {"rejection_reasons", std::move(reasons)}});
    }
    out["keys"] = std::move(keys);
    return out;
}

}  // namespace pagoda::server
