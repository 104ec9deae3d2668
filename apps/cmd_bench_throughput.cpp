// `pagoda bench-throughput`: a synthetic serving workload through the continuous-batching engine.
// Requests with random prompt/output lengths (optionally sharing a prompt prefix) arrive as a
// Poisson process at --rate (or all at once), at most --concurrency in flight; --static-batching
// instead submits batches of --concurrency requests and waits for each batch to drain (the
// baseline continuous batching is measured against). Reports throughput and latency percentiles.
// --json-schema FILE constrains every request to the schema's grammar and reports what the
// grammar mask costs (its share of the step time); with --think-budget N every output starts inside a
// <think> block of N tokens (the reasoning prefix grammar), to measure what the prefix costs.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "apps/cli.h"
#include "apps/command.h"
#include "apps/kv_flags.h"
#include "apps/percentile.h"
#include "apps/profile_flags.h"
#include "apps/prefix_tier_flags.h"
#include "apps/speculative_flags.h"
#include "core/error.h"
#include "engine/engine.h"
#include "apps/model_flags.h"
#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/reasoning_prefix.h"
#include "model/config.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>

namespace pagoda::app {
namespace {

struct BenchOptions {
    SpeculativeFlags spec;
    std::string model, rate = "inf", prompt_len = "32:128", output_len = "16:64", json_schema;
    int64_t think_budget = -1;  // >= 0: every output starts inside a <think> block of this many tokens
    int requests = 32, concurrency = 0, threads = 0;
    double shared_prefix = 0;
    int64_t max_batched_tokens = 2048;
    int32_t max_seqs = 64;
    bool static_batching = false;
    uint64_t seed = 1;
    KvFlags kv;
    ProfileFlags profile;
    PrefixTierFlags tier;
    ModelFlags compute;
};

std::pair<int64_t, int64_t> parse_range(const std::string& text, const char* flag) {
    auto colon = text.find(':');
    try {
        size_t used = 0;
        int64_t a = std::stoll(text.substr(0, colon), &used);
        int64_t b = colon == std::string::npos ? a : std::stoll(text.substr(colon + 1));
        if (a < 1 || b < a) throw std::invalid_argument(text);
        return {a, b};
    } catch (const std::exception&) {
        fail("{} '{}' must be N or A:B with 1 <= A <= B", flag, text);
    }
}

void report(const char* name, const std::vector<double>& v) {
    double mean = 0;
    for (double x : v) mean += x;
    mean = v.empty() ? 0 : mean / double(v.size());
    std::printf("%-22s mean %8.2f  p50 %8.2f  p90 %8.2f  p99 %8.2f  (ms, %zu samples)\n", name, mean * 1e3,
                percentile(v, 0.5) * 1e3, percentile(v, 0.9) * 1e3, percentile(v, 0.99) * 1e3, v.size());
}

int run_bench(const BenchOptions& o) {
    if (o.requests < 1) fail("--requests must be at least 1");
    if (!(o.shared_prefix >= 0 && o.shared_prefix <= 1)) fail("--shared-prefix must be in [0, 1]");
    double rate = 0;  // 0: all at once
    if (o.rate != "inf") {
        try {
            rate = std::stod(o.rate);
        } catch (const std::exception&) {
            rate = -1;
        }
        if (!(rate > 0)) fail("--rate must be a positive number of requests per second or 'inf', got '{}'", o.rate);
    }
    auto [p_lo, p_hi] = parse_range(o.prompt_len, "--prompt-len");
    auto [g_lo, g_hi] = parse_range(o.output_len, "--output-len");
    const int concurrency = o.concurrency > 0 ? o.concurrency : o.requests;
    if (o.static_batching && concurrency > o.max_seqs)
        fail("--static-batching runs batches of --concurrency ({}) requests; raise --max-seqs ({}) to match",
             concurrency, o.max_seqs);

    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model, o.compute.file_options(o.threads));
    const int64_t vocab = model::read_config(*file).vocab_size;
    std::shared_ptr<const grammar::Grammar> grammar;
    std::shared_ptr<const tokenizer::Tokenizer> tok;
    if (!o.json_schema.empty()) {
        std::ifstream in(o.json_schema);
        if (!in) fail("cannot read --json-schema file '{}'", o.json_schema);
        std::stringstream text;
        text << in.rdbuf();
        try {
            grammar = grammar::compile_json_schema(nlohmann::ordered_json::parse(text.str()));
        } catch (const nlohmann::json::exception& e) {
            fail("--json-schema '{}' is not JSON: {}", o.json_schema, e.what());
        }
        tok = tokenizer::Tokenizer::from_gguf(*file);
        if (o.think_budget >= 0) grammar = grammar::with_reasoning_prefix(*grammar, {}, true);
    }
    if (o.think_budget >= 0 && !grammar) fail("--think-budget measures the reasoning prefix of --json-schema: give both");
    std::mt19937_64 rng(o.seed);
    std::vector<int32_t> shared(static_cast<size_t>(p_hi));
    for (auto& t : shared) t = int32_t(3 + rng() % uint64_t(vocab - 3));
    std::vector<engine::Request> reqs;
    int64_t tokens_wanted = 0;
    for (int i = 0; i < o.requests; ++i) {
        engine::Request r;
        const int64_t plen = std::uniform_int_distribution<int64_t>(p_lo, p_hi)(rng);
        const int64_t shared_len = int64_t(double(plen) * o.shared_prefix);
        r.prompt.assign(shared.begin(), shared.begin() + shared_len);
        while (int64_t(r.prompt.size()) < plen) r.prompt.push_back(int32_t(3 + rng() % uint64_t(vocab - 3)));
        r.stop.max_tokens = std::uniform_int_distribution<int64_t>(g_lo, g_hi)(rng);
        r.stop.ignore_eos = true;
        r.sampling.temperature = 0;
        r.grammar = grammar;
        if (o.think_budget >= 0) r.thinking = engine::ThinkingBudget{.starts_open = true, .max_tokens = o.think_budget};
        tokens_wanted += plen + r.stop.max_tokens;
        reqs.push_back(std::move(r));
    }
    const model::KvOptions kv = o.kv.options();
    engine::EngineOptions options;
    options.scheduler.max_batched_tokens = o.max_batched_tokens;
    options.scheduler.max_seqs = o.max_seqs;
    options.prefix_caching = kv.prefix_caching;
    options.prefix_tier = o.tier.options(kv.prefix_caching);
    std::mutex mutex;
    std::condition_variable cv;
    double peak_kv = 0;
    // Step times by kind, to tell a slow step from a skipped one behind an inter-token tail.
    std::vector<double> decode_steps, mixed_steps;
    options.on_step = [&](const engine::StepInfo& i) {
        std::lock_guard lock(mutex);
        (i.n_prefill_tokens > 0 ? mixed_steps : decode_steps).push_back(i.seconds);
    };
    const model::StepModelOptions model_options =
        o.compute.options(o.threads, kv, std::max<int64_t>(tokens_wanted, p_hi + g_hi), 0, o.max_batched_tokens);
    auto target = model::open_step_model(file, model_options);
    if (!o.spec.draft_model.empty()) {  // the draft's vocabulary is checked against the model's
        std::shared_ptr<const tokenizer::Tokenizer> vocab = tok ? tok : tokenizer::Tokenizer::from_gguf(*file);
        options.speculative = o.spec.resolve(*vocab, *target, model_options);
    } else {
        options.speculative = o.spec.options;
    }
    engine::Engine eng(std::move(target), tok, options);

    std::vector<double> ttft, tpot, itl, e2e, queue;
    int64_t output_tokens = 0, prompt_tokens = 0;
    int in_flight = 0, finished = 0;
    auto on_delta = [&](const engine::Delta& d) {
        if (!d.request_done) return;
        std::lock_guard lock(mutex);
        --in_flight;
        ++finished;
        if (d.finish_reason == engine::FinishReason::error) std::fprintf(stderr, "request failed: %s\n", d.error.c_str());
        ttft.push_back(d.timings.ttft);
        e2e.push_back(d.timings.e2e);
        queue.push_back(d.timings.queue);
        itl.insert(itl.end(), d.timings.inter_token.begin(), d.timings.inter_token.end());
        if (d.usage.completion_tokens > 1)
            tpot.push_back((d.timings.e2e - d.timings.ttft) / double(d.usage.completion_tokens - 1));
        output_tokens += d.usage.completion_tokens;
        prompt_tokens += d.usage.prompt_tokens;
        cv.notify_all();
    };

    const auto start = engine::Clock::now();
    std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
    double next_arrival = 0;
    size_t next = 0;
    while (next < reqs.size()) {
        std::unique_lock lock(mutex);
        if (o.static_batching) {
            cv.wait(lock, [&] { return in_flight == 0; });
            size_t end = std::min(reqs.size(), next + size_t(concurrency));
            for (; next < end; ++next, ++in_flight) eng.submit(reqs[next], on_delta);
            continue;
        }
        if (rate > 0) {
            auto due = start + std::chrono::duration_cast<engine::Clock::duration>(std::chrono::duration<double>(next_arrival));
            lock.unlock();
            std::this_thread::sleep_until(due);
            lock.lock();
        }
        cv.wait(lock, [&] { return in_flight < concurrency; });
        ++in_flight;
        lock.unlock();
        eng.submit(reqs[next++], on_delta);
        next_arrival += rate > 0 ? gap(rng) : 0;
        auto s = eng.stats();
        peak_kv = std::max(peak_kv, s.kv_usage);
    }
    {
        std::unique_lock lock(mutex);
        while (finished < o.requests) {
            cv.wait_for(lock, std::chrono::milliseconds(20));
            peak_kv = std::max(peak_kv, eng.stats().kv_usage);
        }
    }
    const double seconds = std::chrono::duration<double>(engine::Clock::now() - start).count();
    auto s = eng.stats();
    eng.shutdown(true);

    std::printf("model %s | %d requests, concurrency %d, rate %s, %s batching | prompt %s, output %s, shared prefix %.2f\n",
                o.model.c_str(), o.requests, concurrency, o.rate.c_str(), o.static_batching ? "static" : "continuous",
                o.prompt_len.c_str(), o.output_len.c_str(), o.shared_prefix);
    std::printf("duration %.2f s | %.2f requests/s | %.1f output tokens/s | %.1f total tokens/s\n", seconds,
                double(o.requests) / seconds, double(output_tokens) / seconds,
                double(output_tokens + prompt_tokens) / seconds);
    report("time to first token", ttft);
    report("time per output token", tpot);
    report("inter-token latency", itl);
    report("queue time", queue);
    report("end-to-end latency", e2e);
    report("decode-only step", decode_steps);
    report("step with prompt", mixed_steps);
    std::printf("prefix cache hit rate %.1f%% | peak KV use %.1f%% of %d blocks | preemptions %lld | steps %lld, "
                "mean %.1f tokens/step\n",
                100.0 * s.prefix_hit_rate(), 100.0 * peak_kv, s.kv_blocks_total, (long long)s.preemptions,
                (long long)s.steps, s.steps ? double(s.step_tokens) / double(s.steps) : 0.0);
    if (o.spec.enabled())
        std::printf("speculation: %lld drafted, %lld accepted (%.1f%%), %.2f output tokens per sequence-step\n",
                    (long long)s.draft_tokens, (long long)s.accepted_draft_tokens,
                    s.draft_tokens ? 100.0 * double(s.accepted_draft_tokens) / double(s.draft_tokens) : 0.0,
                    s.generation_tokens > 0 ? double(s.generation_tokens) / double(s.generation_tokens - s.accepted_draft_tokens) : 0.0);
    if (o.spec.enabled())
        std::printf("drafting: %.2f s of %.2f s in steps; %lld draft-model forwards of %lld token rows\n",
                    s.draft_seconds, s.step_seconds, (long long)s.draft_forwards, (long long)s.draft_fed_tokens);
    if (grammar)
        std::printf("grammar mask: %lld masks, mean %.1f us each, %.3f ms per step = %.1f%% of the step time\n",
                    (long long)s.grammar_masks, s.grammar_masks ? 1e6 * s.grammar_mask_seconds / double(s.grammar_masks) : 0.0,
                    s.steps ? 1e3 * s.grammar_mask_seconds / double(s.steps) : 0.0,
                    s.step_seconds > 0 ? 100.0 * s.grammar_mask_seconds / s.step_seconds : 0.0);
    return 0;
}

CommandRegistration reg("bench-throughput", "Synthetic serving benchmark of the continuous-batching engine",
                        [](CLI::App& sub) {
    auto o = std::make_shared<BenchOptions>();
    sub.add_option("-m,--model", o->model, model::kModelPathHelp)->required();
    sub.add_option("--requests", o->requests, "Number of requests")->check(in_range(1, 1000000));
    sub.add_option("--rate", o->rate, "Arrivals per second (Poisson), or inf: all at once");
    sub.add_option("--prompt-len", o->prompt_len, "Prompt length N or range A:B");
    sub.add_option("--output-len", o->output_len, "Output length N or range A:B");
    sub.add_option("--shared-prefix", o->shared_prefix, "Fraction of each prompt shared by all requests");
    sub.add_option("--concurrency", o->concurrency, "Requests in flight at most (0: unlimited)")->check(in_range(0, 100000));
    sub.add_flag("--static-batching", o->static_batching, "Baseline: submit whole batches and drain each");
    sub.add_option("--seed", o->seed, "Workload seed");
    add_threads_option(sub, o->threads);
    o->compute.add_to(sub);
    sub.add_option("--max-batched-tokens", o->max_batched_tokens, "Tokens per engine step")->check(in_range(1, 1 << 20));
    sub.add_option("--max-seqs", o->max_seqs, "Sequences running at once")->check(in_range(1, 4096));
    o->kv.add_to(sub);
    o->profile.add_to(sub);
    o->tier.add_to(sub);
    o->spec.add_to(sub);  // without --kv-memory: enough for the whole workload
    sub.add_option("--json-schema", o->json_schema, "Constrain every request to this JSON schema (file)");
    sub.add_option("--think-budget", o->think_budget,
                   "With --json-schema: every output starts inside a <think> block (the reasoning prefix grammar) "
                   "that the engine closes after this many tokens")
        ->check(in_range(0, 1 << 20));
    return [o] {
        o->profile.apply(o->model, o->compute, &o->threads, &o->kv.block_size, &o->max_batched_tokens, &o->max_seqs);
        return run_bench(*o);
    };
});

}  // namespace
}  // namespace pagoda::app
