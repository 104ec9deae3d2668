#include "backend/vulkan/vulkan_qkv.h"

#include <algorithm>

#include "backend/vulkan/push_constants.h"
#include "backend/vulkan/vulkan_fused.h"
#include "backend/vulkan/vulkan_fused_lora.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

// qkv_epilogue.comp's push constants.
struct QkvEpiloguePush {
    uint64_t s, q_out, k, v, bias_q, bias_k, bias_v, table;
    uint32_t n, q_cols, kv_cols, head_dim, half, neox;
};
static_assert(sizeof(QkvEpiloguePush) == 88);

}  // namespace

void VulkanQkv::run(const QkvOp& op, const kv::KvLayout& cache, uint64_t x, uint64_t q_out, int64_t n, int64_t max_tokens,
                    uint64_t rope_table, uint32_t gemv_wg, uint32_t gemm_bk, const PartLora* lora, VulkanLora* updates) {
    if (op.n_kv_heads != cache.n_kv_heads || op.head_dim != cache.head_dim || op.n_kv_heads <= 0 || op.n_heads % op.n_kv_heads != 0)
        fail("vulkan qkv_rope_kv_write: {} heads, {} KV heads of {} for a cache of {} KV heads of {}", op.n_heads, op.n_kv_heads,
             op.head_dim, cache.n_kv_heads, cache.head_dim);
    const auto& w = weight(*op.qkv);
    const auto& parts = w.parts();
    const int64_t q_cols = int64_t(op.n_heads) * op.head_dim, kv_cols = int64_t(op.n_kv_heads) * op.head_dim;
    if (parts.size() != 3 || parts[0].rows != q_cols || parts[1].rows != kv_cols || parts[2].rows != kv_cols)
        fail("vulkan qkv_rope_kv_write: '{}' needs parts Q, K, V of {}, {} and {} rows", parts.empty() ? "" : parts[0].name, q_cols,
             kv_cols, kv_cols);
    const RopeSpec& spec = op.rope->spec();
    if (spec.dims > op.head_dim) fail("vulkan qkv_rope_kv_write: {} rotary dimensions exceed the head size {}", spec.dims, op.head_dim);
    const bool bias = op.bias[0] != nullptr;
    if (bias != (op.bias[1] != nullptr) || bias != (op.bias[2] != nullptr))
        fail("vulkan qkv_rope_kv_write: biases for all of Q, K and V or for none");
    if (bias && (op.bias[0]->size() != q_cols || op.bias[1]->size() != kv_cols || op.bias[2]->size() != kv_cols))
        fail("vulkan qkv_rope_kv_write: biases of {}, {} and {} values for parts of {}, {} and {} rows", op.bias[0]->size(),
             op.bias[1]->size(), op.bias[2]->size(), q_cols, kv_cols, kv_cols);
    const int64_t cols = q_cols + 2 * kv_cols;
    // The matmul's rows (n x cols), then contiguous K and V (n x kv_cols each).
    const size_t row_bytes = size_t(cols + 2 * kv_cols) * 4, bytes = size_t(n) * row_bytes;
    if (scratch_.size < bytes) {
        if (scratch_.buffer) dev_->stream.flush();  // recorded work reads the old one
        dev_->ctx->destroy(scratch_);
        scratch_ = dev_->ctx->create_buffer(std::max<size_t>({bytes, size_t(max_tokens) * row_bytes, 1 << 16}), false, "the fused QKV scratch");
    }
    const uint64_t s = scratch_.address;
    k_ = s + uint64_t(n * cols) * 4;
    v_ = k_ + uint64_t(n * kv_cols) * 4;
    encode_stacked_matmul(*dev_, w, x, s, n, gemv_wg, gemm_bk);
    // LoRA (Backend::fuses_lora): each part's updates on its columns of the matmul's rows, before
    // the bias and RoPE, as the unfused matmul ; lora_add ; add_bias ; rope.
    if (lora) {
        const int64_t offsets[3] = {0, q_cols, q_cols + kv_cols}, widths[3] = {q_cols, kv_cols, kv_cols};
        for (size_t p = 0; p < 3; ++p)
            if (!lora->parts[p].empty())
                updates->add(x, s + uint64_t(offsets[p]) * 4, n, w.cols(), widths[p], lora->parts[p], cols);
    }
    QkvEpiloguePush e{s, q_out, k_, v_, bias ? vec(*op.bias[0]).buffer.address : 0, bias ? vec(*op.bias[1]).buffer.address : 0,
                      bias ? vec(*op.bias[2]).buffer.address : 0, rope_table, uint32_t(n), uint32_t(q_cols), uint32_t(kv_cols),
                      uint32_t(op.head_dim), uint32_t(spec.dims / 2), spec.neox ? 1u : 0u};
    auto [gx, gy] = grid((uint64_t(n * cols) + 255) / 256);
    dev_->stream.dispatch(dev_->ctx->pipeline("qkv_epilogue", {}), &e, sizeof(e), gx, gy);
}

}  // namespace pagoda::backend::vulkan
