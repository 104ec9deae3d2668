#include "kernels/cpu/matmul.h"

#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace pagoda::kernels {

using gguf::GgmlType;

bool matmul_supports(GgmlType type) {
    return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

void require_matmul_support(GgmlType type, const std::string& what) {
    if (!matmul_supports(type))
        fail("{}: weight type {} is not supported yet", what, gguf::type_name(uint32_t(type)));
}

void dequantize_row(const WeightView& w, int64_t r, float* out) {
    const int64_t n = w.cols;
    switch (w.type) {
        case GgmlType::F32: {
            const float* row = static_cast<const float*>(w.data) + r * n;
            for (int64_t c = 0; c < n; ++c) out[c] = row[c];
            return;
        }
        case GgmlType::F16: {
            const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * n;
            for (int64_t c = 0; c < n; ++c) out[c] = f16_to_f32(row[c]);
            return;
        }
        case GgmlType::BF16: {
            const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * n;
            for (int64_t c = 0; c < n; ++c) out[c] = bf16_to_f32(row[c]);
            return;
        }
        default:
            require_matmul_support(w.type, "dequantize_row");
    }
}

void matmul_reference(const WeightView& w, const float* x, int64_t n_tokens, float* y) {
    std::vector<float> row(size_t(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(w, r, row.data());
        for (int64_t t = 0; t < n_tokens; ++t) {
            double acc = 0;
            const float* xt = x + t * w.cols;
            for (int64_t c = 0; c < w.cols; ++c) acc += double(row[size_t(c)]) * xt[c];
            y[t * w.rows + r] = float(acc);
        }
    }
}

namespace {

// Portable path: 8 independent partial sums (fixed order) so the compiler can vectorise.
template <class Load>
float dot_row(const Load& load, const float* x, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int k = 0; k < 8; ++k) acc[k] += load(c + k) * x[c + k];
    for (; c < n; ++c) acc[0] += load(c) * x[c];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
    require_matmul_support(w.type, "matmul");
    const int64_t n = w.cols;
    pool.parallel_for(w.rows, 16, [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) {
            for (int64_t t = 0; t < n_tokens; ++t) {
                const float* xt = x + t * n;
                float v = 0;
                if (w.type == GgmlType::F32) {
                    const float* row = static_cast<const float*>(w.data) + r * n;
                    v = dot_row([&](int64_t c) { return row[c]; }, xt, n);
                } else if (w.type == GgmlType::F16) {
                    const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * n;
                    v = dot_row([&](int64_t c) { return f16_to_f32(row[c]); }, xt, n);
                } else {
                    const uint16_t* row = static_cast<const uint16_t*>(w.data) + r * n;
                    v = dot_row([&](int64_t c) { return bf16_to_f32(row[c]); }, xt, n);
                }
                y[t * w.rows + r] = v;
            }
        }
    });
}

}  // namespace pagoda::kernels
