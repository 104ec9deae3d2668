#include "backend/vulkan/vulkan_fused.h"

#include <string>
#include <vector>

#include "backend/vulkan/kernel_settings.h"
#include "backend/vulkan/push_constants.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

template <class Push>
void dispatch(DeviceState& dev, const std::string& shader, const std::vector<uint32_t>& constants, const Push& push, uint32_t gx,
              uint32_t gy = 1) {
    dev.stream.dispatch(dev.ctx->pipeline(shader, constants), &push, sizeof(Push), gx, gy);
}

void dispatch_rows(DeviceState& dev, RowReduce rr, const char* shader, const void* push, uint32_t push_bytes, int64_t rows) {
    auto [gx, gy] = grid(uint64_t(rows));
    dev.stream.dispatch(reduce_pipeline(dev, rr, shader, kRowWorkgroup), push, push_bytes, gx, gy);
}

}  // namespace

RowReduce row_reduce(const DeviceState& dev) {
    return {dev.ctx->info.subgroup_arithmetic, kernel_settings(dev.ctx->info).subgroup_reduce};
}

// The plain module declares no subgroup capability (a device without it may load it); the
// _subgroup one takes SUBGROUP_REDUCE as constant 1.
VkPipeline reduce_pipeline(DeviceState& dev, RowReduce rr, const char* shader, uint32_t wg) {
    if (rr.device_has_subgroup_arithmetic) return dev.ctx->pipeline(std::string(shader) + "_subgroup", {wg, rr.subgroup ? 1u : 0u});
    return dev.ctx->pipeline(shader, {wg});
}

void encode_rms_norm(DeviceState& dev, RowReduce rr, uint64_t x, uint64_t residual, uint64_t w, uint64_t out, int64_t rows,
                     int64_t cols, float eps) {
    NormPush p{x, w, out, residual, uint32_t(cols), uint32_t(rows), eps};
    dispatch_rows(dev, rr, "rms_norm", &p, sizeof(p), rows);
}

void encode_softmax(DeviceState& dev, RowReduce rr, uint64_t x, int64_t rows, int64_t cols) {
    SoftmaxPush p{x, uint32_t(cols), uint32_t(rows)};
    dispatch_rows(dev, rr, "softmax", &p, sizeof(p), rows);
}

void encode_matmul_silu_mul(DeviceState& dev, const VulkanWeight& w, uint64_t x, uint64_t out, int64_t n, uint32_t gemv_wg,
                            uint32_t gemm_bk) {
    const auto& parts = w.parts();
    if (parts.size() != 2 || parts[0].rows != parts[1].rows)
        fail("vulkan matmul_silu_mul: '{}' needs two parts (gate, up) of equal rows", parts.empty() ? "" : parts[0].name);
    const int64_t rows = parts[0].rows;
    MatmulPush push{w.data.address, w.groups.address, x, out, 0, 0, uint32_t(rows), 0, uint32_t(w.cols()), uint32_t(n)};
    const std::string format = weight_format_name(w.format);
    if (n <= kGemvMaxTokens) {
        dispatch(dev, "matmul_gemv_" + format, {gemv_wg, 1u}, push, uint32_t((rows + gemv_wg - 1) / gemv_wg));
        return;
    }
    // Three 32 x BK tiles (x, gate, up) in shared memory: a smaller stage where two fit but not
    // three (the stage changes no result, kernel_settings.h).
    uint32_t bk = gemm_bk;
    while (bk > 8 && 3u * 32u * bk * 4u > dev.ctx->info.shared_memory) bk /= 2;
    dispatch(dev, "matmul_gemm_" + format, {bk, 1u}, push, uint32_t((rows + 31) / 32), uint32_t((n + 31) / 32));
}

}  // namespace pagoda::backend::vulkan
