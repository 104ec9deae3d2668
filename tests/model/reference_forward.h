// An independent, deliberately naive llama/qwen2 forward pass for tests: plain loops, double
// accumulation, full recomputation of every position, written from the maths rather than from the
// engine's code. It reads weights straight from the GGUF file (F32/F16/BF16).
#pragma once
#include <vector>

#include "gguf/gguf.h"

namespace pagoda::test {

// Returns logits [tokens.size()][vocab] in double, position i = index i.
std::vector<std::vector<double>> reference_forward(const gguf::File& file, const std::vector<int>& tokens);

}  // namespace pagoda::test
