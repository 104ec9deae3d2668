// The paged KV cache of a model whose layers run on two backends (layer_split.h): each backend's own
// cache holds its layers only (the device's layers 0..N-1, the host's N..), with the same block ids,
// so block tables stay shared. As a KvCache it is the whole model's: copy_block copies the block in
// both parts, and export_block / import_block move a block in the one-backend layout (every layer, K
// then V), so prefix-tier blocks move between split and unsplit models of the same weights.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace pagoda::model {

class SplitKvCache final : public backend::KvCache {
public:
    struct Part {
        std::unique_ptr<backend::KvCache> cache;
        int32_t first_layer = 0;  // its layer 0 is the model's layer first_layer
    };
    // The parts cover the layout's layers in order, each with n_blocks blocks.
    SplitKvCache(const kv::KvLayout& layout, std::vector<Part> parts);

    backend::KvCache& part(size_t i) { return *parts_[i].cache; }
    void copy_block(int32_t src, int32_t dst) override;
    void export_block(int32_t block, std::span<uint8_t> out) const override;
    void import_block(int32_t block, std::span<const uint8_t> in) override;
    void read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const override;
    void read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const override;

private:
    const Part& part_of(int32_t layer) const;
    std::span<uint8_t>::size_type offset_of(const Part& p) const { return size_t(p.first_layer) * 2 * layout().layer_block_bytes(); }

    std::vector<Part> parts_;
};

}  // namespace pagoda::model
