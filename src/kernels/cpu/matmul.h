// Matrix multiplication with a weight matrix in any supported storage type:
//   y[t][r] = sum_c W[r][c] * x[t][c]   for t < n_tokens, r < rows
// W is row-major: `rows` rows of `cols` values, each row gguf::row_size(type, cols) bytes, exactly as
// GGUF stores a 2-D tensor of shape [cols, rows]. x is [n_tokens][cols] f32, y is [n_tokens][rows] f32.
// The result for a token never depends on n_tokens or the thread count (batch invariance): every
// path reduces each output in one fixed order.
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "gguf/ggml_types.h"

namespace pagoda::kernels {

struct WeightView {
    gguf::GgmlType type = gguf::GgmlType::F32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
};

bool matmul_supports(gguf::GgmlType type);
// Throws pagoda::Error naming `what` and the type when the type cannot be computed yet.
void require_matmul_support(gguf::GgmlType type, const std::string& what);

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Plain reference (one row at a time, double accumulation) that every optimised path is tested against.
void matmul_reference(const WeightView& w, const float* x, int64_t n_tokens, float* y);

// Dequantises row r of W into out[cols].
void dequantize_row(const WeightView& w, int64_t r, float* out);

}  // namespace pagoda::kernels
