// A loaded llama-family model and its forward pass over a Batch:
//   logits = forward(batch, cache)
// Each token is embedded, runs through every layer (RMSNorm, Q/K/V projections with optional bias,
// RoPE, causal grouped-query attention over its sequence's cached keys, output projection, residual,
// RMSNorm, SwiGLU FFN, residual), and the rows that want logits get the final norm and output head.
// The K/V of the batch's tokens are written into their paged-KV slots before attention reads them
// through each sequence's block table.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/batch.h"
#include "model/config.h"
#include "kv/kv_pool.h"
#include "model/weights.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

// The activations entering each group of matrix multiplications, for calibration (`quantize --calib`):
// attention feeds attn_q/k/v, attention_output feeds attn_output, ffn feeds ffn_gate/up, ffn_down
// feeds ffn_down, output (layer -1) feeds the output head.
enum class MatmulInput { attention, attention_output, ffn, ffn_down, output };
using ActivationObserver =
    std::function<void(int64_t layer, MatmulInput input, const float* x, int64_t n_tokens, int64_t cols)>;

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

    // The KV cache shape for this model: F32 elements when the weights are F32, else F16, unless
    // `dtype` is given.
    kv::KvLayout kv_layout(int32_t block_size, std::optional<kv::KvDtype> dtype = std::nullopt) const;

    // Returns logits [batch.n_logit_rows()][vocab], rows in batch order. Throws pagoda::Error on
    // invalid tokens, positions, slots or sequence indices (before anything is written).
    std::vector<float> forward(const Batch& batch, kv::KvPool& pool);

    // The memory a decode step streams: every matmul weight as the kernels read it (packed copy, or
    // the file's bytes), the output head included, the token embedding table excluded unless tied.
    std::vector<std::span<const uint8_t>> weight_memory() const;

    // Called with every matmul input during forward() while set (null: off, no cost).
    void set_activation_observer(ActivationObserver observer) { observer_ = std::move(observer); }

private:
    Model() = default;
    void validate(const Batch& batch, const kv::KvPool& pool) const;
    void compute_rope_tables(const Batch& batch);

    std::shared_ptr<const gguf::File> file_;
    ModelConfig config_;
    ModelWeights weights_;
    std::vector<double> rope_inv_freq_;
    std::vector<float> rope_cos_, rope_sin_;  // [token][rope_dims / 2] of the current step
    void observe(int64_t layer, MatmulInput input, const float* x, int64_t n, int64_t cols) const {
        if (observer_) observer_(layer, input, x, n, cols);
    }

    std::unique_ptr<ThreadPool> pool_;
    ActivationObserver observer_;
    // Scratch, grown to the largest batch seen.
    std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
    std::vector<float> fused_;  // output of a stacked matmul ([q | k | v] or [gate | up] per token)
};

}  // namespace pagoda::model
