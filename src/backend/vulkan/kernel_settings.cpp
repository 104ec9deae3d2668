#include "backend/vulkan/kernel_settings.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

// The variable's value when set: a power of two in [lo, hi], else refused naming it and `what`.
uint32_t setting(const char* name, uint32_t fallback, uint32_t lo, uint32_t hi, const std::string& what) {
    const char* env = std::getenv(name);
    if (!env || !*env) return fallback;
    const std::string text = env;
    uint64_t v = 0;
    bool ok = text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
    if (ok) v = std::stoull(text);
    ok = ok && v >= lo && v <= hi && (v & (v - 1)) == 0;
    if (!ok) fail("{}={}: expected a power of two from {} to {} ({})", name, text, lo, hi, what);
    return uint32_t(v);
}

}  // namespace

KernelSettings kernel_settings(const DeviceInfo& d) {
    KernelSettings s;
    s.gemv_workgroup = setting("PAGODA_VULKAN_GEMV_WORKGROUP", 64, 32, 256, "invocations of the GEMV's workgroup");
    // Two 32 x BK f32 tiles in shared memory: BK <= shared / 256 bytes.
    uint32_t max_stage = 8;
    while (max_stage < 64 && 2u * 32u * (max_stage * 2u) * 4u <= d.shared_memory) max_stage *= 2;
    const uint32_t fallback = d.shared_memory >= 16384 + 2048 ? 32 : 16;
    s.gemm_stage = setting("PAGODA_VULKAN_GEMM_STAGE", std::min(fallback, max_stage), 8, max_stage,
                           "columns per GEMM stage that this device's shared memory holds");
    const char* split = std::getenv("PAGODA_VULKAN_SPLIT_KEYS");
    s.split_keys = split && std::string(split) == "0"
                       ? 0
                       : setting("PAGODA_VULKAN_SPLIT_KEYS", 256, 64, 65536, "keys per split of the split-KV attention, or 0 for none");
    s.subgroup_reduce = d.subgroup_arithmetic;
    if (const char* env = std::getenv("PAGODA_VULKAN_SUBGROUP_REDUCE"); env && *env) {
        const std::string text = env;
        if (text != "0" && text != "1") fail("PAGODA_VULKAN_SUBGROUP_REDUCE={}: expected 0 or 1", text);
        if (text == "1" && !d.subgroup_arithmetic)
            fail("PAGODA_VULKAN_SUBGROUP_REDUCE=1: the device {} has no subgroup arithmetic in compute shaders", d.name);
        s.subgroup_reduce = text == "1";
    }
    return s;
}

}  // namespace pagoda::backend::vulkan
