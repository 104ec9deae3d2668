// The Vulkan backend's encoders for the row reductions (rms_norm, softmax) and the fused ops built
// on its kernels: add_rms_norm (rms_norm.comp with a residual) and matmul_silu_mul (the GEMV / GEMM
// with matmul_*.comp's SILU_MUL epilogue). Each fused op keeps its unfused sequence's arithmetic in
// the same order, so it is bitwise that sequence (Backend::fused_bitwise stays true). Callers have
// checked the shapes and pass arena addresses.
#pragma once
#include <cstdint>

#include "backend/vulkan/device_state.h"
#include "backend/vulkan/vulkan_handles.h"

namespace pagoda::backend::vulkan {

constexpr int64_t kGemvMaxTokens = 8;  // matmul_gemv.comp's MAX_TOKENS: more tokens take the GEMM
constexpr uint32_t kRowWorkgroup = 256;

// Which reduction rms_norm, softmax and attention run (shaders/reduce.glsl): the _subgroup modules
// exist for a device with subgroup arithmetic, and there `subgroup` (its SUBGROUP_REDUCE) picks the path.
struct RowReduce {
    bool device_has_subgroup_arithmetic = false;
    bool subgroup = false;
};
// This device's choice (kernel_settings.h's subgroup_reduce).
RowReduce row_reduce(const DeviceState& dev);
// The pipeline of a shader that includes reduce.glsl, at workgroup size `wg` (its constant 0).
VkPipeline reduce_pipeline(DeviceState& dev, RowReduce rr, const char* shader, uint32_t wg);

// out = rms_norm(x) * w per row; with residual != 0, x += residual first (add_rms_norm).
void encode_rms_norm(DeviceState& dev, RowReduce rr, uint64_t x, uint64_t residual, uint64_t w, uint64_t out, int64_t rows,
                     int64_t cols, float eps);
// Each row of x (rows x cols) in place.
void encode_softmax(DeviceState& dev, RowReduce rr, uint64_t x, int64_t rows, int64_t cols);
// out (n x rows) = silu(x Wg^T) * (x Wu^T) for a weight of two parts of `rows` rows each, gate then up.
void encode_matmul_silu_mul(DeviceState& dev, const VulkanWeight& w, uint64_t x, uint64_t out, int64_t n, uint32_t gemv_wg,
                            uint32_t gemm_bk);

}  // namespace pagoda::backend::vulkan
