// The paged KV cache in device memory: one buffer laid out as export_block's payload, block after
// block (shaders/kv.glsl), so a copy-on-write copy and a block's export or import are one
// contiguous device copy. Rows are read back (read_k / read_v) through staging and decoded on the
// host by the layout's rules.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "backend/vulkan/device_state.h"

namespace pagoda::backend::vulkan {

class VulkanKvCache final : public KvCache {
public:
    // Throws pagoda::Error naming the limit when the layout is one the shaders cannot address.
    VulkanKvCache(std::shared_ptr<DeviceState> dev, const kv::KvLayout& layout, int32_t n_blocks);
    ~VulkanKvCache() override;

    void copy_block(int32_t src, int32_t dst) override;
    void export_block(int32_t block, std::span<uint8_t> out) const override;
    void import_block(int32_t block, std::span<const uint8_t> in) override;
    void read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const override;
    void read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const override;

    const Buffer& buffer() const { return buffer_; }

private:
    void check_block(int32_t block, const char* op) const;
    void read_row(int32_t layer, int64_t slot, int32_t kv_head, bool v, float* out) const;
    std::shared_ptr<DeviceState> dev_;
    Buffer buffer_;
};

}  // namespace pagoda::backend::vulkan
