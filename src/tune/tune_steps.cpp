#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>
#include <fmt/format.h>

#include "kv/kv_layout.h"
#include "tune/step_timer.h"
#include "tune/tune_run.h"

namespace pagoda::tune {

using nlohmann::json;

// Threads 1..cores, through the real step model: a decode step and a 64-token prompt step each;
// the count with the lowest sum of times relative to the best of each kind.
void tune_threads(TuneRun& run) {
    Profile& p = run.profile;
    const int step_reps = run.step_reps;
    json threads_j = json::array();
    std::vector<std::pair<double, double>> per_thread;
    for (int t = 1; t <= run.cores; ++t) {
        run.step(fmt::format("threads: {} of {}", t, run.cores));
        auto m = run.open(t, 64, 64 + 64 + 64 + step_reps + 32, kv::kDefaultBlockSize);
        const int64_t ctx = std::min<int64_t>(64, m->info().max_context / 2);
        const int64_t chunk = std::min<int64_t>(64, m->info().max_context);
        const double d = time_step(*m, {1, ctx, 0}, step_reps + 2), pf = time_step(*m, {0, 0, chunk}, step_reps);
        per_thread.emplace_back(d, pf);
        threads_j.push_back({{"threads", t}, {"decode_step_s", d}, {"prompt64_step_s", pf}});
    }
    double best_d = 1e300, best_p = 1e300;
    for (auto [d, pf] : per_thread) best_d = std::min(best_d, d), best_p = std::min(best_p, pf);
    double best_score = 1e300;
    for (int t = 1; t <= run.cores; ++t) {
        const double score = per_thread[size_t(t - 1)].first / best_d + per_thread[size_t(t - 1)].second / best_p;
        if (score < best_score - 1e-9) best_score = score, p.threads = t;
    }
    p.measurements["threads"] = threads_j;
}

StepPoints step_points(bool quick) {
    StepPoints points;
    points.decode = quick ? std::vector<int32_t>{1, 4, 16} : std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64};
    points.prefill = quick ? std::vector<int64_t>{1, 16, 64, 128} : std::vector<int64_t>{1, 16, 64, 128, 256, 512, 1024, 2048};
    points.decode_ctx = quick ? 32 : 128;
    return points;
}

MeasuredCurves tune_step_curves(TuneRun& run, const StepPoints& points) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    const int step_reps = run.step_reps;
    const int64_t decode_ctx = points.decode_ctx;
    const int32_t max_b = points.decode.back();
    const int64_t max_c = points.prefill.back();
    const int32_t bs = kv::kDefaultBlockSize;
    const int64_t wanted = int64_t(max_b) * (decode_ctx + step_reps + 2 + bs) + max_c + 2 * bs;
    auto m = run.open(p.threads, std::max<int64_t>(max_c, max_b + max_c / 2), wanted, bs);
    const int64_t ctx_limit = m->info().max_context;
    StepCurves curves;
    json decode_j = json::array(), prefill_j = json::array();
    for (int32_t b : points.decode) {
        run.step(fmt::format("decode step, {} sequences", b));
        const double s = time_step(*m, {b, std::min(decode_ctx, ctx_limit - step_reps - 2), 0}, step_reps + 2);
        curves.decode.points.emplace_back(double(b), s);
        decode_j.push_back({b, s});
    }
    for (int64_t c : points.prefill) {
        run.step(fmt::format("prompt step, {} tokens", c));
        if (c > ctx_limit) continue;  // the model's context is shorter than this chunk
        const double s = time_step(*m, {0, 0, c}, c >= 1024 ? std::max(1, step_reps / 2) : step_reps);
        curves.prefill.points.emplace_back(double(c), s);
        prefill_j.push_back({c, s});
    }
    p.measurements["decode_step_s"] = decode_j;  // as measured; the model uses the monotone curves
    p.measurements["prompt_step_s"] = prefill_j;
    curves.decode.make_monotone();
    curves.prefill.make_monotone();
    {
        const int32_t b = o.quick ? 4 : 16;
        const int64_t c = std::min<int64_t>(o.quick ? 64 : 256, ctx_limit);
        const double measured = time_step(*m, {b, std::min(decode_ctx, ctx_limit - step_reps - 2), c}, step_reps);
        p.measurements["mixed_step"] = {{"decodes", b}, {"prompt_tokens", c}, {"measured_s", measured},
                                        {"modelled_s", modelled_step_seconds(curves, b, double(c))}};
    }
    {
        // The host's jitter on a served step: one small mixed step (the shape latency targets end up
        // near) repeated, its 95th percentile over its best. The p99 inter-token latency of a
        // setting is its modelled worst step times this.
        run.step("step time jitter");
        const int32_t b = o.quick ? 4 : 8;
        const int64_t c = std::min<int64_t>(16, ctx_limit);
        const int reps = o.quick ? 12 : 40;
        const std::vector<double> samples =
            step_samples(*m, {b, std::min(decode_ctx, ctx_limit - reps - 2), c}, reps);
        curves.tail = tail_ratio(samples);
        p.measurements["step_jitter"] = {{"decodes", b}, {"prompt_tokens", c}, {"samples_s", samples},
                                         {"tail_p95_over_best", curves.tail},
                                         {"rule", "modelled p99 inter-token latency = modelled worst step x this tail"}};
    }
    m.reset();
    return {curves, ctx_limit};
}

// Another block size than the default only when it is clearly faster (not measured in --quick).
void tune_kv_block_size(TuneRun& run, int64_t ctx_limit) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    const int step_reps = run.step_reps;
    p.kv_block_size = kv::kDefaultBlockSize;
    if (o.quick) {
        p.measurements["kv_block_size"] = {{"skipped", "--quick: the default block size (16) stands"}};
    } else {
        json blocks_j = json::array();
        std::map<int32_t, double> by_size;
        const int64_t ctx = std::min<int64_t>(256, ctx_limit - step_reps - 2);
        // The three models stay open and are timed in turn, three rounds: drift on a shared host
        // then touches every size alike, and each keeps its best.
        std::map<int32_t, std::unique_ptr<model::StepModel>> models;
        for (int32_t size : {16, 32, 64}) {
            run.step(fmt::format("KV block size {}", size));
            models[size] = run.open(p.threads, 64, 16 * (ctx + 3 * (step_reps + 2) + size) + 2 * size, size);
            by_size[size] = 1e300;
        }
        for (int round = 0; round < 3; ++round)
            for (auto& [size, mb] : models) by_size[size] = std::min(by_size[size], time_step(*mb, {16, ctx, 0}, step_reps));
        for (auto& [size, s] : by_size) blocks_j.push_back({{"block_size", size}, {"decode16_step_s", s}});
        models.clear();
        // Another block size only when it is clearly faster: a larger block wastes more KV memory
        // (half a block per sequence on average) and shares prefixes at a coarser grain.
        for (int32_t size : {32, 64})
            if (by_size[size] < 0.97 * by_size[p.kv_block_size]) p.kv_block_size = size;
        p.measurements["kv_block_size"] = {{"decode_steps", blocks_j},
                                           {"rule", "the default 16 unless a size is at least 3 % faster"}};
    }
}

}  // namespace pagoda::tune
