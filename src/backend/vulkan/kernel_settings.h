// The shaders' tunable sizes, passed as specialisation constants (never assumed in a shader):
//   gemv_workgroup: matmul_gemv.comp's invocations (and weight rows) per workgroup, 32..256, a power
//                   of two; also the columns of x staged in shared memory per pass;
//   gemm_stage:     matmul_gemm.comp's columns per shared-memory stage (BK), 8..64, a power of two,
//                   whose two 32 x BK f32 tiles must fit the device's shared memory.
// Defaults: 64, and 32 where the device has the shared memory (else 16). PAGODA_VULKAN_GEMV_WORKGROUP
// and PAGODA_VULKAN_GEMM_STAGE override them (the tests run a second configuration so); a value out
// of range is refused naming the variable. Neither changes a result: every matmul output is summed
// over the columns in order, one fma per term, whatever the sizes (bitwise the same).
#pragma once
#include <cstdint>

#include "backend/vulkan/vk_context.h"

namespace pagoda::backend::vulkan {

struct KernelSettings {
    uint32_t gemv_workgroup = 64;
    uint32_t gemm_stage = 32;
};

KernelSettings kernel_settings(const DeviceInfo& device);

}  // namespace pagoda::backend::vulkan
