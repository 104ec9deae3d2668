// The Vulkan backend's paged attention (attention.comp): one workgroup per (query head, token)
// over the token's keys, or, where a token has at least 2 * split_keys keys (kernel_settings.h),
// split-KV attention (flash decoding): the keys cut into ranges, one workgroup each, writing partial
// outputs with their running max and sum to a scratch buffer, then attention_combine.comp rescales
// and adds them. A token's split count depends only on its own key count (batch invariance), and a
// token of one split gets bitwise the unsplit output. Long steps run the split pass 64 tokens at a
// time, so the scratch buffer is bounded.
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"
#include "backend/vulkan/push_constants.h"
#include "backend/vulkan/vulkan_fused.h"

namespace pagoda::backend::vulkan {

class VulkanAttention {
public:
    VulkanAttention(std::shared_ptr<DeviceState> dev, uint32_t split_keys, RowReduce reduce)
        : dev_(std::move(dev)), split_keys_(split_keys), reduce_(reduce) {}
    ~VulkanAttention() { dev_->ctx->destroy(partials_); }
    VulkanAttention(const VulkanAttention&) = delete;
    VulkanAttention& operator=(const VulkanAttention&) = delete;

    // Records attention for push.q's tokens; `ends` holds each token's last key position (what
    // push.positions points to on the device), `own` and `span_starts` its position and its span's
    // start (what push.seq_index holds), so the host knows the splits' grid.
    void run(AttentionPush push, std::span<const int32_t> ends, std::span<const int32_t> own,
             std::span<const int32_t> span_starts, uint32_t n_tokens, uint32_t head_dim);
    // The most splits a token of `n_keys` keys takes (attention_split.glsl's split_count).
    uint32_t split_count(uint32_t n_keys) const;

private:
    std::shared_ptr<DeviceState> dev_;
    uint32_t split_keys_;
    RowReduce reduce_;
    Buffer partials_;
};

}  // namespace pagoda::backend::vulkan
