// BlockMap: a point-in-time picture of a BlockManager's pool for display (the dashboard's KV map):
// each block's use — free (on the free list), cached (ref 0 but holding a reusable prefix block,
// evictable) or used (named by >= 1 block tables) — and, for used blocks, which sequence holds it.
// Taken by whoever owns the BlockManager (the engine thread), copied out, read anywhere.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/block_manager.h"

namespace pagoda::kv {

enum class BlockUse : uint8_t { free, cached, used };

struct BlockMap {
    int32_t block_size = 0;
    std::vector<BlockUse> use;     // one entry per block, by block id
    std::vector<SeqId> owner;      // used blocks: the lowest id of the sequences holding it; else 0
    std::vector<int32_t> holders;  // used blocks: how many block-table entries name it (> 1: shared)
    int32_t n_free = 0, n_cached = 0, n_used = 0;

    int32_t n_blocks() const { return int32_t(use.size()); }
};

// O(blocks + block-table entries). The counts equal the manager's num_free / num_evictable /
// num_used blocks.
BlockMap snapshot_block_map(const BlockManager& blocks);

}  // namespace pagoda::kv
