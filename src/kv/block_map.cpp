#include "kv/block_map.h"

namespace pagoda::kv {

BlockMap snapshot_block_map(const BlockManager& blocks) {
    const int32_t n = blocks.n_blocks();
    BlockMap m;
    m.block_size = blocks.block_size();
    m.use.assign(size_t(n), BlockUse::free);
    m.owner.assign(size_t(n), 0);
    m.holders.assign(size_t(n), 0);
    for (int32_t b = 0; b < n; ++b) {
        if (blocks.ref_count(b) > 0) m.use[size_t(b)] = BlockUse::used;
        else if (blocks.is_cached(b)) m.use[size_t(b)] = BlockUse::cached;  // ref 0 and published: evictable
    }
    for (SeqId seq : blocks.sequences()) {
        for (int32_t b : blocks.block_table(seq)) {
            if (b == BlockManager::kFreedBlock) continue;  // released under the sliding window
            SeqId& o = m.owner[size_t(b)];
            if (m.holders[size_t(b)]++ == 0 || seq < o) o = seq;
        }
    }
    for (BlockUse u : m.use) {
        if (u == BlockUse::free) ++m.n_free;
        else if (u == BlockUse::cached) ++m.n_cached;
        else ++m.n_used;
    }
    return m;
}

}  // namespace pagoda::kv
