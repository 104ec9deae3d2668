#include "backend/vulkan/vulkan_ops_extra.h"

#include <limits>

#include "backend/vulkan/push_constants.h"
#include "core/error.h"

namespace pagoda::backend::vulkan {

void encode_copy_columns(DeviceState& dev, uint64_t src, int64_t src_cols, uint64_t dst, int64_t dst_cols, int64_t rows,
                         const ColumnCopy& c) {
    const int64_t n = rows * c.n_heads * c.width;
    if (n == 0) return;
    // The shader indexes elements with 32-bit unsigned ints.
    const int64_t limit = std::numeric_limits<uint32_t>::max();
    if (n > limit || rows * src_cols > limit || rows * dst_cols > limit)
        fail("vulkan copy_columns: {} rows of {} and {} columns exceed the 2^32 elements its shader indexes", rows, src_cols, dst_cols);
    CopyColumnsPush p{src, dst, uint32_t(n), uint32_t(c.n_heads), uint32_t(c.width), uint32_t(c.src_stride), uint32_t(c.src_offset),
                      uint32_t(c.dst_stride), uint32_t(c.dst_offset), uint32_t(src_cols), uint32_t(dst_cols)};
    auto [gx, gy] = grid((uint64_t(n) + 255) / 256);
    dev.stream.dispatch(dev.ctx->pipeline("copy_columns", {}), &p, sizeof(p), gx, gy);
}

}  // namespace pagoda::backend::vulkan
