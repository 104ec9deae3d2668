// Contiguous key/value cache: per sequence and layer, K and V rows for positions 0..capacity-1.
// The foundation's cache for one or a few sequences; the paged cache (src/kv) supersedes it.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace pagoda::model {

class ContiguousKvCache {
public:
    ContiguousKvCache(const ModelConfig& config, int64_t n_seqs, int64_t capacity);

    int64_t capacity() const { return capacity_; }
    int64_t n_seqs() const { return n_seqs_; }
    float* k(int64_t layer, int64_t seq, int64_t pos) { return at(k_, layer, seq, pos); }
    float* v(int64_t layer, int64_t seq, int64_t pos) { return at(v_, layer, seq, pos); }
    // Throws when a sequence id or position is outside the cache.
    void check(int64_t seq, int64_t pos) const;

private:
    float* at(std::vector<float>& s, int64_t layer, int64_t seq, int64_t pos) {
        return s.data() + ((layer * n_seqs_ + seq) * capacity_ + pos) * kv_dim_;
    }
    int64_t n_layers_, n_seqs_, capacity_, kv_dim_;
    std::vector<float> k_, v_;
};

}  // namespace pagoda::model
