// `pagoda bench`: prompt-processing (ppN) and generation (tgN) speed of a model, with the machine's
// limits measured in the same run: generation against memory bandwidth (bytes read per token; the
// bandwidth is that of streaming the model's own weight memory),
// prompt processing against the arithmetic peak of the path the weights use.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/kv_flags.h"
#include "apps/profile_flags.h"
#include "apps/model_flags.h"
#include "core/cpu_features.h"
#include "core/cpu_steal.h"
#include "core/error.h"
#include "core/machine_limits.h"
#include "gguf/gguf.h"
#include "core/thread_pool.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "model/model_file.h"

namespace pagoda::app {
namespace {

struct BenchOptions {
    std::string model;
    int prompt = 512, gen = 128, reps = 5, threads = 0, chunk = 512;
    int depth = 0;  // tokens already in the KV cache when the tg test starts
    bool json = false, no_limits = false;
    bool op_times = false;  // time every op of the timed steps (model/op_times.h)
    double shared_prefix = 0;  // > 0: also time prompts whose leading fraction is a cached prefix
    KvFlags kv;
    ProfileFlags profile;
    ModelFlags compute;
};

using Clock = std::chrono::steady_clock;

struct Stat {
    double mean = 0, stddev = 0;
};
Stat stats(const std::vector<double>& v) {
    Stat s;
    for (double x : v) s.mean += x;
    s.mean /= double(v.size());
    for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
    s.stddev = v.size() > 1 ? std::sqrt(s.stddev / double(v.size() - 1)) : 0.0;
    return s;
}

// --op-times: each op's share of the timed steps, the most expensive first. What is left of a
// step's time outside its ops is the step's own work (validation, block copies, the logits copy).
std::vector<std::pair<std::string, model::OpTimes::Entry>> ops_by_time(const model::OpTimes& t) {
    std::vector<std::pair<std::string, model::OpTimes::Entry>> ops(t.by_op.begin(), t.by_op.end());
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    return ops;
}

void print_op_times(const std::string& test, const model::OpTimes& t) {
    if (t.steps == 0) return;
    const double per_step_us = 1e6 / double(t.steps);
    std::printf("\nops of %s: %lld steps, %.1f us per step\n\n", test.c_str(), (long long)t.steps, t.step_seconds * per_step_us);
    std::printf("| op                     | calls per step | us per step | share |\n");
    std::printf("| ---------------------- | -------------: | ----------: | ----: |\n");
    for (const auto& [name, e] : ops_by_time(t))
        std::printf("| %-22s | %14.1f | %11.1f | %4.1f %% |\n", name.c_str(), double(e.calls) / double(t.steps),
                    e.seconds * per_step_us, 100 * e.seconds / t.step_seconds);
    const double rest = std::max(0.0, t.step_seconds - t.op_seconds());
    std::printf("| %-22s | %14s | %11.1f | %4.1f %% |\n", "(between ops)", "", rest * per_step_us,
                100 * rest / t.step_seconds);
    if (t.by_weight.empty()) return;
    // The same ops by the weight they stream: each weight's rate beside the machine's read bound.
    std::printf("\nweights of %s: the ops above that stream them\n\n", test.c_str());
    std::printf("| weight                 | calls per step | MB per step | us per step | GB/s |\n");
    std::printf("| ---------------------- | -------------: | ----------: | ----------: | ---: |\n");
    double bytes = 0, seconds = 0;
    for (const auto& [name, e] : t.by_weight) {
        std::printf("| %-22s | %14.1f | %11.2f | %11.1f | %4.1f |\n", name.c_str(), double(e.calls) / double(t.steps),
                    e.weight_bytes / 1e6 / double(t.steps), e.seconds * per_step_us,
                    e.seconds > 0 ? e.weight_bytes / e.seconds / 1e9 : 0.0);
        bytes += e.weight_bytes, seconds += e.seconds;
    }
    std::printf("| %-22s | %14s | %11.2f | %11.1f | %4.1f |\n", "all", "", bytes / 1e6 / double(t.steps),
                seconds * per_step_us, seconds > 0 ? bytes / seconds / 1e9 : 0.0);
}

nlohmann::json op_times_json(const model::OpTimes& t) {
    nlohmann::json ops = nlohmann::json::object();
    const double steps = double(std::max<int64_t>(1, t.steps));
    for (const auto& [name, e] : t.by_op)
        ops[name] = {{"calls_per_step", double(e.calls) / steps}, {"us_per_step", 1e6 * e.seconds / steps}};
    nlohmann::json weights = nlohmann::json::object();
    for (const auto& [name, e] : t.by_weight)
        weights[name] = {{"calls_per_step", double(e.calls) / steps}, {"us_per_step", 1e6 * e.seconds / steps},
                         {"bytes_per_step", e.weight_bytes / steps},
                         {"gb_per_s", e.seconds > 0 ? e.weight_bytes / e.seconds / 1e9 : 0.0}};
    return {{"steps", t.steps}, {"us_per_step", 1e6 * t.step_seconds / steps}, {"ops", ops}, {"weights", weights}};
}

struct ModelFootprint {
    uint64_t total_bytes = 0;      // every tensor
    uint64_t per_token_bytes = 0;  // weights a decode step reads (all but the embedding table unless tied;
                                   // of a MoE layer's experts, the used share)
    double matmul_params = 0;      // multiply-adds per token in the projections and the head
    std::string weight_type;       // of the first attention projection
};

ModelFootprint footprint(const gguf::File& file) {
    ModelFootprint f;
    bool tied = file.find_tensor("output.weight") == nullptr;
    // A decode step reads k of a layer's E stacked experts (ffn_*_exps): k/E of those tensors.
    const std::string arch = file.get_string_or("general.architecture", "");
    const int64_t experts = file.get_int_or(arch + ".expert_count", 0);
    const double active = experts > 0 ? double(file.get_int_or(arch + ".expert_used_count", experts)) / double(experts) : 1.0;
    for (const auto& t : file.tensors()) {
        f.total_bytes += t.n_bytes;
        bool embedding = t.name == "token_embd.weight";
        const double share = t.shape.size() == 3 && t.name.ends_with("_exps.weight") ? active : 1.0;
        if (!embedding || tied) f.per_token_bytes += uint64_t(double(t.n_bytes) * share);
        if (t.shape.size() >= 2 && (!embedding || tied)) f.matmul_params += double(t.n_elements()) * share;
    }
    const auto* q = file.find_tensor("blk.0.attn_q.weight");
    if (!q) q = file.find_tensor("blk.0.attn_qkv.weight");  // Phi-3's fused projection
    if (q) f.weight_type = gguf::type_name(uint32_t(q->type));
    return f;
}

// Times prompts whose first `shared_prefix` fraction was computed by an earlier request (prefix
// cache hit) against the same prompts computed from scratch, and reports the time saved.
void report_prefix_reuse(const BenchOptions& o, model::StepModel& model, double cold_rate) {
    model::SequenceRunner runner(model, true);
    std::mt19937 rng(4321);
    std::uniform_int_distribution<int32_t> token(0, int32_t(model.info().vocab_size - 1));
    const int64_t shared = int64_t(double(o.prompt) * o.shared_prefix);
    std::vector<double> seconds;
    int64_t cached = 0;
    kv::SeqId seq = 1000000;
    for (int r = 0; r < o.reps + 1; ++r) {
        std::vector<int32_t> first(size_t(o.prompt)), second;
        for (auto& t : first) t = token(rng);
        runner.prefill(seq, first, o.chunk);
        runner.release(seq++);
        second.assign(first.begin(), first.begin() + shared);
        while (int64_t(second.size()) < o.prompt) second.push_back(token(rng));
        auto start = Clock::now();
        runner.prefill(seq, second, o.chunk);
        double s = std::chrono::duration<double>(Clock::now() - start).count();
        cached = runner.last_cached_tokens();
        runner.release(seq++);
        runner.blocks().clear_prefix_cache();
        if (r > 0) seconds.push_back(s);
    }
    Stat s = stats(seconds);
    const double cold = cold_rate > 0 ? o.prompt / cold_rate : 0;
    if (o.json) {
        nlohmann::json j = {{"test", fmt::format("pp{}-prefix{:.0f}", o.prompt, 100 * o.shared_prefix)},
                            {"seconds", s.mean}, {"stddev", s.stddev}, {"cached_tokens", cached},
                            {"cold_seconds", cold}, {"threads", model.info().threads}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("\nprompt of %d tokens, %.0f %% shared with an earlier prompt: %lld tokens from the prefix cache, "
                    "%.3f ± %.3f s vs %.3f s computed cold (%.0f %% of the prefill time saved)\n",
                    o.prompt, 100 * o.shared_prefix, (long long)cached, s.mean, s.stddev, cold,
                    cold > 0 ? 100 * (1 - s.mean / cold) : 0.0);
    }
}

int run_bench(const BenchOptions& o) {
    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model, o.compute.file_options(o.threads, false));
    // The KV cache holds one prompt and its generation, or two prompts for the prefix-reuse test.
    const int64_t kv_tokens =
        std::max<int64_t>({int64_t(o.prompt) + o.gen + 1, 2 * (int64_t(o.prompt) + 1), int64_t(o.depth) + o.gen + 1});
    auto kv = o.kv.options();
    auto model = model::open_step_model(file, o.compute.options(o.threads, kv, kv_tokens, 0, o.chunk));
    const auto& info = model->info();
    const auto& cfg = info.config;
    const ModelFootprint fp = footprint(*file);
    ThreadPool limit_threads(std::max(1, info.threads));  // the limits are measured with the model's thread count
    const bool half_weights = fp.weight_type == "f16" || fp.weight_type == "bf16";
    const bool quantised = fp.weight_type != "f32" && !half_weights;

    MachineLimits limits;
    double buffer_read_gbps = 0;
    std::vector<std::span<const uint8_t>> weight_regions;
    std::unique_ptr<ReadScratch> scratch;  // beside the weights, kept for the re-measurements
    ReadBound bound;
    if (!o.no_limits) {
        limits = measure_machine_limits(limit_threads);
        scratch = std::make_unique<ReadScratch>(size_t(512) << 20);
        weight_regions = model->weight_memory();
        bound = measure_read_bound(limit_threads, weight_regions, *scratch);
        buffer_read_gbps = bound.buffer_gbps;
        if (bound.gbps > 0) limits.read_gbps = bound.gbps;
    }
    // The host's bandwidth drifts within seconds (measured here: 36 then 62 GB/s a minute apart): the
    // bound is measured again right before every generation run, and each run is compared with its own.
    std::vector<ReadBound> tg_bounds;
    auto remeasure_bandwidth = [&] {
        if (o.no_limits || !scratch) return;
        tg_bounds.push_back(measure_read_bound(limit_threads, weight_regions, *scratch));
    };

    auto runner_owner = std::make_unique<model::SequenceRunner>(*model, false);  // every repetition computes its prompt
    model::SequenceRunner& runner = *runner_owner;
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> token(0, int32_t(cfg.vocab_size - 1));

    std::vector<double> pp_rates, tg_rates;
    model::OpTimes pp_times, tg_times;  // the timed repetitions' steps, with --op-times
    StealMeter pp_steal, tg_steal;      // CPU time the hypervisor took during the timed repetitions
    auto time_ops = [&](model::OpTimes* times) { model->set_op_times(o.op_times ? times : nullptr); };
    kv::SeqId seq = 0;
    for (int r = 0; r < o.reps + 1; ++r) {  // the first round warms caches and page tables up
        if (o.prompt > 0) {
            std::vector<int32_t> prompt(size_t(o.prompt));
            for (auto& t : prompt) t = token(rng);
            if (r > 0) time_ops(&pp_times), pp_steal.begin();
            auto start = Clock::now();
            runner.prefill(seq, prompt, o.chunk);
            double s = std::chrono::duration<double>(Clock::now() - start).count();
            if (r > 0) pp_steal.end();
            time_ops(nullptr);
            if (r > 0) pp_rates.push_back(o.prompt / s);
            runner.release(seq++);
        }
        if (o.gen > 0) {
            // The context the generation starts from: --depth tokens, then one more.
            std::vector<int32_t> first(size_t(o.depth) + 1);
            for (auto& t : first) t = token(rng);
            runner.prefill(seq, first, o.chunk);
            if (r > 0) remeasure_bandwidth();
            if (r > 0) time_ops(&tg_times), tg_steal.begin();
            auto start = Clock::now();
            for (int i = 0; i < o.gen; ++i) runner.decode(seq, token(rng));
            double s = std::chrono::duration<double>(Clock::now() - start).count();
            if (r > 0) tg_steal.end();
            time_ops(nullptr);
            if (r > 0) tg_rates.push_back(o.gen / s);
            runner.release(seq++);
        }
    }

    // The peaks once more, the higher kept: the first measurement, right after the model load, read
    // half the machine in 4 of 8 runs on an Ice Lake guest (one thread's worth: fp32 175 vs 320).
    if (!o.no_limits) raise_compute_peaks(limits, limit_threads);
    runner_owner.reset();  // the prefix-reuse test takes the KV cache over
    const double kv_bytes_per_pos = double(info.kv_bytes_per_block) / info.block_size;
    // The kernel path column: the ISA for the cpu backend, else the backend's name.
    const std::string path = info.backend == "cpu" ? isa_name(active_isa()) : info.backend;
    auto report = [&](const std::string& test, const std::vector<double>& rates, int n, const model::OpTimes& times,
                      const StealMeter& steal) {
        if (rates.empty()) return;
        Stat s = stats(rates);
        double ratio = 0, gbps = limits.read_gbps;  // tg: the mean of the runs' own measurements
        std::string limit, bound_pattern;
        bool above_bound = false;  // a run faster than its own bound
        if (test[0] == 't' && limits.read_gbps > 0) {
            // Bytes per generated token: weights plus the KV read at the average context length. Each
            // run's rate against the bound at the bandwidth measured just before it; the mean ratio.
            const double bytes = double(fp.per_token_bytes) + kv_bytes_per_pos * (o.depth + 1 + n / 2.0);
            const bool per_run = tg_bounds.size() == rates.size();
            if (per_run) {
                double sum_ratio = 0, sum_bw = 0;
                for (size_t i = 0; i < rates.size(); ++i) {
                    const double run_ratio = rates[i] / (tg_bounds[i].gbps * 1e9 / bytes);
                    sum_ratio += run_ratio;
                    sum_bw += tg_bounds[i].gbps;
                    above_bound = above_bound || run_ratio > 1.0;
                }
                ratio = sum_ratio / double(rates.size());
                gbps = sum_bw / double(rates.size());
                bound_pattern = tg_bounds.back().describe();
            } else {
                ratio = s.mean / (gbps * 1e9 / bytes);
                above_bound = ratio > 1.0;
                bound_pattern = bound.describe();
            }
            limit = fmt::format("{:.0f} tok/s bound at {:.1f} GB/s{}, best read: {}", gbps * 1e9 / bytes, gbps,
                                per_run ? " (mean of the runs)" : "", bound_pattern);
            // A rate above the bound measured right before it means the bound was not the machine's
            // limit (a pattern it missed, or drift within the run): never a result.
            if (above_bound) limit += "; ABOVE THE BOUND: a measurement error, not a result";
        } else if (test[0] == 'p') {
            // The peak of the path the weights take at this step size: AMX int8 / bf16 tiles, int8 dot,
            // bf16 dot (packed F16 / BF16), else fp32 FMA.
            const std::string arithmetic = model->matmul_arithmetic();
            // No host peak bounds a device's arithmetic ("").
            double peak = arithmetic.empty() ? 0 : limits.fp32_gflops;
            std::string unit = "GFLOP/s fp32";
            if (arithmetic == "amx_int8" && limits.amx_int8_gops > 0) peak = limits.amx_int8_gops, unit = "GOP/s AMX int8";
            else if (arithmetic == "amx_bf16" && limits.amx_bf16_gflops > 0) peak = limits.amx_bf16_gflops, unit = "GFLOP/s AMX bf16";
            else if (!arithmetic.empty() && quantised && limits.int8_gops > 0) peak = limits.int8_gops, unit = "GOP/s int8";
            else if (half_weights && arithmetic == "bf16" && limits.bf16_gflops > 0) peak = limits.bf16_gflops, unit = "GFLOP/s bf16";
            double flops = 2 * fp.matmul_params + 4.0 * double(cfg.n_layers) * (n / 2.0) * double(cfg.q_dim());
            if (peak > 0) {
                ratio = s.mean * flops / (peak * 1e9);
                limit = fmt::format("{:.0f} {} peak", peak, unit);
                // Faster than the peak: the peak's measurement missed the machine (a vCPU away).
                above_bound = ratio > 1.0;
                if (above_bound) limit += "; ABOVE THE PEAK: a measurement error, not a result";
            }
        }
        if (o.json) {
            nlohmann::json j = {{"test", test}, {"tokens_per_s", s.mean}, {"stddev", s.stddev},
                                {"threads", info.threads}, {"model_bytes", fp.total_bytes}, {"backend", info.backend},
                                {"model", cfg.name}, {"weight_type", fp.weight_type}, {"isa", isa_name(active_isa())},
                                {"reps", rates.size()}, {"ratio_to_limit", ratio}, {"bandwidth_gbps", gbps},
                                {"weight_bytes_per_token", fp.per_token_bytes},
                                {"buffer_bandwidth_gbps", buffer_read_gbps},
                                {"bound_read_pattern", bound_pattern}, {"measurement_error", above_bound},
                                {"fp32_gflops", limits.fp32_gflops}, {"int8_gops", limits.int8_gops},
                                {"bf16_gflops", limits.bf16_gflops}, {"amx_int8_gops", limits.amx_int8_gops},
                                {"amx_bf16_gflops", limits.amx_bf16_gflops}};
            if (o.op_times) j["op_times"] = op_times_json(times);
            j["steal_share"] = steal.known() ? nlohmann::json(steal.share()) : nlohmann::json(nullptr);
            std::printf("%s\n", j.dump().c_str());
        } else {
            const std::string share = above_bound ? "error" : fmt::format("{:5.1f} %", 100 * ratio);
            std::printf("| %-10s | %6s | %8.1f MiB | %2d | %-6s | %8.2f ± %6.2f | %8s | %s |\n", test.c_str(),
                        fp.weight_type.c_str(), double(fp.total_bytes) / 1048576.0, info.threads,
                        path.c_str(), s.mean, s.stddev, share.c_str(), limit.c_str());
        }
    };
    if (!o.json) {
        std::printf("model: %s\n", cfg.describe().c_str());
        std::printf("weights a decode step reads: %.2f MiB%s\n", double(fp.per_token_bytes) / 1048576.0,
                    cfg.n_experts > 0 ? " (the selected experts only)" : "");
        std::printf("machine: %s; read %.1f GB/s (best of %zu access patterns over the model's weights and a "
                    "scratch buffer: %s; the scratch buffer alone: %.1f), fp32 FMA %.0f GFLOP/s, "
                    "int8 dot %.0f GOP/s, bf16 dot %.0f GFLOP/s, AMX int8 %.0f GOP/s, AMX bf16 %.0f GFLOP/s (measured now)\n\n",
                    cpu_features().summary().c_str(), limits.read_gbps, read_patterns().size(),
                    bound.describe().c_str(), buffer_read_gbps, limits.fp32_gflops,
                    limits.int8_gops, limits.bf16_gflops, limits.amx_int8_gops, limits.amx_bf16_gflops);
        std::printf("| test       | type   |         size | th | path   |         tokens/s | of limit | limit |\n");
        std::printf("| ---------- | ------ | -----------: | -: | ------ | ---------------: | -------: | ----- |\n");
    }
    const std::string pp_test = "pp" + std::to_string(o.prompt);
    const std::string tg_test = "tg" + std::to_string(o.gen) + (o.depth > 0 ? " @ d" + std::to_string(o.depth) : "");
    report(pp_test, pp_rates, o.prompt, pp_times, pp_steal);
    report(tg_test, tg_rates, o.gen, tg_times, tg_steal);
    if (!o.json && (pp_steal.known() || tg_steal.known())) {
        // On a virtual machine, the share of CPU time the host gave to other guests during the timed
        // runs: figures taken while it is more than a few percent are slowed by the host, not the code.
        std::string line;
        auto add = [&](const std::string& test, const std::vector<double>& rates, const StealMeter& m) {
            if (rates.empty() || !m.known()) return;
            line += fmt::format("{}{} {:.1f} %", line.empty() ? "" : ", ", test, 100 * m.share());
        };
        add(pp_test, pp_rates, pp_steal);
        add(tg_test, tg_rates, tg_steal);
        if (!line.empty())
            std::printf("\nCPU time stolen by the hypervisor during the timed runs (/proc/stat steal): %s\n",
                        line.c_str());
    }
    if (o.op_times && !o.json) {
        if (!pp_rates.empty()) print_op_times(pp_test, pp_times);
        if (!tg_rates.empty()) print_op_times(tg_test, tg_times);
    }
    if (o.shared_prefix > 0 && o.prompt > 1) report_prefix_reuse(o, *model, pp_rates.empty() ? 0 : stats(pp_rates).mean);
    return 0;
}

CommandRegistration reg("bench", "Measure prompt-processing and generation speed of a model", [](CLI::App& sub) {
    auto o = std::make_shared<BenchOptions>();
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    sub.add_option("-p,--n-prompt", o->prompt, "Prompt tokens (0 skips the pp test)")->check(in_range(0, 1 << 20));
    sub.add_option("-n,--n-gen", o->gen, "Generated tokens (0 skips the tg test)")->check(in_range(0, 1 << 20));
    sub.add_option("-d,--depth", o->depth, "Tokens already in the KV cache when the tg test starts (its context)")
        ->check(in_range(0, 1 << 20));
    sub.add_option("-r,--reps", o->reps, "Repetitions (after one warm-up)")->check(in_range(1, 1000));
    add_threads_option(sub, o->threads);
    sub.add_option("--chunk", o->chunk, "Prompt tokens per forward step")->check(in_range(1, 1 << 20));
    sub.add_flag("--json", o->json, "One JSON object per test instead of a table");
    sub.add_flag("--no-limits", o->no_limits, "Skip measuring bandwidth and peaks");
    sub.add_flag("--op-times", o->op_times,
                 "Also time every op of the timed steps: a table per test of each op's calls and microseconds per "
                 "step and share of the step (with --json, an op_times object in each test's line)");
    sub.add_option("--shared-prefix", o->shared_prefix,
                   "Also time a prompt whose leading fraction (e.g. 0.9) is served from the prefix cache")
        ->check(in_range(0.0, 1.0));
    o->kv.add_to(sub);
    o->profile.add_to(sub);
    o->compute.add_to(sub);
    return [o] {
        o->profile.apply(o->model, o->compute, &o->threads, &o->kv.block_size);
        return run_bench(*o);
    };
});

}  // namespace
}  // namespace pagoda::app
