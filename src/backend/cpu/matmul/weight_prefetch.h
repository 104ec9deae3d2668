// Where the packed int8 panel kernels' software prefetch puts the weight lines they request one
// kernel call ahead in steps of up to 4 tokens a pass (decode, small batches: packed_kernel.h).
//
// Contract: the request never changes a result, only the speed. l1 is prefetcht0 (into L1), l2 is
// prefetcht1 (into L2 only). Which is faster depends on the machine: on the AMD Zen 4 host (32 KiB
// L1, 1 MiB L2) a call ahead is 13-35 KiB of panels, which prefetcht0 pulls into an L1 that cannot
// hold it beside the call's own lines; prefetcht1 measured 1.2-2x the weight GB/s from memory on one
// core (docs/benchmarks.md), so l2 is the default. `pagoda tune` times whole decode steps both ways
// and a profile carries the choice (kernel_plan.h), never the CPU's name.
// weight_prefetch(): what set_weight_prefetch() installed; while nothing is,
// PAGODA_WEIGHT_PREFETCH=l1|l2 (any other value throws), else l2. A kernel plan installs its choice
// only where the variable is unset. The calling thread's level, when set (a CPU backend's own, for
// the call: kernel_plan.h ScopedKernelChoice), wins over all of them.
#pragma once
#include <optional>
#include <string_view>

namespace pagoda::backend::cpu {

enum class WeightPrefetch { l1, l2 };

WeightPrefetch weight_prefetch();
void set_weight_prefetch(std::optional<WeightPrefetch> level);
bool weight_prefetch_in_environment();  // PAGODA_WEIGHT_PREFETCH is set (non-empty)
std::optional<WeightPrefetch> call_weight_prefetch();
void set_call_weight_prefetch(std::optional<WeightPrefetch> level);
// Inline: the profile reader uses them without the kernels (fuzz/CMakeLists.txt: profile_fuzz).
inline const char* weight_prefetch_name(WeightPrefetch level) { return level == WeightPrefetch::l1 ? "l1" : "l2"; }
inline std::optional<WeightPrefetch> parse_weight_prefetch(std::string_view name) {  // nullopt: not a level
    if (name == "l1") return WeightPrefetch::l1;
    if (name == "l2") return WeightPrefetch::l2;
    return std::nullopt;
}

}  // namespace pagoda::backend::cpu
