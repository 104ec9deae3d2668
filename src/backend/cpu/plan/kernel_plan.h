// Which matmul path the CPU backend takes for a weight, chosen per (storage type, tokens in the step)
// by `pagoda tune`'s measurements (a profile) or, without one, by CPUID as before.
//
// Contract:
//  - Per weight type the plan names ONE method for every token count. The methods of one type are not
//    bitwise equal (int8_dot vs dequant_fma, bf16_dot vs amx_bf16 vs f32_fma differ in the last bits), so a method
//    that changed with the step's token count would make a token's result depend on what shared its
//    step: batch invariance (tests/engine/batch_invariance_test.cpp) forbids it. What varies per token
//    range is only what never changes results: the GEMM tiles (matmul.h: "results do not depend on
//    them"). Threads are one count for the whole process (the pool is sized once; kernels split work
//    by pool size), so the plan carries one thread count, applied as the default of -t.
//  - Packing follows the method, and a type has one method, so one layout is built per weight:
//    int8_dot packs quantised types into VNNI panels, dequant_fma keeps the file's view (no panels),
//    bf16_dot packs F16/BF16 into bf16 panels, amx_bf16 into the same panels padded to K tiles,
//    f32_fma keeps the view. The plan must therefore be
//    installed before weights are uploaded (set_kernel_plan, then open the model).
//  - PAGODA_QUANT_METHOD / PAGODA_FLOAT_METHOD, when set, win over the plan (tests pin paths with them).
//  - Types the plan does not list, or no plan at all, take today's defaults: quant_method(),
//    float_method() and gemm_tiles() (CPUID, env, set_*).
//  - AMX int8 tiles are not a method: on the packed int8 path they give bitwise the VNNI panels'
//    results (matmul.h, amx_kernel.h), so like the tiles they may change with the token count. Per
//    quantised type the plan may carry amx_min_tokens, the smallest step that takes them (measured by
//    `pagoda tune` where AMX runs); absent, kDefaultAmxMinTokens. Where AMX cannot run it is unused.
//  - Likewise the AVX-512 VNNI panels' wide prefill kernel (matmul.h: wide_min_tokens): per quantised
//    type the plan may carry wide_min_tokens (>= 17), measured by `pagoda tune` where the VNNI panels
//    run; absent, kDefaultWideMinTokens.
//  - The plan may name the attention method (attention.h, attention_method.h): one per process, like
//    a type's method (amx_bf16 and simd differ in their bits), measured by `pagoda tune` where AMX
//    bf16 runs and the model's attention is plain. set_kernel_plan installs it (absent: simd) with
//    set_attention_method unless PAGODA_ATTENTION is set, which wins; clear_kernel_plan uninstalls
//    it (back to PAGODA_ATTENTION, else simd).
//    A plan naming amx_bf16 where amx_attention_runs_here() is false is refused.
//  - The plan may say whether decode attention requests the next tile's K and V rows ahead
//    (attention.h: decode_kv_prefetch, measured by `pagoda tune` on whole decode steps). It never
//    changes a result. set_kernel_plan installs it (absent: off) unless PAGODA_DECODE_PREFETCH is
//    set, which wins; clear_kernel_plan uninstalls it.
//  - Likewise where the packed decode kernels request their weight lines ahead, L1 or L2
//    (weight_prefetch.h, measured by `pagoda tune` on whole decode steps; never changes a result).
//    set_kernel_plan installs it (absent: l2) unless PAGODA_WEIGHT_PREFETCH is set, which wins;
//    clear_kernel_plan uninstalls it.
//  - A plan and those settings are a CPU backend's own state (PlanSettings, fixed when it is made:
//    make_cpu_backend), so a target and a draft model may run different plans in one process. The
//    process-wide plan (set_kernel_plan) is only the default a backend made without one starts from
//    (process_plan_settings). The backend hands its settings to every kernel call it makes: the
//    matmul choice through kernel_choice(settings, ...) and ScopedKernelChoice (the calling thread's
//    paths, which the dispatchers read before they split the work, as they read the method and
//    tiles), the attention settings in PagedAttentionBatch.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/plan/attention_method.h"
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/weight_prefetch.h"
#include "backend/cpu/plan/path_method.h"
#include "gguf/ggml_types.h"

namespace pagoda::backend::cpu {

// Whether this CPU and the active ISA can run the method's fast kernel (bf16_dot needs AVX-512 BF16,
// amx_bf16 the AMX bf16 tiles or the emulation hook;
// the others always run, int8_dot on whatever int8 kernel the ISA has).
bool method_runs_here(PathMethod m);

// Tiles for steps of at most max_tokens tokens (the last range of a type has max_tokens = INT64_MAX).
struct RangeTiles {
    int64_t max_tokens = INT64_MAX;
    GemmTiles tiles;
};

struct TypePlan {
    gguf::GgmlType type = gguf::GgmlType::F32;
    PathMethod method = PathMethod::f32_fma;
    std::vector<RangeTiles> ranges;  // increasing max_tokens; empty: gemm_tiles() for every count
    std::optional<int64_t> amx_min_tokens;   // only for int8_dot on a packed type (amx_applies)
    std::optional<int64_t> wide_min_tokens;  // the same types; at least kDefaultWideMinTokens
};


struct KernelPlan {
    std::vector<TypePlan> types;
    std::optional<AttentionMethod> attention;  // absent: not chosen, simd
    std::optional<bool> decode_kv_prefetch;     // absent: not measured, off
    std::optional<WeightPrefetch> weight_prefetch;  // absent: not measured, l2
    const TypePlan* find(gguf::GgmlType type) const {
        for (const auto& t : types)
            if (t.type == type) return &t;
        return nullptr;
    }
};

// Throws pagoda::Error naming the problem (a method for a type it cannot multiply, a method this
// machine cannot run, ranges out of order, non-positive tiles, a type listed twice, an attention
// method this machine cannot run).
void validate_kernel_plan(const KernelPlan& plan);
void set_kernel_plan(const KernelPlan& plan);  // validates; replaces any earlier plan and its attention method
void clear_kernel_plan();                      // back to the CPUID / env defaults, attention simd
bool has_kernel_plan();

// The plan and attention settings one CPU backend runs with. An absent setting is the process's,
// read at each call (attention_method(), decode_kv_prefetch(), weight_prefetch(): what tests and
// `pagoda tune` switch); a present one is the backend's own and nothing else changes it.
struct PlanSettings {
    std::shared_ptr<const KernelPlan> plan;          // null: no plan (CPUID / env defaults per type)
    std::optional<AttentionMethod> attention;
    std::optional<bool> decode_kv_prefetch;
    std::optional<WeightPrefetch> weight_prefetch;
};
// A backend's settings from `plan` as set_kernel_plan would install them: validated (throws as
// validate_kernel_plan), tiles rounded, the attention method and prefetches from the plan (absent
// there: simd, off, l2) unless their environment variable is set, which wins (then absent here).
PlanSettings plan_settings(const KernelPlan& plan);
// What a CPU backend made without settings starts from: the process's plan as installed now (kept
// by the backend; weights are packed by it) and the process's attention and prefetch settings.
PlanSettings process_plan_settings();

// What a matmul of this type over n_tokens tokens uses now (plan, env overrides and defaults applied).
struct KernelChoice {
    PathMethod method = PathMethod::f32_fma;
    GemmTiles tiles;
    int64_t amx_min_tokens = kDefaultAmxMinTokens;
    int64_t wide_min_tokens = kDefaultWideMinTokens;
    std::optional<WeightPrefetch> weight_prefetch;  // absent: the process's (weight_prefetch.h)
};
KernelChoice kernel_choice(const PlanSettings& settings, gguf::GgmlType type, int64_t n_tokens);
// Under the process's plan (process_plan_settings()).
KernelChoice kernel_choice(gguf::GgmlType type, int64_t n_tokens);
// True when some quantised type the plan (or the default) names runs int8_dot: the norm may then
// prequantise activations for those weights.
bool plan_uses_int8_dot(const PlanSettings& settings);

// Sets the choice as the calling thread's quant_method() / float_method() / gemm_tiles() (and its
// weight prefetch, when the choice has one) for its lifetime (the dispatchers read those on the
// calling thread before they split the work).
class ScopedKernelChoice {
public:
    explicit ScopedKernelChoice(const KernelChoice& c);
    ~ScopedKernelChoice();
    ScopedKernelChoice(const ScopedKernelChoice&) = delete;
    ScopedKernelChoice& operator=(const ScopedKernelChoice&) = delete;

private:
    CallPaths saved_;
    std::optional<WeightPrefetch> saved_prefetch_;
};

// One line per planned type, e.g. "q4_0: int8_dot, tiles 1: 512/32/64, 2-64: ..., 65+: ...";
// "default (CPUID)" when no plan is set; then whether AMX tiles are used, from how many tokens, or why
// not; then the attention method and where it comes from (profile, PAGODA_ATTENTION, default), and
// likewise whether decode attention requests its next K and V rows ahead.
// log_kernel_plan() logs it once per process at info level.
std::string describe_kernel_plan();
void log_kernel_plan();

// How many matmul calls the CPU backend dispatched with each method since start (for tests).
uint64_t dispatch_count(PathMethod m);
void count_dispatch(PathMethod m);

}  // namespace pagoda::backend::cpu
