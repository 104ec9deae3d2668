#include "backend/cpu/matmul/weight_prefetch.h"

#include <atomic>
#include <cstdlib>

#include "core/error.h"

namespace pagoda::backend::cpu {

namespace {
std::atomic<int> g_weight_prefetch{-1};  // -1: nothing installed
thread_local std::optional<WeightPrefetch> t_call_prefetch;
}  // namespace

std::optional<WeightPrefetch> call_weight_prefetch() { return t_call_prefetch; }
void set_call_weight_prefetch(std::optional<WeightPrefetch> level) { t_call_prefetch = level; }

WeightPrefetch weight_prefetch() {
    if (t_call_prefetch) return *t_call_prefetch;
    if (const int v = g_weight_prefetch.load(std::memory_order_relaxed); v >= 0) return WeightPrefetch(v);
    const char* env = std::getenv("PAGODA_WEIGHT_PREFETCH");
    if (!env || !*env) return WeightPrefetch::l2;
    const auto level = parse_weight_prefetch(env);
    if (!level) fail("PAGODA_WEIGHT_PREFETCH={} is not l1 or l2", env);
    return *level;
}

void set_weight_prefetch(std::optional<WeightPrefetch> level) {
    g_weight_prefetch.store(level ? int(*level) : -1, std::memory_order_relaxed);
}

bool weight_prefetch_in_environment() {
    const char* env = std::getenv("PAGODA_WEIGHT_PREFETCH");
    return env && *env;
}

}  // namespace pagoda::backend::cpu
