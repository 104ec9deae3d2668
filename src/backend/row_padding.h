// An optional capability beside backend::Backend: a backend that may compute padding rows past a
// step's own (Vulkan's replay buckets: a decode step of n tokens computed as bit_ceil(n) rows, so a
// few recorded command buffers serve every batch size) implements RowPadding too, and the model
// layer, which knows how it laid out the arena, tells it before each begin_step how many rows every
// step tensor has room for. Padding rows' values are never read. Found by dynamic_cast, so backends
// without it (cpu, reference) and the Backend interface are untouched.
#pragma once
#include <cstdint>

namespace pagoda::backend {

class RowPadding {
public:
    virtual ~RowPadding() = default;
    // For the next begin_step: every tensor of the step has room for `rows` rows (the graph
    // executor's layout: a step tensor's rows sit `rows` apart from the next tensor), or 0: a tensor
    // holds exactly its rows (tests' hand-placed tensors, a split graph's imported rows, state rows).
    // Reset to 0 by each begin_step, so it holds for one step only.
    virtual void set_row_capacity(int64_t rows) = 0;
};

}  // namespace pagoda::backend
