// The CPU backend's copy_columns (ColumnCopy): per-head column ranges of f32 rows copied
// between two tensors, as MLA (deepseek2) assembles its keys and compacts its attention output.
#pragma once
#include "backend/backend.h"

namespace pagoda::backend::cpu {

// dst (rows x dst_cols) takes c's ranges from src (rows x src_cols); the caller checked the shapes
// (backend::check_column_copy).
void copy_columns_f32(const float* src, int64_t src_cols, float* dst, int64_t dst_cols, int64_t rows,
                      const ColumnCopy& c);

}  // namespace pagoda::backend::cpu
