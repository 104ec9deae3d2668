// Pooling of an embedding request's final hidden states into one vector. mean averages every
// prompt token's row, last takes the last token's (the one that has seen the whole text under
// causal attention), cls takes the first token's (for models trained with a leading CLS token).
// Rows are accumulated in double as they arrive, chunk by chunk, so chunked prefill and
// preemption (which recomputes rows already seen) give the same vector as one whole pass.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::engine {

enum class Pooling { mean, last, cls };
const char* pooling_name(Pooling p);  // "mean", "last", "cls"
// "mean", "last", "cls" (or "first"); nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);
// llama.cpp's GGUF `{arch}.pooling_type`: 1 mean, 2 cls, 3 last; nullopt for none/rank/unknown.
std::optional<Pooling> pooling_from_gguf(int64_t type);

struct EmbeddingSpec {
    Pooling pooling = Pooling::last;
    bool normalize = true;  // L2-normalise the pooled vector
};

// Whether the row of prompt position `pos` (of n_prompt) feeds the pooled vector.
bool pools_position(Pooling p, int64_t pos, int64_t n_prompt);

class PooledEmbedding {
public:
    PooledEmbedding() = default;
    PooledEmbedding(EmbeddingSpec spec, int64_t n_prompt, int64_t dim);
    // Row of a pooled prompt position (pools_position); rows of positions already added are
    // ignored (recomputation). Mean pooling takes its rows in position order.
    void add(int64_t pos, const float* row);
    bool complete() const;
    // Call when every pooled position has been added (before, for a prompt cut short: throws).
    std::vector<float> result() const;

private:
    EmbeddingSpec spec_;
    int64_t n_prompt_ = 0, dim_ = 0, next_ = 0, rows_ = 0;
    std::vector<double> sum_;
};

}  // namespace pagoda::engine
