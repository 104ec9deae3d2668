#include "backend/reference/reference_weights.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/dequantize.h"

namespace pagoda::backend::reference {
namespace {

using gguf::GgmlType;

bool computable(GgmlType type) {
    return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 ||
           quant::is_supported_block_type(type);
}

}  // namespace

uint64_t row_bytes(const MatrixSource& m) { return *gguf::row_size(m.type, m.cols); }

void dequantize_row(const MatrixSource& m, int64_t r, double* out) {
    const uint8_t* row = static_cast<const uint8_t*>(m.data) + uint64_t(r) * row_bytes(m);
    switch (m.type) {
        case GgmlType::F32:
            for (int64_t c = 0; c < m.cols; ++c) {
                float v;
                std::memcpy(&v, row + 4 * c, 4);
                out[c] = v;
            }
            return;
        case GgmlType::F16:
        case GgmlType::BF16:
            for (int64_t c = 0; c < m.cols; ++c) {
                uint16_t h;
                std::memcpy(&h, row + 2 * c, 2);
                out[c] = m.type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            return;
        default: {
            std::vector<float> values(size_t(m.cols));
            quant::dequantize_row(m.type, row, values.data(), m.cols);
            std::copy(values.begin(), values.end(), out);
        }
    }
}

void validate_part(const MatrixSource& m, int64_t cols) {
    if (!m.data || m.rows <= 0 || m.cols <= 0)
        fail("reference backend: weight {} is empty ({} x {})", m.name, m.rows, m.cols);
    if (m.cols != cols)
        fail("reference backend: weight {} has {} columns, the first part has {}", m.name, m.cols, cols);
    if (!computable(m.type))
        fail("reference backend: weight {} has type {}, which it cannot compute", m.name,
             gguf::type_name(uint32_t(m.type)));
    if (!gguf::row_size(m.type, m.cols))
        fail("reference backend: weight {} has {} columns, not a multiple of the {} block size", m.name,
             m.cols, gguf::type_name(uint32_t(m.type)));
}

}  // namespace pagoda::backend::reference
