// The reference backend's LoRA update (backend.h: Backend::lora_add) in plain double: for each
// segment's rows t, y[t] += scale * B (A x[t]), each product summed in index order. The oracle the
// other backends' LoRA kernels are checked against.
#pragma once
#include <cstdint>
#include <span>

#include "backend/backend.h"

namespace pagoda::backend::reference {

// x: rows x x_cols, y: rows x y_cols, row-major. Fails naming the row if a segment names one
// outside [0, rows).
void lora_add(const double* x, int64_t rows, int64_t x_cols, double* y, int64_t y_cols,
              std::span<const LoraSegment> segments);

}  // namespace pagoda::backend::reference
