// Reading an mmproj file's tensors for the vision towers: small tensors (norm weights, biases,
// position tables, patch kernels) as host floats, matrices as backend::MatrixSource views.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"

namespace pagoda::vision {

// The tensor's values as floats; F32, F16 or BF16 (else an error naming the tensor).
std::vector<float> tensor_floats(const gguf::File& f, const std::string& name);
// `rows` rows of `cols` values starting `first_row` rows into the tensor (a fused tensor's part).
backend::MatrixSource matrix_source(const gguf::File& f, const std::string& name, int64_t rows, int64_t cols,
                                    int64_t first_row = 0);

}  // namespace pagoda::vision
