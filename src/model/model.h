// A loaded llama-family model and its forward pass over a Batch:
//   logits = forward(batch, cache)
// Each token is embedded, runs through every layer (RMSNorm, Q/K/V projections with optional bias,
// RoPE, causal grouped-query attention over its sequence's cached keys, output projection, residual,
// RMSNorm, SwiGLU FFN, residual), and the rows that want logits get the final norm and output head.
// The K/V of the batch's tokens are written into the cache before attention reads it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/kv_contiguous.h"
#include "model/weights.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

struct ModelOptions {
    int n_threads = 0;  // 0: physical cores
};

class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, const ModelOptions& options = {});
    // Uses an already open file (kept alive by the model).
    static std::unique_ptr<Model> from_file(std::shared_ptr<const gguf::File> file, const ModelOptions& options = {});

    const ModelConfig& config() const { return config_; }
    const gguf::File& file() const { return *file_; }
    std::shared_ptr<const gguf::File> file_ptr() const { return file_; }
    ThreadPool& pool() { return *pool_; }

    // Returns logits [batch.n_logit_rows()][vocab], rows in batch order. Throws on invalid tokens,
    // positions or sequence ids (nothing is written to the cache then).
    std::vector<float> forward(const Batch& batch, ContiguousKvCache& cache);

private:
    Model() = default;
    void validate(const Batch& batch, const ContiguousKvCache& cache) const;
    void attention(int64_t layer, const Batch& batch, ContiguousKvCache& cache);
    void rope_rows(float* rows, int64_t n_heads, const Batch& batch);

    std::shared_ptr<const gguf::File> file_;
    ModelConfig config_;
    ModelWeights weights_;
    std::vector<double> rope_inv_freq_;
    std::unique_ptr<ThreadPool> pool_;
    // Scratch, grown to the largest batch seen.
    std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
};

}  // namespace pagoda::model
