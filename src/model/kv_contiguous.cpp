#include "model/kv_contiguous.h"

#include "core/error.h"

namespace pagoda::model {

ContiguousKvCache::ContiguousKvCache(const ModelConfig& c, int64_t n_seqs, int64_t capacity)
    : n_layers_(c.n_layers), n_seqs_(n_seqs), capacity_(capacity), kv_dim_(c.kv_dim()) {
    if (n_seqs <= 0 || capacity <= 0) fail("KV cache needs at least one sequence and one position");
    size_t n = size_t(n_layers_ * n_seqs_ * capacity_ * kv_dim_);
    k_.assign(n, 0.0f);
    v_.assign(n, 0.0f);
}

void ContiguousKvCache::check(int64_t seq, int64_t pos) const {
    if (seq < 0 || seq >= n_seqs_) fail("sequence id {} is outside the KV cache ({} sequences)", seq, n_seqs_);
    if (pos < 0 || pos >= capacity_)
        fail("position {} is outside the context window of {} tokens", pos, capacity_);
}

}  // namespace pagoda::model
