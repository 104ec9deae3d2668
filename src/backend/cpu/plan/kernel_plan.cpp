#include "backend/cpu/plan/kernel_plan.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>

#include "backend/cpu/attention/attention.h"
#include "backend/cpu/matmul/weight_prefetch.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"

namespace pagoda::backend::cpu {

using gguf::GgmlType;

namespace {

std::mutex g_plan_mutex;
// Read on every matmul: a shared_ptr swapped under the mutex, copied out by readers.
std::shared_ptr<const KernelPlan> g_plan;
std::array<std::atomic<uint64_t>, std::size(kPathMethods)> g_dispatch{};

bool is_float_type(GgmlType t) { return is_float_weight(t); }
bool env_set(const char* name) {
    const char* v = std::getenv(name);
    return v && *v;
}

std::shared_ptr<const KernelPlan> current_plan() {
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    return g_plan;
}

PathMethod default_method(GgmlType type) {
    if (is_float_type(type)) {
        const FloatMethod m = float_method();
        if (m == FloatMethod::amx_bf16 && type != GgmlType::F32) return PathMethod::amx_bf16;
        return m == FloatMethod::bf16_dot ? PathMethod::bf16_dot : PathMethod::f32_fma;
    }
    return quant_method() == QuantMethod::int8_dot ? PathMethod::int8_dot : PathMethod::dequant_fma;
}

}  // namespace

bool method_runs_here(PathMethod m) {
    if (m == PathMethod::bf16_dot) return cpu_features().avx512bf16 && active_isa() == Isa::avx512;
    if (m == PathMethod::amx_bf16) return amx_bf16_tiles_run_here();
    return true;
}

namespace {
const char* what_method_needs(PathMethod m) {
    if (m == PathMethod::amx_bf16) return "AMX-BF16 tiles with the OS tile permission (and PAGODA_AMX not 0)";
    return "AVX-512 BF16";
}
}  // namespace

void validate_kernel_plan(const KernelPlan& plan) {
    for (size_t i = 0; i < plan.types.size(); ++i) {
        const TypePlan& t = plan.types[i];
        const std::string name = gguf::type_name(uint32_t(t.type));
        if (!matmul_supports(t.type)) fail("kernel plan: weight type {} cannot be multiplied", name);
        for (size_t j = 0; j < i; ++j)
            if (plan.types[j].type == t.type) fail("kernel plan: weight type {} is listed twice", name);
        if (!method_applies(t.method, t.type))
            fail("kernel plan: method {} cannot multiply {} weights", path_method_name(t.method), name);
        if (!method_runs_here(t.method))
            fail("kernel plan: method {} for {} needs {}, which this CPU (or PAGODA_ISA) does not offer",
                 path_method_name(t.method), name, what_method_needs(t.method));
        int64_t prev = 0;
        for (const auto& r : t.ranges) {
            if (r.max_tokens <= prev)
                fail("kernel plan: the token ranges of {} must increase (max_tokens {} after {})", name, r.max_tokens, prev);
            if (r.tiles.kc <= 0 || r.tiles.mc <= 0 || r.tiles.nc <= 0)
                fail("kernel plan: the tiles of {} up to {} tokens must be positive (kc={}, mc={}, nc={})", name,
                     r.max_tokens, r.tiles.kc, r.tiles.mc, r.tiles.nc);
            prev = r.max_tokens;
        }
        if (!t.ranges.empty() && t.ranges.back().max_tokens != INT64_MAX)
            fail("kernel plan: the last token range of {} must be open-ended", name);
        if (t.amx_min_tokens) {
            if (!amx_applies(t.method, t.type))
                fail("kernel plan: an AMX threshold applies only to int8_dot on q4_0, q4_1, q5_0, q8_0, q4_K, q5_K, q6_K (not {} {})",
                     name, path_method_name(t.method));
            if (*t.amx_min_tokens < 1) fail("kernel plan: the AMX threshold of {} must be at least 1 token", name);
        }
        if (t.wide_min_tokens) {
            if (!amx_applies(t.method, t.type))
                fail("kernel plan: a wide-kernel threshold applies only to int8_dot on q4_0, q4_1, q5_0, q8_0, q4_K, q5_K, q6_K (not {} {})",
                     name, path_method_name(t.method));
            if (*t.wide_min_tokens < kDefaultWideMinTokens)
                fail("kernel plan: the wide-kernel threshold of {} must be at least {} tokens (smaller steps stream the weights)",
                     name, kDefaultWideMinTokens);
        }
    }
    if (plan.attention == AttentionMethod::amx_bf16 && !amx_attention_runs_here())
        fail("kernel plan: attention method amx_bf16 needs AMX-BF16 tiles with the OS tile permission on the avx512 path "
             "(and PAGODA_AMX not 0), which this CPU (or PAGODA_ISA / PAGODA_AMX) does not offer");
}

namespace {
std::shared_ptr<const KernelPlan> rounded_plan(const KernelPlan& plan) {
    validate_kernel_plan(plan);
    auto p = std::make_shared<KernelPlan>(plan);
    for (auto& t : p->types)
        for (auto& r : t.ranges) r.tiles.kc = (r.tiles.kc + 255) / 256 * 256;  // as set_gemm_tiles rounds
    return p;
}
}  // namespace

PlanSettings plan_settings(const KernelPlan& plan) {
    PlanSettings s;
    s.plan = rounded_plan(plan);
    if (!attention_method_in_environment()) s.attention = plan.attention.value_or(AttentionMethod::simd);
    if (!decode_kv_prefetch_in_environment()) s.decode_kv_prefetch = plan.decode_kv_prefetch.value_or(false);
    if (!weight_prefetch_in_environment()) s.weight_prefetch = plan.weight_prefetch.value_or(WeightPrefetch::l2);
    return s;
}

PlanSettings process_plan_settings() { return {current_plan(), std::nullopt, std::nullopt, std::nullopt}; }

void set_kernel_plan(const KernelPlan& plan) {
    auto p = rounded_plan(plan);
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    // PAGODA_ATTENTION wins over a profile: then the plan installs nothing (attention.h).
    if (!attention_method_in_environment()) set_attention_method(plan.attention.value_or(AttentionMethod::simd));
    if (!decode_kv_prefetch_in_environment()) set_decode_kv_prefetch(plan.decode_kv_prefetch.value_or(false));
    if (!weight_prefetch_in_environment()) set_weight_prefetch(plan.weight_prefetch.value_or(WeightPrefetch::l2));
    g_plan = std::move(p);
}

void clear_kernel_plan() {
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    set_attention_method(std::nullopt);  // back to PAGODA_ATTENTION, else simd
    set_decode_kv_prefetch(std::nullopt);  // back to PAGODA_DECODE_PREFETCH, else off
    set_weight_prefetch(std::nullopt);     // back to PAGODA_WEIGHT_PREFETCH, else l2
    g_plan.reset();
}

bool has_kernel_plan() { return current_plan() != nullptr; }

KernelChoice kernel_choice(GgmlType type, int64_t n_tokens) { return kernel_choice(process_plan_settings(), type, n_tokens); }

KernelChoice kernel_choice(const PlanSettings& settings, GgmlType type, int64_t n_tokens) {
    KernelChoice c{default_method(type), gemm_tiles()};
    c.weight_prefetch = settings.weight_prefetch;
    const KernelPlan* plan = settings.plan.get();
    const TypePlan* t = plan ? plan->find(type) : nullptr;
    if (!t) return c;
    // The env overrides pin a method for every type of their kind, plan or not.
    const bool pinned = is_float_type(type) ? env_set("PAGODA_FLOAT_METHOD") : env_set("PAGODA_QUANT_METHOD");
    if (!pinned) c.method = t->method;
    if (t->amx_min_tokens) c.amx_min_tokens = *t->amx_min_tokens;
    if (t->wide_min_tokens) c.wide_min_tokens = *t->wide_min_tokens;
    for (const auto& r : t->ranges)
        if (n_tokens <= r.max_tokens) {
            c.tiles = r.tiles;
            break;
        }
    return c;
}

bool plan_uses_int8_dot(const PlanSettings& settings) {
    const KernelPlan* plan = settings.plan.get();
    if (!plan || env_set("PAGODA_QUANT_METHOD")) return quant_method() == QuantMethod::int8_dot;
    for (const auto& t : plan->types)
        if (!is_float_type(t.type) && t.method == PathMethod::int8_dot) return true;
    // Quantised types the plan does not list take the default.
    return quant_method() == QuantMethod::int8_dot;
}

ScopedKernelChoice::ScopedKernelChoice(const KernelChoice& c)
    : saved_(call_paths()), saved_prefetch_(call_weight_prefetch()) {
    if (c.weight_prefetch) set_call_weight_prefetch(c.weight_prefetch);
    CallPaths p;
    if (c.method == PathMethod::int8_dot) p.quant = QuantMethod::int8_dot;
    if (c.method == PathMethod::dequant_fma) p.quant = QuantMethod::dequant_fma;
    if (c.method == PathMethod::f32_fma) p.fl = FloatMethod::f32_fma;
    if (c.method == PathMethod::bf16_dot) p.fl = FloatMethod::bf16_dot;
    if (c.method == PathMethod::amx_bf16) p.fl = FloatMethod::amx_bf16;
    p.tiles = c.tiles;
    p.amx_min_tokens = c.amx_min_tokens;
    p.wide_min_tokens = c.wide_min_tokens;
    set_call_paths(p);
}

ScopedKernelChoice::~ScopedKernelChoice() {
    set_call_paths(saved_);
    set_call_weight_prefetch(saved_prefetch_);
}

namespace {

// Whether the packed int8 matmuls take AMX tiles, and from how many tokens (per planned type where
// the plan says otherwise than the default).
std::string describe_amx(const KernelPlan* plan) {
    const bool enabled = amx_enabled();  // first: a bad PAGODA_AMX is an error at start-up on every machine
    if (!amx_path_available()) {
        // The user's own switch is the reason to name where it is set, whatever else is missing.
        if (enabled && !packed_int8_path_active()) return "AMX int8 tiles: not used (the packed int8 path is not active)";
        // The tiles stand in for the VNNI panel kernel only (an AVX2 path on an AMX host does not take them).
        if (enabled && amx_hardware_available() && !vnni_panels_active())
            return "AMX int8 tiles: not used (the AVX-512 VNNI panel path is not active)";
        return "AMX int8 tiles: not used, " + amx_status();
    }
    std::string out = fmt::format("AMX int8 tiles{}: packed int8 matmuls of {}+ tokens", amx_emulation() ? " (emulated)" : "",
                                  kDefaultAmxMinTokens);
    if (plan)
        for (const auto& t : plan->types)
            if (t.amx_min_tokens && amx_applies(kernel_choice(t.type, 1).method, t.type))
                out += fmt::format(", {}: {}+", gguf::type_name(uint32_t(t.type)), *t.amx_min_tokens);
    return out;
}

// Where a process-wide setting comes from: its environment variable, which wins over the plan
// (naming what the plan chose, if it chose), else the plan, else nothing to say (the default).
std::string setting_source(const char* env_name, bool in_environment, const std::optional<std::string>& planned) {
    if (in_environment)
        return planned ? fmt::format(" ({}, over the profile's {})", env_name, *planned) : fmt::format(" ({})", env_name);
    return planned ? " (profile)" : "";
}

// The attention method in use and where it comes from.
std::string describe_attention(const KernelPlan* plan) {
    const AttentionMethod m = attention_method();  // first: a bad PAGODA_ATTENTION is an error at start-up
    std::string out = fmt::format("attention: {}", attention_method_name(m));
    std::optional<std::string> planned;
    if (plan && plan->attention) planned = attention_method_name(*plan->attention);
    out += setting_source("PAGODA_ATTENTION", attention_method_in_environment(), planned);
    if (m == AttentionMethod::amx_bf16 && !amx_attention_runs_here())
        out += ", but AMX bf16 tiles do not run here: the simd walk";
    else if (m == AttentionMethod::amx_bf16 && amx_emulation())
        out += " (emulated tiles)";
    return out;
}

// Whether decode attention requests the K and V rows a tile ahead, and where that comes from.
std::string describe_decode_prefetch(const KernelPlan* plan) {
    const bool ahead = decode_kv_prefetch();  // first: a bad PAGODA_DECODE_PREFETCH is an error at start-up
    std::optional<std::string> planned;
    if (plan && plan->decode_kv_prefetch) planned = *plan->decode_kv_prefetch ? "on" : "off";
    return fmt::format("decode KV prefetch: {}", ahead ? "on" : "off") +
           setting_source("PAGODA_DECODE_PREFETCH", decode_kv_prefetch_in_environment(), planned);
}

// Where the decode kernels request their weight lines ahead, and where that comes from.
std::string describe_weight_prefetch(const KernelPlan* plan) {
    const WeightPrefetch level = weight_prefetch();  // first: a bad PAGODA_WEIGHT_PREFETCH is an error at start-up
    std::optional<std::string> planned;
    if (plan && plan->weight_prefetch) planned = weight_prefetch_name(*plan->weight_prefetch);
    return fmt::format("decode weight prefetch: {}", weight_prefetch_name(level)) +
           setting_source("PAGODA_WEIGHT_PREFETCH", weight_prefetch_in_environment(), planned);
}

}  // namespace

std::string describe_kernel_plan() {
    const auto plan = current_plan();
    if (!plan)
        return "kernel plan: default (CPUID and PAGODA_* overrides; no profile); " + describe_amx(nullptr) + "; " +
               describe_attention(nullptr) + "; " + describe_decode_prefetch(nullptr) + "; " +
               describe_weight_prefetch(nullptr);
    std::string out = "kernel plan (from a profile):";
    for (const auto& t : plan->types) {
        const KernelChoice c = kernel_choice(t.type, 1);
        out += fmt::format(" {}: {}", gguf::type_name(uint32_t(t.type)), path_method_name(c.method));
        if (c.method != t.method) out += fmt::format(" (env override of {})", path_method_name(t.method));
        int64_t lo = 1;
        for (const auto& r : t.ranges) {
            const std::string range = token_range_label(lo, r.max_tokens);
            out += fmt::format(", {} tok tiles {}/{}/{}", range, r.tiles.kc, r.tiles.mc, r.tiles.nc);
            lo = r.max_tokens == INT64_MAX ? lo : r.max_tokens + 1;
        }
        if (t.wide_min_tokens && c.method == PathMethod::int8_dot && vnni_panels_active())
            out += *t.wide_min_tokens >= kNeverMinTokens ? std::string(", wide prefill kernel never")
                                                             : fmt::format(", wide prefill kernel {}+ tok", *t.wide_min_tokens);
        out += ";";
    }
    if (out.back() == ';') out.pop_back();
    return out + "; " + describe_amx(plan.get()) + "; " + describe_attention(plan.get()) + "; " +
           describe_decode_prefetch(plan.get()) + "; " + describe_weight_prefetch(plan.get());
}

void log_kernel_plan() {
    static std::once_flag once;
    std::call_once(once, [] { log_info("{}", describe_kernel_plan()); });
}

uint64_t dispatch_count(PathMethod m) { return g_dispatch[size_t(m)].load(std::memory_order_relaxed); }
void count_dispatch(PathMethod m) { g_dispatch[size_t(m)].fetch_add(1, std::memory_order_relaxed); }

}  // namespace pagoda::backend::cpu
