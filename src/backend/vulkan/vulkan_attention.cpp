#include "backend/vulkan/vulkan_attention.h"

#include <algorithm>

#include "backend/attention_span.h"
#include "backend/vulkan/kernel_settings.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {
namespace {

constexpr uint32_t kAttentionWorkgroup = 64;  // 4 output values per invocation: heads up to 256
constexpr uint32_t kTokensPerPass = 64;       // tokens per split pass (bounds the partials)

// attention_combine.comp's push constants.
struct CombinePush { uint64_t partials, out, positions, seq_index; uint32_t n_heads, head_dim, window, split_keys, max_splits, pad = 0; };
static_assert(sizeof(CombinePush) == 56);

}  // namespace

uint32_t VulkanAttention::split_count(uint32_t n_keys) const {
    return split_keys_ == 0 ? 1 : std::clamp(n_keys / split_keys_, 1u, kMaxAttentionSplits);
}

void VulkanAttention::run(AttentionPush p, std::span<const int32_t> ends, std::span<const int32_t> own,
                          std::span<const int32_t> span_starts, uint32_t n_tokens, uint32_t head_dim) {
    uint32_t splits = 1;
    for (size_t t = 0; t < ends.size(); ++t) {
        const int32_t start = window_first_key(own[t], span_starts[t], int32_t(p.window));
        splits = std::max(splits, split_count(uint32_t(std::max(ends[t] - start + 1, 1))));
    }
    if (splits == 1) {
        dev_->stream.dispatch(reduce_pipeline(*dev_, reduce_, "attention", kAttentionWorkgroup), &p, sizeof(p), p.n_heads, n_tokens);
        return;
    }
    // Each pass takes kTokensPerPass tokens (the per-token arrays' addresses offset to its first), so
    // the partials are bounded whatever the step; their layout is fixed by kMaxAttentionSplits (a
    // token's numbers do not depend on the step's widest split). Made at the first split (no flush:
    // nothing recorded reads it yet); grown, with a flush, only for a layer of more heads.
    const size_t bytes = size_t(kTokensPerPass) * p.n_heads * kMaxAttentionSplits * (head_dim + 2) * 4;
    if (partials_.size < bytes) {
        if (partials_.buffer) dev_->stream.flush();
        dev_->ctx->destroy(partials_);
        partials_ = dev_->ctx->create_buffer(std::max<size_t>(bytes, 1 << 16), false, "the split attention partials");
    }
    p.partials = partials_.address;
    p.split_keys = split_keys_;
    const AttentionPush all = p;
    const uint64_t q_row = uint64_t(p.n_heads) * head_dim * 4;
    for (uint32_t t0 = 0; t0 < n_tokens; t0 += kTokensPerPass) {
        const uint32_t n = std::min(kTokensPerPass, n_tokens - t0);
        p.q = all.q + t0 * q_row;
        p.out = all.out + t0 * q_row;
        p.positions = all.positions + t0 * 4;
        p.seq_index = all.seq_index + t0 * 12;  // (sequence, position, span start) per token
        dev_->stream.dispatch(reduce_pipeline(*dev_, reduce_, "attention", kAttentionWorkgroup), &p, sizeof(p), p.n_heads, n, splits);
        CombinePush c{partials_.address, p.out, p.positions, p.seq_index, p.n_heads, head_dim, p.window, split_keys_, kMaxAttentionSplits};
        dev_->stream.dispatch(dev_->ctx->pipeline("attention_combine", {}), &c, sizeof(c), p.n_heads, n);
    }
}

}  // namespace pagoda::backend::vulkan
