#include "backend/vulkan/vulkan_lora.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/vulkan/push_constants.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {

VulkanLora::~VulkanLora() {
    try {
        dev_->stream.flush();
    } catch (...) {
    }
    dev_->ctx->destroy(buf_);
}

size_t VulkanLora::padded(size_t bytes) { return (bytes + 15) / 16 * 16; }

void VulkanLora::reserve(size_t bytes) {
    if (used_ + bytes <= buf_.size) return;
    dev_->stream.flush();  // recorded dispatches may still read the buffer
    used_ = 0;
    if (buf_.size < bytes) {
        dev_->ctx->destroy(buf_);
        buf_ = dev_->ctx->create_buffer(std::max<size_t>(2 * bytes, 1 << 20), true, "the LoRA matrices");
    }
}

uint64_t VulkanLora::put(const void* data, size_t bytes) {
    std::memcpy(static_cast<char*>(buf_.mapped) + used_, data, bytes);
    const uint64_t at = buf_.address + used_;
    used_ += padded(bytes);
    return at;
}

void VulkanLora::add(uint64_t x, uint64_t y, int64_t rows, int64_t in, int64_t out, std::span<const LoraSegment> segments,
                     int64_t y_stride) {
    const int64_t limit = std::numeric_limits<uint32_t>::max();
    if (y_stride == 0) y_stride = out;
    if (y_stride < out) fail("vulkan lora_add: rows of {} values {} floats apart", out, y_stride);
    if (rows * std::max({in, out, y_stride}) > limit) fail("vulkan lora_add: {} rows of {} and {} columns exceed its shader's 32-bit indices", rows, in, out);
    for (const LoraSegment& s : segments) {
        if (s.rows.empty()) continue;
        if (!s.a || !s.b) fail("vulkan lora_add: a segment without its A or B matrix");
        if (s.rank < 1 || s.rank > kMaxRank) fail("vulkan lora_add: rank {}; its shader takes 1 to {}", s.rank, kMaxRank);
        if (s.rank * std::max(in, out) > limit) fail("vulkan lora_add: rank {} x {} columns exceed its shader's 32-bit indices", s.rank, std::max(in, out));
        for (int32_t t : s.rows)
            if (t < 0 || t >= rows) fail("vulkan lora_add: row {} is outside the step's {} rows", t, rows);
    }
    for (const LoraSegment& s : segments) {
        if (s.rows.empty() || in == 0 || out == 0) continue;
        const size_t a_bytes = size_t(s.rank * in) * 4, b_bytes = size_t(out * s.rank) * 4, r_bytes = s.rows.size() * 4;
        reserve(padded(a_bytes) + padded(b_bytes) + padded(r_bytes));
        const uint64_t a = put(s.a, a_bytes);
        const uint64_t b = put(s.b, b_bytes);
        const uint64_t r = put(s.rows.data(), r_bytes);
        const LoraAddPush p{x, y, a, b, r, uint32_t(s.rows.size()), uint32_t(in), uint32_t(out), uint32_t(s.rank), s.scale,
                              uint32_t(y_stride)};
        auto [gx, gy] = grid(s.rows.size());
        dev_->stream.dispatch(dev_->ctx->pipeline("lora_add", {}), &p, sizeof(p), gx, gy);
    }
}

}  // namespace pagoda::backend::vulkan
