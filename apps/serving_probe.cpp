#include "apps/serving_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <vector>

#include "apps/percentile.h"
#include "engine/engine.h"
#include "model/config.h"
#include "model/model_file.h"
#include "model/open_step_model.h"

namespace pagoda::app {
namespace {

std::pair<int64_t, int64_t> length_range(double mean, double low_fraction) {
    const int64_t lo = std::max<int64_t>(1, int64_t(std::llround(mean * low_fraction)));
    return {lo, std::max<int64_t>(lo, int64_t(std::llround(2 * mean)) - lo)};
}

}  // namespace

tune::ServedFigures probe_serving(const std::string& model_path, const tune::ServingCheck& check, uint64_t seed) {
    auto file = model::open_model_file(model_path, {.threads = check.threads, .tokenizer = false});
    const int64_t vocab = model::read_config(*file).vocab_size;
    const auto [p_lo, p_hi] = length_range(check.workload.prompt_tokens, 0.4);
    const auto [g_lo, g_hi] = length_range(check.workload.output_tokens, 0.12);
    const int concurrency = check.workload.concurrency > 0 ? check.workload.concurrency : check.max_seqs;
    const int n_requests = std::max(16, 2 * concurrency);

    std::mt19937_64 rng(seed);
    std::vector<engine::Request> reqs;
    for (int i = 0; i < n_requests; ++i) {
        engine::Request r;
        const int64_t plen = std::uniform_int_distribution<int64_t>(p_lo, p_hi)(rng);
        for (int64_t t = 0; t < plen; ++t) r.prompt.push_back(int32_t(3 + rng() % uint64_t(std::max<int64_t>(1, vocab - 3))));
        r.stop.max_tokens = std::uniform_int_distribution<int64_t>(g_lo, g_hi)(rng);
        r.stop.ignore_eos = true;
        r.sampling.temperature = 0;
        reqs.push_back(std::move(r));
    }
    model::StepModelOptions so;
    so.threads = check.threads;
    so.kv.block_size = check.kv_block_size;
    so.kv.prefix_caching = false;
    so.tokens_wanted = int64_t(concurrency) * (p_hi + g_hi + check.kv_block_size) + check.max_batched_tokens;
    so.max_step_tokens = check.max_batched_tokens;
    engine::EngineOptions options;
    options.scheduler.max_batched_tokens = check.max_batched_tokens;
    options.scheduler.max_seqs = check.max_seqs;
    options.prefix_caching = false;
    engine::Engine eng(model::open_step_model(file, so), nullptr, options);

    std::mutex mutex;
    std::condition_variable cv;
    std::vector<double> gaps;
    int64_t output_tokens = 0;
    int in_flight = 0, finished = 0;
    auto on_delta = [&](const engine::Delta& d) {
        if (!d.request_done) return;
        std::lock_guard lock(mutex);
        --in_flight;
        ++finished;
        gaps.insert(gaps.end(), d.timings.inter_token.begin(), d.timings.inter_token.end());
        output_tokens += d.usage.completion_tokens;
        cv.notify_all();
    };
    const auto start = std::chrono::steady_clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(check.max_seconds));
    int submitted = 0;
    for (auto& r : reqs) {
        std::unique_lock lock(mutex);
        if (!cv.wait_until(lock, deadline, [&] { return in_flight < concurrency; })) break;
        ++in_flight;
        ++submitted;
        lock.unlock();
        eng.submit(std::move(r), on_delta);
    }
    {
        std::unique_lock lock(mutex);
        cv.wait_until(lock, deadline, [&] { return finished == submitted; });
    }
    eng.shutdown(false);  // past the deadline: cancels what is still in flight (its deltas still arrive)
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    tune::ServedFigures f;
    f.itl_samples = gaps.size();
    f.output_tokens_per_s = seconds > 0 ? double(output_tokens) / seconds : 0;
    f.p99_itl_s = percentile(gaps, 0.99);  // as bench-throughput reports it
    return f;
}

}  // namespace pagoda::app
