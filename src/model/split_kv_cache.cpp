#include "model/split_kv_cache.h"

#include "core/error.h"

namespace pagoda::model {

SplitKvCache::SplitKvCache(const kv::KvLayout& layout, std::vector<Part> parts)
    : KvCache(layout, parts.empty() ? 0 : parts[0].cache->n_blocks()), parts_(std::move(parts)) {
    int32_t next = 0;
    for (const Part& p : parts_) {
        const kv::KvLayout& l = p.cache->layout();
        if (p.first_layer != next || l.n_kv_heads != layout.n_kv_heads || l.head_dim != layout.head_dim ||
            l.block_size != layout.block_size || l.dtype != layout.dtype || p.cache->n_blocks() != n_blocks())
            fail("split KV cache: the part from layer {} does not continue the layout", p.first_layer);
        next += l.n_layers;
    }
    if (next != layout.n_layers) fail("split KV cache: the parts hold {} of {} layers", next, layout.n_layers);
}

void SplitKvCache::copy_block(int32_t src, int32_t dst) {
    for (Part& p : parts_) p.cache->copy_block(src, dst);
}

void SplitKvCache::export_block(int32_t block, std::span<uint8_t> out) const {
    if (out.size() != layout().bytes_per_block())
        fail("KV export of block {}: {} bytes, expected {}", block, out.size(), layout().bytes_per_block());
    for (const Part& p : parts_) p.cache->export_block(block, out.subspan(offset_of(p), p.cache->layout().bytes_per_block()));
}

void SplitKvCache::import_block(int32_t block, std::span<const uint8_t> in) {
    if (in.size() != layout().bytes_per_block())
        fail("KV import of block {}: {} bytes, expected {}", block, in.size(), layout().bytes_per_block());
    for (Part& p : parts_) p.cache->import_block(block, in.subspan(offset_of(p), p.cache->layout().bytes_per_block()));
}

const SplitKvCache::Part& SplitKvCache::part_of(int32_t layer) const {
    for (const Part& p : parts_)
        if (layer >= p.first_layer && layer < p.first_layer + p.cache->layout().n_layers) return p;
    fail("KV read: layer {} is outside the cache's {} layers", layer, layout().n_layers);
}

void SplitKvCache::read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const {
    const Part& p = part_of(layer);
    p.cache->read_k(layer - p.first_layer, slot, kv_head, out);
}

void SplitKvCache::read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const {
    const Part& p = part_of(layer);
    p.cache->read_v(layer - p.first_layer, slot, kv_head, out);
}

}  // namespace pagoda::model
