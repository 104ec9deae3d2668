#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>
#include <fmt/format.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/kernel_plan.h"
#include "backend/cpu/matmul.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/machine_limits.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "kv/kv_layout.h"
#include "model/model_file.h"
#include "model/model_identity.h"
#include "model/open_step_model.h"
#include "tune/amx_threshold.h"
#include "tune/attention_choice.h"
#include "tune/attention_timer.h"
#include "tune/decode_prefetch_choice.h"
#include "tune/knob_check.h"
#include "tune/machine_identity.h"
#include "tune/step_timer.h"

namespace pagoda::tune {

using gguf::GgmlType;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
    kernels::WeightView view;
    int count = 0;  // layers with this shape
};

// The matmuls a step runs for every token: the layers' 2-D weights, one instance per distinct
// (type, rows, cols), weighted by how many there are. The output head multiplies only the rows that
// want logits, so it is left out (its type, if no layer has it, keeps the default).
std::map<GgmlType, std::vector<Shape>> layer_shapes(const gguf::File& file) {
    std::map<GgmlType, std::vector<Shape>> out;
    for (const auto& t : file.tensors()) {
        if (t.shape.size() != 2 || t.name.rfind("blk.", 0) != 0 || !kernels::matmul_supports(t.type)) continue;
        if (t.shape[1] < 2) continue;  // vectors stored as [n, 1]
        auto& shapes = out[t.type];
        auto it = std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) {
            return s.view.rows == t.shape[1] && s.view.cols == t.shape[0];
        });
        if (it != shapes.end()) {
            ++it->count;
            continue;
        }
        shapes.push_back({kernels::WeightView{t.type, t.data, t.shape[1], t.shape[0]}, 1});
    }
    return out;
}

bool reads_view(kernels::PathMethod m) { return m == kernels::PathMethod::dequant_fma || m == kernels::PathMethod::f32_fma; }

// Seconds per call: the minimum over repetitions (after a warm-up) lasting at least min_seconds.
double time_matmul(const kernels::PackedWeight& w, const std::vector<float>& x, int64_t n, std::vector<float>& y,
                   ThreadPool& pool, double min_seconds) {
    y.resize(size_t(n * w.source().rows));
    kernels::matmul(w, x.data(), n, y.data(), pool);
    double best = 1e300, total = 0;
    for (int r = 0; r < 200 && (r < 2 || total < min_seconds); ++r) {
        const auto start = Clock::now();
        kernels::matmul(w, x.data(), n, y.data(), pool);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        best = std::min(best, s);
        total += s;
    }
    return best;
}

struct TypeBench {
    std::vector<kernels::PackedWeight> weights;  // one per shape, packed for the method
    std::vector<int> counts;
};

TypeBench prepare(const std::vector<Shape>& shapes, kernels::PathMethod method) {
    TypeBench b;
    const kernels::ScopedKernelChoice scope({method, kernels::gemm_tiles()});
    for (const auto& s : shapes) {
        b.weights.push_back(reads_view(method) ? kernels::keep_views(std::span(&s.view, 1)) : kernels::pack_weight(s.view));
        b.counts.push_back(s.count);
    }
    return b;
}

// One step's matmuls of this type at n tokens, in seconds.
double time_type(const TypeBench& b, kernels::PathMethod method, const kernels::GemmTiles& tiles, int64_t n,
                 ThreadPool& pool, double min_seconds, int64_t amx_min_tokens = kernels::kDefaultAmxMinTokens,
                 int64_t wide_min_tokens = kernels::kDefaultWideMinTokens) {
    const kernels::ScopedKernelChoice scope({method, tiles, amx_min_tokens, wide_min_tokens});
    std::mt19937 rng(1234);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> x, y;
    double total = 0;
    for (size_t i = 0; i < b.weights.size(); ++i) {
        const int64_t cols = b.weights[i].source().cols;
        x.resize(size_t(n * cols));
        for (auto& v : x) v = dist(rng);
        total += b.counts[i] * time_matmul(b.weights[i], x, n, y, pool, min_seconds);
    }
    return total;
}

json tiles_json(const kernels::GemmTiles& t) { return {{"kc", t.kc}, {"mc", t.mc}, {"nc", t.nc}}; }

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
    std::optional<kernels::AttentionMethod> saved = kernels::installed_attention_method();
    ~AttentionMethodRestored() { kernels::set_attention_method(saved); }
};

// The decode KV prefetch installed when it was made, put back when it goes (the timings switch it).
struct DecodePrefetchRestored {
    bool saved = kernels::decode_kv_prefetch();
    ~DecodePrefetchRestored() { kernels::set_decode_kv_prefetch(saved); }
};

// Why the attention method is not measured here ("" where it is): first the machine (info null),
// then the model.
std::string attention_not_measured(const model::StepModelInfo* info) {
    if (!kernels::amx_attention_runs_here())
        return active_isa() != Isa::avx512
                   ? fmt::format("the active ISA is {}: AMX bf16 attention runs on the avx512 path", isa_name(active_isa()))
                   : "AMX bf16 tiles do not run here: " + amx_bf16_status();
    if (kernels::attention_method_in_environment())
        return fmt::format("PAGODA_ATTENTION={} pins the method", std::getenv("PAGODA_ATTENTION"));
    if (!info) return "";
    if (!info->plain_attention) return "the model's attention has a sliding window or a soft cap, which amx_bf16 does not take";
    // The kernel's own rule for the cache types it takes (attention.h), asked with amx_bf16 installed.
    const AttentionMethodRestored restored;
    kernels::set_attention_method(kernels::AttentionMethod::amx_bf16);
    if (!kernels::amx_attention_applies(info->kv_layout.dtype, 0, 0.0f))
        return fmt::format("amx_bf16 attention does not take the model's {} KV cache", kv::kv_dtype_name(info->kv_layout.dtype));
    return "";
}


struct RangeSpec {
    int64_t max_tokens;
    std::vector<int64_t> counts;  // measured token counts standing for the range
    std::string name;
};

}  // namespace

Profile tune_model(const TuneOptions& o, const TuneProgress& progress) {
    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model);
    Profile p;
    p.machine = current_machine();
    p.model_path = o.model;
    p.model_identity = model::model_identity(*file);
    p.scheduler.target_itl_ms = o.target_itl_ms;
    const int cores = o.max_threads > 0 ? o.max_threads : default_thread_count();
    const double min_s = o.quick ? 0.002 : 0.03;
    const int step_reps = o.quick ? 2 : 6;
    const std::vector<int64_t> counts = o.quick ? std::vector<int64_t>{1, 4, 64} : std::vector<int64_t>{1, 4, 16, 64, 512};
    const std::vector<RangeSpec> ranges =
        o.quick ? std::vector<RangeSpec>{{1, {1}, "1"}, {8, {4}, "2-8"}, {INT64_MAX, {64}, "9+"}}
                : std::vector<RangeSpec>{{1, {1}, "1"}, {8, {4}, "2-8"}, {64, {16, 64}, "9-64"}, {INT64_MAX, {512}, "65+"}};

    const auto shapes = layer_shapes(*file);
    if (shapes.empty()) fail("tune: {} has no layer weights to measure (blk.N.* matrices)", o.model);
    std::map<GgmlType, std::vector<kernels::PathMethod>> candidates;
    size_t total_steps = 1 + size_t(cores) + 2;
    // AMX tiles are measured only where they run (and only for types that end up on int8_dot).
    const bool amx_here = [] {
        const kernels::ScopedKernelChoice scope({kernels::PathMethod::int8_dot, kernels::gemm_tiles()});
        return kernels::amx_path_available();
    }();
    const std::vector<int64_t> amx_counts = o.quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{16, 32, 64, 128, 512};
    auto listed = [&](kernels::PathMethod m) { return std::find(o.methods.begin(), o.methods.end(), m) != o.methods.end(); };
    for (const auto& [type, s] : shapes) {
        for (auto m : kernels::kPathMethods)
            if (kernels::method_applies(m, type) && kernels::method_runs_here(m)) candidates[type].push_back(m);
        if (std::any_of(candidates[type].begin(), candidates[type].end(), listed))
            std::erase_if(candidates[type], [&](kernels::PathMethod m) { return !listed(m); });
        total_steps += candidates[type].size() + 1 + (amx_here && kernels::amx_applies(kernels::PathMethod::int8_dot, type));
    }
    std::vector<int32_t> decode_points = o.quick ? std::vector<int32_t>{1, 4, 16} : std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64};
    std::vector<int64_t> prefill_points =
        o.quick ? std::vector<int64_t>{1, 16, 64, 128} : std::vector<int64_t>{1, 16, 64, 128, 256, 512, 1024, 2048};
    total_steps += decode_points.size() + prefill_points.size() + 1 + (o.quick ? 2 : 3 + 4);
    // The attention method: one step per shape timed where AMX bf16 attention runs, else one to say why not.
    const size_t attention_steps = attention_not_measured(nullptr).empty() ? (o.quick ? 3 : 4) : 1;
    total_steps += attention_steps;
    const size_t decode_prefetch_steps = 4;  // 2 contexts x 2 batch sizes (one step to say why not)
    total_steps += decode_prefetch_steps;
    size_t done = 0;
    auto step = [&](const std::string& what) { progress(done++, total_steps, what); };

    // 1. The machine.
    ThreadPool pool(cores);
    step("machine limits (bandwidth, fp32 / int8 / bf16 / AMX peaks)");
    MachineLimits limits;
    // A 256 MiB buffer still exceeds the last-level caches; faulting in 1 GiB is most of a quick run.
    const ReadScratch scratch(size_t(o.quick ? 256 : 1024) << 20);
    const std::span<const uint8_t> scratch_bytes = scratch.bytes();
    const ReadBandwidth read = measure_best_read_bandwidth(pool, std::span(&scratch_bytes, 1));
    limits.read_gbps = read.gbps;
    limits.fp32_gflops = measure_fp32_fma_peak(pool);
    limits.int8_gops = measure_int8_dot_peak(pool);
    limits.bf16_gflops = measure_bf16_dot_peak(pool);
    limits.amx_int8_gops = measure_amx_int8_peak(pool);
    limits.amx_bf16_gflops = measure_amx_bf16_peak(pool);
    json read_by_pattern = json::object();
    const auto patterns = read_patterns();
    for (size_t i = 0; i < patterns.size() && i < read.by_pattern.size(); ++i)
        read_by_pattern[patterns[i].name()] = read.by_pattern[i];
    p.measurements["machine_limits"] = {{"read_gbps", limits.read_gbps},
                                        {"read_pattern", read.pattern.name()},
                                        {"read_gbps_by_pattern", read_by_pattern},
                                        {"fp32_gflops", limits.fp32_gflops},
                                        {"int8_gops", limits.int8_gops},
                                        {"bf16_gflops", limits.bf16_gflops},
                                        {"amx_int8_gops", limits.amx_int8_gops},
                                        {"amx_bf16_gflops", limits.amx_bf16_gflops},
                                        {"threads", cores},
                                        {"isa", isa_name(active_isa())}};

    // 2. Methods and tiles per weight type.
    json matmul_j = json::object(), tiles_j = json::object(), amx_j = json::object(), wide_j = json::object();
    for (const auto& [type, type_shapes] : shapes) {
        const std::string tname = gguf::type_name(uint32_t(type));
        json shapes_j = json::array();
        for (const auto& s : type_shapes) shapes_j.push_back({{"rows", s.view.rows}, {"cols", s.view.cols}, {"count", s.count}});
        std::map<kernels::PathMethod, std::map<int64_t, double>> seconds;
        std::map<kernels::PathMethod, TypeBench> benches;
        for (auto m : candidates[type]) {
            step(fmt::format("{} matmuls, {}", tname, kernels::path_method_name(m)));
            benches[m] = prepare(type_shapes, m);
            for (int64_t n : counts) seconds[m][n] = time_type(benches[m], m, kernels::GemmTiles{}, n, pool, min_s);
        }
        // One method for every token count: the lowest sum of time relative to the best at each count.
        kernels::PathMethod best = candidates[type].front();
        double best_score = 1e300;
        json methods_j = json::object();
        for (auto m : candidates[type]) {
            double score = 0;
            json per_n = json::object();
            for (int64_t n : counts) {
                double fastest = 1e300;
                for (auto& [m2, s2] : seconds) fastest = std::min(fastest, s2[n]);
                score += seconds[m][n] / fastest;
                per_n[std::to_string(n)] = seconds[m][n];
            }
            methods_j[kernels::path_method_name(m)] = {{"seconds_per_step", per_n}, {"relative_score", score}};
            if (score < best_score) best_score = score, best = m;
        }
        matmul_j[tname] = {{"shapes", shapes_j}, {"methods", methods_j}, {"chosen", kernels::path_method_name(best)}};
        for (auto& [m, b] : benches)
            if (m != best) b = TypeBench{};  // free the other layouts before the tile search

        // Tiles per range, coordinate search from the defaults.
        step(fmt::format("{} GEMM tiles per token range", tname));
        kernels::TypePlan plan{type, best, {}};
        json ranges_j = json::array();
        const std::vector<int64_t> kcs = o.quick ? std::vector<int64_t>{256, 1024} : std::vector<int64_t>{256, 1024, 2048};
        const std::vector<int64_t> mcs = o.quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{16, 64, 128};
        const std::vector<int64_t> ncs = o.quick ? std::vector<int64_t>{32, 128} : std::vector<int64_t>{16, 32, 128, 256};
        for (const auto& r : ranges) {
            auto cost = [&](const kernels::GemmTiles& t) {
                double c = 0;
                for (int64_t n : r.counts) c += time_type(benches[best], best, t, n, pool, min_s);
                return c;
            };
            const kernels::GemmTiles defaults{};
            const double base = cost(defaults);
            kernels::GemmTiles cur = defaults;
            double cur_cost = base;
            for (int dim = 0; dim < 3; ++dim) {
                for (int64_t v : dim == 0 ? kcs : dim == 1 ? mcs : ncs) {
                    kernels::GemmTiles t = cur;
                    (dim == 0 ? t.kc : dim == 1 ? t.mc : t.nc) = v;
                    const double c = cost(t);
                    if (c < cur_cost) cur_cost = c, cur = t;
                }
            }
            const bool kept = cur_cost < 0.97 * base;
            plan.ranges.push_back({r.max_tokens, kept ? cur : defaults});
            ranges_j.push_back({{"range", r.name},
                                {"tokens", r.counts},
                                {"default_seconds", base},
                                {"best", tiles_json(cur)},
                                {"best_seconds", cur_cost},
                                {"kept", kept}});
        }
        tiles_j[tname] = ranges_j;

        // The type's step matmuls at each count under two (AMX, wide-kernel) thresholds, which give
        // the same bits: each count with its range's tiles, each pair of timings recorded under its keys.
        auto time_two_paths = [&](const std::vector<int64_t>& path_counts, std::pair<int64_t, int64_t> base,
                                  std::pair<int64_t, int64_t> alt, const char* base_key, const char* alt_key, json& out) {
            std::vector<AmxTiming> timings;
            for (int64_t n : path_counts) {
                kernels::GemmTiles t = kernels::GemmTiles{};
                for (const auto& r : plan.ranges)
                    if (n <= r.max_tokens) {
                        t = r.tiles;
                        break;
                    }
                const AmxTiming timing{n, time_type(benches[best], best, t, n, pool, min_s, base.first, base.second),
                                       time_type(benches[best], best, t, n, pool, min_s, alt.first, alt.second)};
                timings.push_back(timing);
                out.push_back({{"tokens", n}, {base_key, timing.vnni_seconds}, {alt_key, timing.amx_seconds}});
            }
            return timings;
        };
        // The AMX threshold: the type's matmuls with the VNNI panels against AMX tiles (the same
        // bits), each count with its range's tiles.
        if (amx_here && kernels::amx_applies(best, type)) {
            step(fmt::format("{} matmuls, AMX int8 tiles against VNNI", tname));
            json amx_t = json::array();
            const auto timings = time_two_paths(amx_counts, {kAmxNever, kernels::kDefaultWideMinTokens},
                                                {1, kernels::kDefaultWideMinTokens}, "vnni_seconds", "amx_seconds", amx_t);
            plan.amx_min_tokens = choose_amx_min_tokens(timings);
            amx_j[tname] = {{"timings", amx_t}, {"amx_min_tokens", *plan.amx_min_tokens}};
        }
        // The wide prefill kernel of the AVX-512 VNNI panels against the narrow one (the same bits),
        // AMX tiles off for both, each count with its range's tiles.
        if (kernels::vnni_panels_active() && kernels::amx_applies(best, type)) {
            step(fmt::format("{} matmuls, wide prefill kernel against narrow", tname));
            json wide_t = json::array();
            const auto timings = time_two_paths({17, 32, 64, 128}, {kAmxNever, kAmxNever},
                                                {kAmxNever, kernels::kDefaultWideMinTokens}, "narrow_seconds", "wide_seconds", wide_t);
            plan.wide_min_tokens = choose_wide_min_tokens(timings);
            wide_j[tname] = {{"timings", wide_t}, {"wide_min_tokens", *plan.wide_min_tokens}};
        }
        p.plan.types.push_back(std::move(plan));
    }
    p.measurements["matmul"] = matmul_j;
    p.measurements["tiles"] = tiles_j;
    if (!wide_j.empty()) {
        wide_j["rule"] = "the smallest count from which the wide kernel is faster at every larger count measured, at least 17";
        p.measurements["wide_prefill"] = wide_j;
    } else {
        p.measurements["wide_prefill"] = {{"measured", false}, {"why", "no AVX-512 VNNI panel path, or no packed int8 type, here"}};
    }
    if (amx_here) {
        amx_j["rule"] = "the smallest count from which AMX tiles are faster at every larger count measured";
        p.measurements["amx"] = amx_j;
    } else {
        const std::string why = amx_available() ? "the packed int8 path is not active (PAGODA_ISA)" : amx_status();
        p.measurements["amx"] = {{"measured", false}, {"why", "AMX int8 tiles do not run here: " + why}};
    }

    // 2b. The attention method, one per process like a type's matmul method: where amx_bf16 could
    // serve this model, paged attention of its shape timed under each method on the same cache.
    {
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
            step("attention method: simd, not measured (" + why + ")");
            done += attention_steps - 1;
            p.measurements["attention"] = {{"measured", false}, {"why", why}};
        } else {
            const AttentionMethodRestored restored;
            const auto shapes = attention_shapes(*info, o.quick);
            std::vector<AttentionTiming> timings;
            json cases_j = json::array();
            bool amx_taken = true;
            for (const auto& shape : shapes) {
                step(fmt::format("attention, {}: simd against amx_bf16", shape.what));
                AttentionBench bench(shape, pool);
                kernels::set_attention_method(kernels::AttentionMethod::simd);
                const double simd = bench.time(pool, min_s);
                kernels::set_attention_method(kernels::AttentionMethod::amx_bf16);
                const uint64_t before = kernels::amx_attention_dispatch_count();
                const double amx = bench.time(pool, min_s);
                amx_taken = amx_taken && kernels::amx_attention_dispatch_count() > before;
                // (query token, key) pairs: a prompt's token i sees i + 1 keys; a decode token its position + 1.
                const bool decode = shape.tokens == 1;
                const double pairs = decode ? double(shape.sequences) * double(shape.position + 1)
                                            : double(shape.tokens) * double(shape.tokens + 1) / 2;
                timings.push_back({shape.what, decode, pairs, simd, amx});
                cases_j.push_back({{"case", shape.what}, {"sequences", shape.sequences}, {"tokens", shape.tokens},
                                   {"position", shape.position}, {"simd_seconds", simd}, {"amx_bf16_seconds", amx}});
            }
            done += attention_steps - shapes.size();
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
                attention_j["chosen"] = kernels::attention_method_name(c.method);
                attention_j["rule"] =
                    "the lower modelled attention time of one request of the workload (its prompt and decode "
                    "query-key pairs times each method's time per pair on the prompt and on the decode cases); simd on a tie";
            }
            p.measurements["attention"] = attention_j;
        }
    }
    kernels::set_kernel_plan(p.plan);  // what the steps below run with (matmul methods, tiles, attention method)

    // 3. Threads, through the real step model.
    auto open = [&](int threads, int64_t max_step, int64_t tokens_wanted, int32_t block_size) {
        model::StepModelOptions so;
        so.threads = threads;
        so.kv.block_size = block_size;
        so.kv.prefix_caching = false;
        so.tokens_wanted = tokens_wanted;
        so.max_step_tokens = max_step;
        return model::open_step_model(file, so);
    };
    json threads_j = json::array();
    std::vector<std::pair<double, double>> per_thread;
    for (int t = 1; t <= cores; ++t) {
        step(fmt::format("threads: {} of {}", t, cores));
        auto m = open(t, 64, 64 + 64 + 64 + step_reps + 32, kv::kDefaultBlockSize);
        const int64_t ctx = std::min<int64_t>(64, m->info().max_context / 2);
        const int64_t chunk = std::min<int64_t>(64, m->info().max_context);
        const double d = time_step(*m, {1, ctx, 0}, step_reps + 2), pf = time_step(*m, {0, 0, chunk}, step_reps);
        per_thread.emplace_back(d, pf);
        threads_j.push_back({{"threads", t}, {"decode_step_s", d}, {"prompt64_step_s", pf}});
    }
    double best_d = 1e300, best_p = 1e300;
    for (auto [d, pf] : per_thread) best_d = std::min(best_d, d), best_p = std::min(best_p, pf);
    double best_score = 1e300;
    for (int t = 1; t <= cores; ++t) {
        const double score = per_thread[size_t(t - 1)].first / best_d + per_thread[size_t(t - 1)].second / best_p;
        if (score < best_score - 1e-9) best_score = score, p.threads = t;
    }
    p.measurements["threads"] = threads_j;

    // 3b. Whether decode attention requests its next K and V rows ahead: whole decode steps at a
    // long context and at the workload's, with and without, in alternating rounds (best of each).
    if (kernels::decode_kv_prefetch_in_environment()) {
        step("decode KV prefetch: not measured (PAGODA_DECODE_PREFETCH pins it)");
        done += decode_prefetch_steps - 1;
        p.measurements["decode_kv_prefetch"] = {{"measured", false}, {"why", "PAGODA_DECODE_PREFETCH pins it"}};
    } else {
        const DecodePrefetchRestored restored;
        const int32_t bs = kv::kDefaultBlockSize;
        const std::vector<int32_t> batches = {1, o.quick ? 4 : 8};
        auto m = open(p.threads, 64, int64_t(batches.back()) * (1024 + step_reps + 2 + bs) + 2 * bs, bs);
        const int64_t room = std::max<int64_t>(1, m->info().max_context - step_reps - 2);
        const int64_t long_ctx = std::min<int64_t>(1024, room);
        const int64_t work_ctx =
            std::clamp<int64_t>(int64_t(o.workload.prompt_tokens + o.workload.output_tokens / 2), 1, room);
        std::vector<DecodePrefetchTiming> timings;
        json cases_j = json::array();
        for (const int64_t ctx : {long_ctx, work_ctx})
            for (const int32_t b : batches) {
                const std::string what = fmt::format("{} sequence{} at {}", b, b == 1 ? "" : "s", ctx);
                step("decode KV prefetch, " + what + ": off against on");
                double off = 1e300, on = 1e300;
                for (int round = 0; round < (o.quick ? 2 : 4); ++round)
                    for (const bool ahead : {round % 2 == 1, round % 2 == 0}) {  // off first, then on first
                        kernels::set_decode_kv_prefetch(ahead);
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
            {"attention", kernels::attention_method_name(kernels::attention_method())},
            {"cases", cases_j},
            {"long_context_on_over_off", c.long_ratio},
            {"workload_on_over_off", c.workload_ratio},
            {"chosen", c.on},
            {"rule", fmt::format("on where the long-context steps are at least {:.0f} % faster with it and the "
                                 "workload's at most {:.0f} % slower (summed over the batch sizes)",
                                 kDecodePrefetchMinGain * 100, kDecodePrefetchMaxLoss * 100)}};
    }
    kernels::set_kernel_plan(p.plan);  // the steps below run with the choice

    // 4. Step time against decode batch size and prompt tokens per step.
    const int64_t decode_ctx = o.quick ? 32 : 128;
    const int32_t max_b = decode_points.back();
    const int64_t max_c = prefill_points.back();
    const int32_t bs = kv::kDefaultBlockSize;
    const int64_t wanted = int64_t(max_b) * (decode_ctx + step_reps + 2 + bs) + max_c + 2 * bs;
    auto m = open(p.threads, std::max<int64_t>(max_c, max_b + max_c / 2), wanted, bs);
    const int64_t ctx_limit = m->info().max_context;
    StepCurves curves;
    json decode_j = json::array(), prefill_j = json::array();
    for (int32_t b : decode_points) {
        step(fmt::format("decode step, {} sequences", b));
        const double s = time_step(*m, {b, std::min(decode_ctx, ctx_limit - step_reps - 2), 0}, step_reps + 2);
        curves.decode.points.emplace_back(double(b), s);
        decode_j.push_back({b, s});
    }
    for (int64_t c : prefill_points) {
        step(fmt::format("prompt step, {} tokens", c));
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
        step("step time jitter");
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

    // 5. KV block size.
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
            step(fmt::format("KV block size {}", size));
            models[size] = open(p.threads, 64, 16 * (ctx + 3 * (step_reps + 2) + size) + 2 * size, size);
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

    // 6. Scheduler knobs.
    step("scheduler knobs");
    KnobCandidates cand;
    // Steps of half powers of two between the powers: a latency target usually falls between two
    // powers, and the check below then lands on the largest setting that meets it, not the power under.
    // Budgets from 2: on a slow host (Zen 1, F16) a step of 2 decodes beside a 2-token chunk is what
    // meets 50 ms.
    cand.max_batched_tokens = {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048};
    cand.max_seqs = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    cand.max_batched_tokens.erase(std::remove_if(cand.max_batched_tokens.begin(), cand.max_batched_tokens.end(),
                                                 [&](int64_t v) { return v > std::max<int64_t>(max_c, 64); }),
                                  cand.max_batched_tokens.end());
    KnobCheckSetup setup{o, curves, cand, p.threads, p.kv_block_size, decode_ctx, ctx_limit, open,
                         [&](const std::string& what) { step(what); }};
    json check_j;
    const KnobChoice k = choose_and_check_knobs(setup, check_j);
    p.measurements["scheduler_check"] = check_j;
    p.scheduler.max_batched_tokens = k.max_batched_tokens;
    p.scheduler.max_seqs = k.max_seqs;
    p.scheduler.modelled_p99_itl_ms = k.p99_itl_s * 1000.0;
    p.scheduler.modelled_tokens_per_s = k.tokens_per_s;
    p.scheduler.target_met = k.target_met;
    p.measurements["workload"] = {{"prompt_tokens", o.workload.prompt_tokens},
                                  {"output_tokens", o.workload.output_tokens},
                                  {"concurrency", o.workload.concurrency}};
    progress(total_steps, total_steps, "done");
    return p;
}

}  // namespace pagoda::tune
