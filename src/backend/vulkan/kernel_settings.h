// The shaders' tunable sizes, passed as specialisation constants (never assumed in a shader):
//   gemv_workgroup: matmul_gemv.comp's invocations (and weight rows) per workgroup, 32..256, a power
//                   of two; also the columns of x staged in shared memory per pass;
//   gemm_stage:     matmul_gemm.comp's columns per shared-memory stage (BK), 8..64, a power of two,
//                   whose two 32 x BK f32 tiles must fit the device's shared memory.
//   subgroup_reduce: rms_norm's, softmax's and attention's reductions by subgroup operations (reduce.glsl's
//                   SUBGROUP_REDUCE) instead of the shared-memory tree; only where the device has
//                   subgroup arithmetic in compute shaders;
//   split_keys:     split-KV attention (attention_split.glsl): a token of n keys runs in
//                   n / split_keys splits (at most kMaxAttentionSplits) plus a combine pass, from
//                   2 * split_keys keys on; 0 never splits. 64..65536, a power of two (default 256).
// Defaults: 64, and 32 where the device has the shared memory (else 16). PAGODA_VULKAN_GEMV_WORKGROUP
// and PAGODA_VULKAN_GEMM_STAGE override them (the tests run a second configuration so); a value out
// of range is refused naming the variable. PAGODA_VULKAN_SUBGROUP_REDUCE=0|1 overrides the third
// (default: on where the device has it; 1 on a device without is refused), PAGODA_VULKAN_SPLIT_KEYS
// the fourth. The sizes change no
// result: every matmul output is summed over the columns in order, one fma per term, whatever the
// sizes (bitwise the same); the reduction path may change a norm's or softmax's last bit, and the
// split of a long context an attention output's last bits (the combine's rescaling).
#pragma once
#include <cstdint>

#include "backend/vulkan/vk_context.h"

namespace pagoda::backend::vulkan {

struct KernelSettings {
    uint32_t gemv_workgroup = 64;
    uint32_t gemm_stage = 32;
    bool subgroup_reduce = false;
    uint32_t split_keys = 256;
};
constexpr uint32_t kMaxAttentionSplits = 16;

KernelSettings kernel_settings(const DeviceInfo& device);

}  // namespace pagoda::backend::vulkan
