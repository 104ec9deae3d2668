#include "backend/cpu/ops/copy_columns.h"

#include <cstring>

namespace pagoda::backend::cpu {

void copy_columns_f32(const float* src, int64_t src_cols, float* dst, int64_t dst_cols, int64_t rows,
                      const ColumnCopy& c) {
    const size_t bytes = size_t(c.width) * sizeof(float);
    for (int64_t t = 0; t < rows; ++t) {
        const float* s = src + t * src_cols + c.src_offset;
        float* d = dst + t * dst_cols + c.dst_offset;
        for (int64_t h = 0; h < c.n_heads; ++h) std::memcpy(d + h * c.dst_stride, s + h * c.src_stride, bytes);
    }
}

}  // namespace pagoda::backend::cpu
