#include "backend/vulkan/vulkan_recurrent.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/vulkan/push_constants.h"
#include "backend/vulkan/vulkan_handles.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

uint64_t address_of(const Tensor& t) { return uint64_t(reinterpret_cast<uintptr_t>(t.data)); }

// The shaders index with 32-bit unsigned ints and take one workgroup row per token (grid y).
void check_limits(const char* op, int64_t tokens, std::initializer_list<const Tensor*> tensors) {
    if (tokens > 65535) fail("vulkan {}: {} tokens in one call; its shader takes at most 65535", op, tokens);
    for (const Tensor* t : tensors)
        if (t->rows * t->cols > int64_t(std::numeric_limits<uint32_t>::max()))
            fail("vulkan {}: a {}x{} tensor exceeds the 2^32 elements its shader indexes", op, t->rows, t->cols);
}

}  // namespace

VulkanRecurrent::~VulkanRecurrent() {
    try {
        dev_->stream.flush();
    } catch (...) {
    }
    dev_->ctx->destroy(rows_buf_);
}

uint64_t VulkanRecurrent::rows_address(std::span<const int32_t> rows) {
    if (!held_.empty() && std::ranges::equal(rows, held_)) return held_at_;
    const size_t bytes = rows.size() * sizeof(int32_t);
    if (used_ + bytes > rows_buf_.size) {
        dev_->stream.flush();  // recorded dispatches may still read the buffer
        used_ = 0;
        if (rows_buf_.size < bytes) {
            dev_->ctx->destroy(rows_buf_);
            rows_buf_ = dev_->ctx->create_buffer(std::max<size_t>(2 * bytes, 1 << 16), true, "the recurrent ops' state rows");
        }
    }
    std::memcpy(static_cast<char*>(rows_buf_.mapped) + used_, rows.data(), bytes);
    held_.assign(rows.begin(), rows.end());
    held_at_ = rows_buf_.address + used_;
    used_ += bytes;
    return held_at_;
}

void VulkanRecurrent::causal_conv1d(const CausalConv1d& op, const Tensor& x, const Tensor& state, const Tensor& out) {
    check_causal_conv1d(op, x, state, out, "vulkan");
    check_limits("causal_conv1d", x.rows, {&x, &state, &out});
    if (x.rows == 0 || x.cols == 0) return;
    const CausalConv1dPush p{address_of(x), vec(*op.weight).buffer.address, address_of(state), address_of(out),
                             rows_address(op.state_rows), uint32_t(x.rows), uint32_t(x.cols), uint32_t(op.kernel),
                             op.silu ? 1u : 0u};
    dev_->stream.dispatch(dev_->ctx->pipeline("causal_conv1d", {}), &p, sizeof(p), uint32_t((x.cols + 63) / 64),
                          uint32_t(x.rows));
}

void VulkanRecurrent::gated_delta_rule(const GatedDeltaRule& op, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out) {
    check_gated_delta_rule(op, q, k, v, g, beta, state, out, "vulkan");
    if (op.head_dim > kMaxHeadDim)
        fail("vulkan gated_delta_rule: head_dim {}; its shader takes at most {}", op.head_dim, kMaxHeadDim);
    check_limits("gated_delta_rule", q.rows, {&q, &k, &v, &g, &beta, &state, &out});
    if (q.rows == 0) return;
    const GatedDeltaRulePush p{address_of(q), address_of(k), address_of(v), address_of(g), address_of(beta),
                               address_of(state), address_of(out), rows_address(op.state_rows), uint32_t(q.rows),
                               uint32_t(op.n_k_heads), uint32_t(op.n_v_heads), uint32_t(op.head_dim), op.scale, op.l2_eps};
    dev_->stream.dispatch(dev_->ctx->pipeline("gated_delta_rule", {}), &p, sizeof(p), uint32_t(op.n_v_heads),
                          uint32_t(q.rows));
}

}  // namespace pagoda::backend::vulkan
