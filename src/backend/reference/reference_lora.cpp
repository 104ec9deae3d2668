#include "backend/reference/reference_lora.h"

#include <vector>

#include "core/error.h"

namespace pagoda::backend::reference {

void lora_add(const double* x, int64_t rows, int64_t x_cols, double* y, int64_t y_cols,
              std::span<const LoraSegment> segments) {
    std::vector<double> h;
    for (const LoraSegment& s : segments) {
        h.assign(size_t(s.rank), 0.0);
        for (int32_t t : s.rows) {
            if (t < 0 || t >= rows) fail("lora_add: row {} is outside the step's {} rows", t, rows);
            const double* xt = x + int64_t(t) * x_cols;
            for (int64_t r = 0; r < s.rank; ++r) {
                double acc = 0;
                for (int64_t c = 0; c < x_cols; ++c) acc += double(s.a[r * x_cols + c]) * xt[c];
                h[size_t(r)] = acc;
            }
            double* yt = y + int64_t(t) * y_cols;
            for (int64_t o = 0; o < y_cols; ++o) {
                double acc = 0;
                for (int64_t r = 0; r < s.rank; ++r) acc += double(s.b[o * s.rank + r]) * h[size_t(r)];
                yt[o] += double(s.scale) * acc;
            }
        }
    }
}

}  // namespace pagoda::backend::reference
