// The seam between the engine and the compute layer: something that runs one forward step over a
// Batch (tokens, positions, KV slots, block tables) and returns logits for the rows that want them.
// The real implementation wraps model::Model and its paged KV pool; tests use scripted fakes.
#pragma once
#include <cstdint>
#include <vector>

#include "model/batch.h"

namespace pagoda::engine {

struct StepModelInfo {
    int64_t vocab_size = 0;
    int32_t n_kv_blocks = 0;     // blocks in the KV pool (BlockManager must use the same count)
    int32_t block_size = 16;     // tokens per block
    int64_t max_context = 0;     // longest sequence (prompt + output) the model accepts
    uint64_t model_key = 0;      // distinguishes weights in prefix-cache hashes
};

class StepModel {
public:
    virtual ~StepModel() = default;
    virtual const StepModelInfo& info() const = 0;
    // Runs batch.block_copies, writes the K/V of every token to its slot, and returns logits
    // [batch.n_logit_rows()][vocab_size]. Throws pagoda::Error on invalid input (nothing written).
    virtual std::vector<float> forward(const model::Batch& batch) = 0;
};

}  // namespace pagoda::engine
