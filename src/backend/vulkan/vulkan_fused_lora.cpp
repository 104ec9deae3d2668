#include "backend/vulkan/vulkan_fused_lora.h"

#include <algorithm>
#include <string>

#include "backend/vulkan/push_constants.h"
#include "backend/vulkan/vulkan_fused.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {

void encode_stacked_matmul(DeviceState& dev, const VulkanWeight& w, uint64_t x, uint64_t out, int64_t n, uint32_t gemv_wg,
                           uint32_t gemm_bk) {
    const int64_t rows = w.rows();
    // Row r of the output is row r of the stacked parts (row0 0, rows = all).
    MatmulPush push{w.data.address, w.groups.address, x, out, 0, 0, uint32_t(rows), 0, uint32_t(w.cols()), uint32_t(n)};
    const std::string format = weight_format_name(w.format);
    if (n <= kGemvMaxTokens)
        dev.stream.dispatch(dev.ctx->pipeline("matmul_gemv_" + format, {gemv_wg}), &push, sizeof(push),
                            uint32_t((rows + gemv_wg - 1) / gemv_wg));
    else
        dev.stream.dispatch(dev.ctx->pipeline("matmul_gemm_" + format, {gemm_bk}), &push, sizeof(push), uint32_t((rows + 31) / 32),
                            uint32_t((n + 31) / 32));
}

void VulkanGateUpLora::run(const VulkanWeight& w, uint64_t x, uint64_t out, int64_t n, int64_t max_tokens, const PartLora& lora,
                           VulkanLora& updates, uint32_t gemv_wg, uint32_t gemm_bk) {
    const auto& parts = w.parts();
    if (parts.size() != 2 || parts[0].rows != parts[1].rows)
        fail("vulkan matmul_silu_mul: '{}' needs two parts (gate, up) of equal rows", parts.empty() ? "" : parts[0].name);
    if (n == 0) return;
    const int64_t rows = parts[0].rows;
    const size_t row_bytes = size_t(2 * rows) * 4, bytes = size_t(n) * row_bytes;
    if (scratch_.size < bytes) {
        if (scratch_.buffer) dev_->stream.flush();  // recorded work reads the old one
        dev_->ctx->destroy(scratch_);
        scratch_ = dev_->ctx->create_buffer(std::max<size_t>({bytes, size_t(max_tokens) * row_bytes, 1 << 16}), false,
                                            "the fused gate|up LoRA scratch");
    }
    const uint64_t s = scratch_.address;
    encode_stacked_matmul(*dev_, w, x, s, n, gemv_wg, gemm_bk);
    for (size_t p = 0; p < 2; ++p)
        if (!lora.parts[p].empty()) updates.add(x, s + uint64_t(p) * uint64_t(rows) * 4, n, w.cols(), rows, lora.parts[p], 2 * rows);
    PointwisePush e{s, 0, out, uint32_t(n * rows), uint32_t(std::max<int64_t>(rows, 1)), uint32_t(Pointwise::silu_mul_halves), 0.0f};
    auto [gx, gy] = grid((uint64_t(n * rows) + 255) / 256);
    dev_->stream.dispatch(dev_->ctx->pipeline("pointwise", {}), &e, sizeof(e), gx, gy);
}

}  // namespace pagoda::backend::vulkan
