#include "backend/vulkan/vulkan_ops_extra.h"

#include <limits>
#include <string>

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

void encode_embed(DeviceState& dev, const VulkanWeight& table, uint64_t index, uint64_t out, int64_t rows, int64_t cols, bool add) {
    EmbedPush p{table.data.address, table.groups.address, index, out, uint32_t(rows), uint32_t(cols), add ? 1u : 0u};
    auto [gx, gy] = grid((uint64_t(rows * cols) + 255) / 256);
    dev.stream.dispatch(dev.ctx->pipeline(std::string("embed_") + weight_format_name(table.format), {}), &p, sizeof(p), gx, gy);
}

void check_embedding_rows(const Weight& table, std::span<const int32_t> indices, const char* what) {
    const int64_t rows = table.parts()[0].rows;
    for (int32_t i : indices)
        if (i < 0 || i >= rows) fail("vulkan {} {} is outside the {} rows of {}", what, i, rows, table.parts()[0].name);
}

}  // namespace pagoda::backend::vulkan
