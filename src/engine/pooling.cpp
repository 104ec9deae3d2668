#include "engine/pooling.h"

#include <cmath>

#include "core/error.h"

namespace pagoda::engine {

const char* pooling_name(Pooling p) {
    switch (p) {
        case Pooling::mean: return "mean";
        case Pooling::last: return "last";
        case Pooling::cls: return "cls";
    }
    return "?";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
    if (name == "mean") return Pooling::mean;
    if (name == "last") return Pooling::last;
    if (name == "cls" || name == "first") return Pooling::cls;
    return std::nullopt;
}

std::optional<Pooling> pooling_from_gguf(int64_t type) {
    switch (type) {
        case 1: return Pooling::mean;
        case 2: return Pooling::cls;
        case 3: return Pooling::last;
        default: return std::nullopt;
    }
}

bool pools_position(Pooling p, int64_t pos, int64_t n_prompt) {
    switch (p) {
        case Pooling::mean: return pos >= 0 && pos < n_prompt;
        case Pooling::last: return pos == n_prompt - 1;
        case Pooling::cls: return pos == 0;
    }
    return false;
}

PooledEmbedding::PooledEmbedding(EmbeddingSpec spec, int64_t n_prompt, int64_t dim)
    : spec_(spec), n_prompt_(n_prompt), dim_(dim), sum_(size_t(dim), 0.0) {
    if (n_prompt < 1 || dim < 1) fail("embedding: {} prompt tokens and {} dimensions", n_prompt, dim);
}

void PooledEmbedding::add(int64_t pos, const float* row) {
    if (!pools_position(spec_.pooling, pos, n_prompt_))
        fail("embedding: position {} of {} is not pooled by {}", pos, n_prompt_, pooling_name(spec_.pooling));
    if (pos < next_) return;  // recomputed after a preemption: already counted
    if (spec_.pooling == Pooling::mean && pos != next_)
        fail("embedding: row of position {} arrived before position {}", pos, next_);
    next_ = pos + 1;
    for (int64_t i = 0; i < dim_; ++i) sum_[size_t(i)] += double(row[i]);
    ++rows_;
}

bool PooledEmbedding::complete() const {
    return rows_ > 0 && (spec_.pooling == Pooling::cls || next_ == n_prompt_);
}

std::vector<float> PooledEmbedding::result() const {
    if (!complete() || rows_ == 0) fail("embedding: pooled {} of {} prompt positions", next_, n_prompt_);
    std::vector<double> v = sum_;
    for (double& x : v) x /= double(rows_);
    if (spec_.normalize) {
        double norm = 0;
        for (double x : v) norm += x * x;
        norm = std::sqrt(norm);
        if (norm > 0)
            for (double& x : v) x /= norm;
    }
    return {v.begin(), v.end()};
}

}  // namespace pagoda::engine
