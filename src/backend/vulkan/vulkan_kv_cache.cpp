#include "backend/vulkan/vulkan_kv_cache.h"

#include <fmt/format.h>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend::vulkan {

using kv::KvDtype;

VulkanKvCache::VulkanKvCache(std::shared_ptr<DeviceState> dev, const kv::KvLayout& layout, int32_t n_blocks)
    : KvCache(layout, n_blocks), dev_(std::move(dev)) {
    layout.validate();
    if (layout.v_is_k)
        fail("vulkan backend: a KV cache whose V rows are its K rows (v_is_k, DeepSeek's absorbed MLA) is not supported; "
             "use --mla naive");
    if (layout.head_dim > 256) fail("vulkan backend: heads of {} values are wider than the 256 its attention shader holds", layout.head_dim);
    if ((layout.dtype == KvDtype::f16 || layout.dtype == KvDtype::bf16) && layout.head_dim % 2 != 0)
        fail("vulkan backend: {} KV rows of an odd head size ({}) are not supported", kv::kv_dtype_name(layout.dtype), layout.head_dim);
    if (n_blocks <= 0) fail("vulkan backend: a KV cache needs at least one block, not {}", n_blocks);
    if (int64_t(n_blocks) * layout.block_size > std::numeric_limits<int32_t>::max())
        fail("vulkan backend: {} KV slots exceed the 2^31 its shaders index", int64_t(n_blocks) * layout.block_size);
    if (layout.bytes_per_block() > std::numeric_limits<uint32_t>::max())
        fail("vulkan backend: a KV block of {} bytes exceeds 4 GiB", layout.bytes_per_block());
    buffer_ = dev_->ctx->create_buffer(total_bytes(), false, fmt::format("the KV cache ({} blocks)", n_blocks));
    // Zeroed, as a fresh CPU cache is: a never-written row reads as zeros in every encoding.
    dev_->stream.fill_zero(buffer_);
}

VulkanKvCache::~VulkanKvCache() {
    try {
        dev_->stream.flush();
    } catch (...) {
    }
    dev_->ctx->destroy(buffer_);
}

void VulkanKvCache::check_block(int32_t block, const char* op) const {
    if (block < 0 || block >= n_blocks()) fail("vulkan KV cache {}: block {} is outside the cache's {} blocks", op, block, n_blocks());
}

void VulkanKvCache::copy_block(int32_t src, int32_t dst) {
    check_block(src, "copy_block");
    check_block(dst, "copy_block");
    if (src == dst) return;
    const size_t bytes = layout().bytes_per_block();
    dev_->stream.copy(buffer_, size_t(src) * bytes, buffer_, size_t(dst) * bytes, bytes);
}

void VulkanKvCache::export_block(int32_t block, std::span<uint8_t> out) const {
    check_block(block, "export_block");
    const size_t bytes = layout().bytes_per_block();
    if (out.size() != bytes) fail("vulkan KV cache export_block: {} bytes given, a block is {}", out.size(), bytes);
    dev_->download(buffer_, size_t(block) * bytes, out.data(), bytes);
}

void VulkanKvCache::import_block(int32_t block, std::span<const uint8_t> in) {
    check_block(block, "import_block");
    const size_t bytes = layout().bytes_per_block();
    if (in.size() != bytes) fail("vulkan KV cache import_block: {} bytes given, a block is {}", in.size(), bytes);
    dev_->upload(in.data(), buffer_, size_t(block) * bytes, bytes);
}

void VulkanKvCache::read_row(int32_t layer, int64_t slot, int32_t kv_head, bool v, float* out) const {
    const kv::KvLayout& l = layout();
    if (layer < 0 || layer >= l.n_layers || slot < 0 || slot >= n_slots() || kv_head < 0 || kv_head >= l.n_kv_heads)
        fail("vulkan KV cache: row (layer {}, slot {}, head {}) is outside the cache", layer, slot, kv_head);
    const size_t offset = size_t(slot / l.block_size) * l.bytes_per_block() + size_t(layer) * 2 * l.layer_block_bytes() +
                          (v ? l.layer_block_bytes() : 0) + size_t(kv_head) * l.head_block_bytes() +
                          size_t(slot % l.block_size) * l.row_bytes();
    std::vector<uint8_t> row(l.row_bytes());
    dev_->download(buffer_, offset, row.data(), row.size());
    const int32_t n = l.head_dim;
    switch (l.dtype) {
        case KvDtype::f32: std::memcpy(out, row.data(), size_t(n) * 4); return;
        case KvDtype::f16:
        case KvDtype::bf16:
            for (int32_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, row.data() + 2 * i, 2);
                out[i] = l.dtype == KvDtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            return;
        case KvDtype::q8: {
            float scale;
            std::memcpy(&scale, row.data() + kv::q8_scale_offset(n), 4);
            for (int32_t i = 0; i < n; ++i)
                out[i] = std::isfinite(scale) ? float(double(int8_t(row[size_t(i)])) * double(scale)) : std::numeric_limits<float>::quiet_NaN();
            return;
        }
    }
}

void VulkanKvCache::read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const { read_row(layer, slot, kv_head, false, out); }
void VulkanKvCache::read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const { read_row(layer, slot, kv_head, true, out); }

}  // namespace pagoda::backend::vulkan
