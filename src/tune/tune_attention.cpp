#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>
#include <fmt/format.h>

#include "backend/cpu/attention/attention.h"
#include "core/cpu_features.h"
#include "kv/kv_layout.h"
#include "model/open_step_model.h"
#include "tune/attention_choice.h"
#include "tune/attention_timer.h"
#include "tune/decode_prefetch_choice.h"
#include "tune/step_timer.h"
#include "tune/tune_run.h"

namespace pagoda::tune {

using nlohmann::json;

namespace {

// The attention shapes timed for the method choice: long prompts and decode steps deep into the
// context, each capped by the model's context (shapes that become the same are timed once).
std::vector<AttentionShape> attention_shapes(const model::StepModelInfo& info, bool quick) {
    const int64_t ctx = std::max<int64_t>(1, info.max_context);
    std::vector<AttentionShape> out;
    auto add = [&](int32_t seqs, int64_t tokens, int64_t position, std::string what) {
        for (const auto& s : out)
            if (s.sequences == seqs && s.tokens == tokens && s.position == position) return;
        AttentionShape s;
        s.n_heads = int32_t(info.config.n_heads);
        s.layout = info.kv_layout;
        s.sequences = seqs;
        s.tokens = tokens;
        s.position = position;
        s.what = std::move(what);
        out.push_back(std::move(s));
    };
    for (int64_t n : quick ? std::vector<int64_t>{512} : std::vector<int64_t>{512, 2048}) {
        const int64_t t = std::min(n, ctx);
        add(1, t, t - 1, fmt::format("prefill {} tokens", t));
    }
    const int64_t pos = std::min<int64_t>(1024, ctx - 1);
    add(1, 1, pos, fmt::format("decode 1 sequence at {}", pos));
    add(16, 1, pos, fmt::format("decode 16 sequences at {}", pos));
    return out;
}

// The attention method installed when it was made, put back when it goes (the timings switch it).
struct AttentionMethodRestored {
    std::optional<backend::cpu::AttentionMethod> saved = backend::cpu::installed_attention_method();
    ~AttentionMethodRestored() { backend::cpu::set_attention_method(saved); }
};

// The decode KV prefetch installed when it was made, put back when it goes (the timings switch it).
struct DecodePrefetchRestored {
    bool saved = backend::cpu::decode_kv_prefetch();
    ~DecodePrefetchRestored() { backend::cpu::set_decode_kv_prefetch(saved); }
};

// Why the attention method is not measured here ("" where it is): first the machine (info null),
// then the model.
std::string attention_not_measured(const model::StepModelInfo* info) {
    if (!backend::cpu::amx_attention_runs_here())
        return active_isa() != Isa::avx512
                   ? fmt::format("the active ISA is {}: AMX bf16 attention runs on the avx512 path", isa_name(active_isa()))
                   : "AMX bf16 tiles do not run here: " + amx_bf16_status();
    if (backend::cpu::attention_method_in_environment())
        return fmt::format("PAGODA_ATTENTION={} pins the method", std::getenv("PAGODA_ATTENTION"));
    if (!info) return "";
    if (!info->plain_attention) return "the model's attention has a sliding window, a soft cap, sinks or ALiBi, which amx_bf16 does not take";
    // The kernel's own rule for the cache types it takes (attention.h), asked with amx_bf16 installed.
    const AttentionMethodRestored restored;
    backend::cpu::set_attention_method(backend::cpu::AttentionMethod::amx_bf16);
    if (!backend::cpu::amx_attention_applies(info->kv_layout.dtype, 0, 0.0f))
        return fmt::format("amx_bf16 attention does not take the model's {} KV cache", kv::kv_dtype_name(info->kv_layout.dtype));
    return "";
}

}  // namespace

size_t attention_steps(bool quick) {
    // One step per shape timed where AMX bf16 attention runs, else one to say why not.
    return attention_not_measured(nullptr).empty() ? (quick ? 3 : 4) : 1;
}

// The attention method, one per process like a type's matmul method: where amx_bf16 could serve
// this model, paged attention of its shape timed under each method on the same cache.
void tune_attention_method(TuneRun& run) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    const auto& file = run.file;
    std::string why = attention_not_measured(nullptr);
    std::optional<model::StepModelInfo> info;
    if (why.empty()) {
        // The model's heads, KV type, context and attention kinds, without packing its weights.
        model::StepModelOptions so;
        so.backend = "reference";
        so.threads = 1;
        so.kv.prefix_caching = false;
        so.tokens_wanted = 16;
        so.max_step_tokens = 1;
        info = model::open_step_model(file, so)->info();
        why = attention_not_measured(&*info);
    }
    if (!why.empty()) {
        run.step("attention method: simd, not measured (" + why + ")");
        run.skip(attention_steps(o.quick) - 1);
        p.measurements["attention"] = {{"measured", false}, {"why", why}};
    } else {
        const AttentionMethodRestored restored;
        const auto shapes = attention_shapes(*info, o.quick);
        std::vector<AttentionTiming> timings;
        json cases_j = json::array();
        bool amx_taken = true;
        for (const auto& shape : shapes) {
            run.step(fmt::format("attention, {}: simd against amx_bf16", shape.what));
            AttentionBench bench(shape, run.pool);
            backend::cpu::set_attention_method(backend::cpu::AttentionMethod::simd);
            const double simd = bench.time(run.pool, run.min_seconds);
            backend::cpu::set_attention_method(backend::cpu::AttentionMethod::amx_bf16);
            const uint64_t before = backend::cpu::amx_attention_dispatch_count();
            const double amx = bench.time(run.pool, run.min_seconds);
            amx_taken = amx_taken && backend::cpu::amx_attention_dispatch_count() > before;
            // (query token, key) pairs: a prompt's token i sees i + 1 keys; a decode token its position + 1.
            const bool decode = shape.tokens == 1;
            const double pairs = decode ? double(shape.sequences) * double(shape.position + 1)
                                        : double(shape.tokens) * double(shape.tokens + 1) / 2;
            timings.push_back({shape.what, decode, pairs, simd, amx});
            cases_j.push_back({{"case", shape.what}, {"sequences", shape.sequences}, {"tokens", shape.tokens},
                               {"position", shape.position}, {"simd_seconds", simd}, {"amx_bf16_seconds", amx}});
        }
        run.skip(attention_steps(o.quick) - shapes.size());
        json attention_j = {{"kv_dtype", kv::kv_dtype_name(info->kv_layout.dtype)},
                            {"n_heads", info->config.n_heads},
                            {"n_kv_heads", info->kv_layout.n_kv_heads},
                            {"head_dim", info->kv_layout.head_dim},
                            {"cases", cases_j}};
        if (!amx_taken) {
            // Both timings were of the simd walk: nothing to choose from, so nothing is written.
            attention_j["measured"] = false;
            attention_j["why"] = "paged attention under amx_bf16 took the simd walk (amx_attention_applies was false)";
        } else {
            const AttentionChoice c = choose_attention_method(timings, o.workload);
            p.plan.attention = c.method;
            attention_j["modelled_request_seconds"] = {{"simd", c.simd_seconds}, {"amx_bf16", c.amx_seconds}};
            attention_j["chosen"] = backend::cpu::attention_method_name(c.method);
            attention_j["rule"] =
                "the lower modelled attention time of one request of the workload (its prompt and decode "
                "query-key pairs times each method's time per pair on the prompt and on the decode cases); simd on a tie";
        }
        p.measurements["attention"] = attention_j;
    }
}

// Whether decode attention requests its next K and V rows ahead: whole decode steps at a long
// context and at the workload's, with and without, in alternating rounds (best of each).
void tune_decode_prefetch(TuneRun& run) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    const int step_reps = run.step_reps;
    if (backend::cpu::decode_kv_prefetch_in_environment()) {
        run.step("decode KV prefetch: not measured (PAGODA_DECODE_PREFETCH pins it)");
        run.skip(kDecodePrefetchSteps - 1);
        p.measurements["decode_kv_prefetch"] = {{"measured", false}, {"why", "PAGODA_DECODE_PREFETCH pins it"}};
    } else {
        const DecodePrefetchRestored restored;
        const int32_t bs = kv::kDefaultBlockSize;
        const std::vector<int32_t> batches = {1, o.quick ? 4 : 8};
        auto m = run.open(p.threads, 64, int64_t(batches.back()) * (1024 + step_reps + 2 + bs) + 2 * bs, bs);
        const int64_t room = std::max<int64_t>(1, m->info().max_context - step_reps - 2);
        const int64_t long_ctx = std::min<int64_t>(1024, room);
        const int64_t work_ctx =
            std::clamp<int64_t>(int64_t(o.workload.prompt_tokens + o.workload.output_tokens / 2), 1, room);
        std::vector<DecodePrefetchTiming> timings;
        json cases_j = json::array();
        for (const int64_t ctx : {long_ctx, work_ctx})
            for (const int32_t b : batches) {
                const std::string what = fmt::format("{} sequence{} at {}", b, b == 1 ? "" : "s", ctx);
                run.step("decode KV prefetch, " + what + ": off against on");
                double off = 1e300, on = 1e300;
                for (int round = 0; round < (o.quick ? 2 : 4); ++round)
                    for (const bool ahead : {round % 2 == 1, round % 2 == 0}) {  // off first, then on first
                        backend::cpu::set_decode_kv_prefetch(ahead);
                        double& best = ahead ? on : off;
                        best = std::min(best, time_step(*m, {b, ctx, 0}, step_reps));
                    }
                timings.push_back({what, ctx == long_ctx, off, on});
                cases_j.push_back({{"case", what}, {"sequences", b}, {"context", ctx}, {"long_context", ctx == long_ctx},
                                   {"off_seconds", off}, {"on_seconds", on}});
            }
        const DecodePrefetchChoice c = choose_decode_prefetch(timings);
        p.plan.decode_kv_prefetch = c.on;
        p.measurements["decode_kv_prefetch"] = {
            {"attention", backend::cpu::attention_method_name(backend::cpu::attention_method())},
            {"cases", cases_j},
            {"long_context_on_over_off", c.long_ratio},
            {"workload_on_over_off", c.workload_ratio},
            {"chosen", c.on},
            {"rule", fmt::format("on where the long-context steps are at least {:.0f} % faster with it and the "
                                 "workload's at most {:.0f} % slower (summed over the batch sizes)",
                                 kDecodePrefetchMinGain * 100, kDecodePrefetchMaxLoss * 100)}};
    }
}

}  // namespace pagoda::tune
