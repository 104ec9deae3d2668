#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>
#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/error.h"
#include "tune/amx_threshold.h"
#include "tune/tune_run.h"

namespace pagoda::tune {

using gguf::GgmlType;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The matmuls a step runs for every token: the layers' 2-D weights, one instance per distinct
// (type, rows, cols), weighted by how many there are. The output head multiplies only the rows that
// want logits, so it is left out (its type, if no layer has it, keeps the default).
std::map<GgmlType, std::vector<LayerShape>> layer_shapes(const gguf::File& file) {
    std::map<GgmlType, std::vector<LayerShape>> out;
    for (const auto& t : file.tensors()) {
        if (t.shape.size() != 2 || t.name.rfind("blk.", 0) != 0 || !backend::cpu::matmul_supports(t.type)) continue;
        if (t.shape[1] < 2) continue;  // vectors stored as [n, 1]
        auto& shapes = out[t.type];
        auto it = std::find_if(shapes.begin(), shapes.end(), [&](const LayerShape& s) {
            return s.view.rows == t.shape[1] && s.view.cols == t.shape[0];
        });
        if (it != shapes.end()) {
            ++it->count;
            continue;
        }
        shapes.push_back({backend::cpu::WeightView{t.type, t.data, t.shape[1], t.shape[0]}, 1});
    }
    return out;
}

bool reads_view(backend::cpu::PathMethod m) { return m == backend::cpu::PathMethod::dequant_fma || m == backend::cpu::PathMethod::f32_fma; }

// Seconds per call: the minimum over repetitions (after a warm-up) lasting at least min_seconds.
double time_matmul(const backend::cpu::PackedWeight& w, const std::vector<float>& x, int64_t n, std::vector<float>& y,
                   ThreadPool& pool, double min_seconds) {
    y.resize(size_t(n * w.source().rows));
    backend::cpu::matmul(w, x.data(), n, y.data(), pool);
    double best = 1e300, total = 0;
    for (int r = 0; r < 200 && (r < 2 || total < min_seconds); ++r) {
        const auto start = Clock::now();
        backend::cpu::matmul(w, x.data(), n, y.data(), pool);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        best = std::min(best, s);
        total += s;
    }
    return best;
}

struct TypeBench {
    std::vector<backend::cpu::PackedWeight> weights;  // one per shape, packed for the method
    std::vector<int> counts;
};

TypeBench prepare(const std::vector<LayerShape>& shapes, backend::cpu::PathMethod method) {
    TypeBench b;
    const backend::cpu::ScopedKernelChoice scope({method, backend::cpu::gemm_tiles()});
    for (const auto& s : shapes) {
        b.weights.push_back(reads_view(method) ? backend::cpu::keep_views(std::span(&s.view, 1)) : backend::cpu::pack_weight(s.view));
        b.counts.push_back(s.count);
    }
    return b;
}

// One step's matmuls of this type at n tokens, in seconds.
double time_type(const TypeBench& b, backend::cpu::PathMethod method, const backend::cpu::GemmTiles& tiles, int64_t n,
                 ThreadPool& pool, double min_seconds, int64_t amx_min_tokens = backend::cpu::kDefaultAmxMinTokens,
                 int64_t wide_min_tokens = backend::cpu::kDefaultWideMinTokens) {
    const backend::cpu::ScopedKernelChoice scope({method, tiles, amx_min_tokens, wide_min_tokens});
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

json tiles_json(const backend::cpu::GemmTiles& t) { return {{"kc", t.kc}, {"mc", t.mc}, {"nc", t.nc}}; }

struct RangeSpec {
    int64_t max_tokens;
    std::vector<int64_t> counts;  // measured token counts standing for the range
    std::string name;
};

// A weight type's benches (one per method timed) and the method chosen, shared by its measurements.
struct TypeTimings {
    TuneRun& run;
    std::map<backend::cpu::PathMethod, TypeBench> benches;
    backend::cpu::PathMethod best{};
    // One step's matmuls of the type at n tokens under the chosen method, in seconds.
    double time(const backend::cpu::GemmTiles& t, int64_t n, int64_t amx_min_tokens = backend::cpu::kDefaultAmxMinTokens,
                int64_t wide_min_tokens = backend::cpu::kDefaultWideMinTokens) {
        return time_type(benches[best], best, t, n, run.pool, run.min_seconds, amx_min_tokens, wide_min_tokens);
    }
};

// One method for every token count: the lowest sum of time relative to the best at each count.
backend::cpu::PathMethod choose_method(TypeTimings& tt, GgmlType type, const std::vector<LayerShape>& type_shapes,
                                  const std::vector<backend::cpu::PathMethod>& candidates, json& matmul_j) {
    const TuneOptions& o = tt.run.options;
    const std::string tname = gguf::type_name(uint32_t(type));
    const std::vector<int64_t> counts = o.quick ? std::vector<int64_t>{1, 4, 64} : std::vector<int64_t>{1, 4, 16, 64, 512};
    json shapes_j = json::array();
    for (const auto& s : type_shapes) shapes_j.push_back({{"rows", s.view.rows}, {"cols", s.view.cols}, {"count", s.count}});
    std::map<backend::cpu::PathMethod, std::map<int64_t, double>> seconds;
    for (auto m : candidates) {
        tt.run.step(fmt::format("{} matmuls, {}", tname, backend::cpu::path_method_name(m)));
        tt.benches[m] = prepare(type_shapes, m);
        for (int64_t n : counts)
            seconds[m][n] = time_type(tt.benches[m], m, backend::cpu::GemmTiles{}, n, tt.run.pool, tt.run.min_seconds);
    }
    backend::cpu::PathMethod best = candidates.front();
    double best_score = 1e300;
    json methods_j = json::object();
    for (auto m : candidates) {
        double score = 0;
        json per_n = json::object();
        for (int64_t n : counts) {
            double fastest = 1e300;
            for (auto& [m2, s2] : seconds) fastest = std::min(fastest, s2[n]);
            score += seconds[m][n] / fastest;
            per_n[std::to_string(n)] = seconds[m][n];
        }
        methods_j[backend::cpu::path_method_name(m)] = {{"seconds_per_step", per_n}, {"relative_score", score}};
        if (score < best_score) best_score = score, best = m;
    }
    matmul_j[tname] = {{"shapes", shapes_j}, {"methods", methods_j}, {"chosen", backend::cpu::path_method_name(best)}};
    for (auto& [m, b] : tt.benches)
        if (m != best) b = TypeBench{};  // free the other layouts before the tile search
    tt.best = best;
    return best;
}

// Tiles per range, coordinate search from the defaults; a set is kept only when at least 3 % faster.
json search_tiles(TypeTimings& tt, backend::cpu::TypePlan& plan) {
    const TuneOptions& o = tt.run.options;
    const std::vector<RangeSpec> ranges =
        o.quick ? std::vector<RangeSpec>{{1, {1}, "1"}, {8, {4}, "2-8"}, {INT64_MAX, {64}, "9+"}}
                : std::vector<RangeSpec>{{1, {1}, "1"}, {8, {4}, "2-8"}, {64, {16, 64}, "9-64"}, {INT64_MAX, {512}, "65+"}};
    json ranges_j = json::array();
    const std::vector<int64_t> kcs = o.quick ? std::vector<int64_t>{256, 1024} : std::vector<int64_t>{256, 1024, 2048};
    const std::vector<int64_t> mcs = o.quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{16, 64, 128};
    const std::vector<int64_t> ncs = o.quick ? std::vector<int64_t>{32, 128} : std::vector<int64_t>{16, 32, 128, 256};
    for (const auto& r : ranges) {
        auto cost = [&](const backend::cpu::GemmTiles& t) {
            double c = 0;
            for (int64_t n : r.counts) c += tt.time(t, n);
            return c;
        };
        const backend::cpu::GemmTiles defaults{};
        const double base = cost(defaults);
        backend::cpu::GemmTiles cur = defaults;
        double cur_cost = base;
        for (int dim = 0; dim < 3; ++dim) {
            for (int64_t v : dim == 0 ? kcs : dim == 1 ? mcs : ncs) {
                backend::cpu::GemmTiles t = cur;
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
    return ranges_j;
}

// The type's step matmuls at each count under two (AMX, wide-kernel) thresholds, which give the
// same bits: each count with its range's tiles, each pair of timings recorded under its keys.
std::vector<AmxTiming> time_two_paths(TypeTimings& tt, const backend::cpu::TypePlan& plan,
                                      const std::vector<int64_t>& path_counts, std::pair<int64_t, int64_t> base,
                                      std::pair<int64_t, int64_t> alt, const char* base_key, const char* alt_key,
                                      json& out) {
    std::vector<AmxTiming> timings;
    for (int64_t n : path_counts) {
        backend::cpu::GemmTiles t = backend::cpu::GemmTiles{};
        for (const auto& r : plan.ranges)
            if (n <= r.max_tokens) {
                t = r.tiles;
                break;
            }
        const AmxTiming timing{n, tt.time(t, n, base.first, base.second), tt.time(t, n, alt.first, alt.second)};
        timings.push_back(timing);
        out.push_back({{"tokens", n}, {base_key, timing.vnni_seconds}, {alt_key, timing.amx_seconds}});
    }
    return timings;
}

}  // namespace

MatmulPhase matmul_phase(const TuneOptions& o, const gguf::File& file) {
    MatmulPhase phase;
    phase.shapes = layer_shapes(file);
    if (phase.shapes.empty()) fail("tune: {} has no layer weights to measure (blk.N.* matrices)", o.model);
    // AMX tiles are measured only where they run (and only for types that end up on int8_dot).
    phase.amx_here = [] {
        const backend::cpu::ScopedKernelChoice scope({backend::cpu::PathMethod::int8_dot, backend::cpu::gemm_tiles()});
        return backend::cpu::amx_path_available();
    }();
    auto listed = [&](backend::cpu::PathMethod m) { return std::find(o.methods.begin(), o.methods.end(), m) != o.methods.end(); };
    for (const auto& [type, s] : phase.shapes) {
        auto& candidates = phase.candidates[type];
        for (auto m : backend::cpu::kPathMethods)
            if (backend::cpu::method_applies(m, type) && backend::cpu::method_runs_here(m)) candidates.push_back(m);
        if (std::any_of(candidates.begin(), candidates.end(), listed))
            std::erase_if(candidates, [&](backend::cpu::PathMethod m) { return !listed(m); });
    }
    return phase;
}

size_t matmul_steps(const MatmulPhase& phase) {
    size_t steps = 0;
    for (const auto& [type, candidates] : phase.candidates)
        steps += candidates.size() + 1 + (phase.amx_here && backend::cpu::amx_applies(backend::cpu::PathMethod::int8_dot, type));
    return steps;
}

void tune_matmuls(TuneRun& run, const MatmulPhase& phase) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    const std::vector<int64_t> amx_counts = o.quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{16, 32, 64, 128, 512};
    json matmul_j = json::object(), tiles_j = json::object(), amx_j = json::object(), wide_j = json::object();
    for (const auto& [type, type_shapes] : phase.shapes) {
        const std::string tname = gguf::type_name(uint32_t(type));
        TypeTimings tt{run, {}, {}};
        const backend::cpu::PathMethod best = choose_method(tt, type, type_shapes, phase.candidates.at(type), matmul_j);
        run.step(fmt::format("{} GEMM tiles per token range", tname));
        backend::cpu::TypePlan plan{type, best, {}};
        tiles_j[tname] = search_tiles(tt, plan);
        // The AMX threshold: the type's matmuls with the VNNI panels against AMX tiles (the same
        // bits), each count with its range's tiles.
        if (phase.amx_here && backend::cpu::amx_applies(best, type)) {
            run.step(fmt::format("{} matmuls, AMX int8 tiles against VNNI", tname));
            json amx_t = json::array();
            const auto timings = time_two_paths(tt, plan, amx_counts, {kAmxNever, backend::cpu::kDefaultWideMinTokens},
                                                {1, backend::cpu::kDefaultWideMinTokens}, "vnni_seconds", "amx_seconds", amx_t);
            plan.amx_min_tokens = choose_amx_min_tokens(timings);
            amx_j[tname] = {{"timings", amx_t}, {"amx_min_tokens", *plan.amx_min_tokens}};
        }
        // The wide prefill kernel of the AVX-512 VNNI panels against the narrow one (the same bits),
        // AMX tiles off for both, each count with its range's tiles.
        if (backend::cpu::vnni_panels_active() && backend::cpu::amx_applies(best, type)) {
            run.step(fmt::format("{} matmuls, wide prefill kernel against narrow", tname));
            json wide_t = json::array();
            const auto timings = time_two_paths(tt, plan, {17, 32, 64, 128}, {kAmxNever, kAmxNever},
                                                {kAmxNever, backend::cpu::kDefaultWideMinTokens}, "narrow_seconds", "wide_seconds", wide_t);
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
    if (phase.amx_here) {
        amx_j["rule"] = "the smallest count from which AMX tiles are faster at every larger count measured";
        p.measurements["amx"] = amx_j;
    } else {
        const std::string why = amx_available() ? "the packed int8 path is not active (PAGODA_ISA)" : amx_status();
        p.measurements["amx"] = {{"measured", false}, {"why", "AMX int8 tiles do not run here: " + why}};
    }
}

}  // namespace pagoda::tune
