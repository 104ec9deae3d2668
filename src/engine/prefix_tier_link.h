// Connects the engine to the prefix cache's second tier (kv::PrefixTier) through the compute seam:
// a cached block the pool evicts is exported from the model (StepModel::export_kv_block) into the
// tier, and at admission the scheduler asks the link (its PrefixSource) for the prompt's blocks
// after the pool's hits, which are imported into fresh pool blocks (import_kv_block) instead of
// being recomputed. The tier's identity is the model's key, backend and KV layout, so a store
// written by other weights or another layout is never used. Engine-thread only.
#pragma once
#include <memory>
#include <vector>

#include "engine/scheduler.h"
#include "model/step_model.h"
#include "kv/block_manager.h"
#include "kv/prefix_tier.h"

namespace pagoda::engine {

class PrefixTierLink final : public PrefixSource {
public:
    // Throws pagoda::Error when the model cannot move KV blocks or the directory is unusable.
    PrefixTierLink(model::StepModel& model, kv::BlockManager& blocks, const kv::PrefixTierOptions& options);
    ~PrefixTierLink() override;

    int64_t stage(std::span<const int32_t> tokens, int64_t first_block, int64_t max_blocks) override;
    void load(std::span<const int32_t> pool_blocks) override;

    // Writes the pool's cached blocks that the file store lacks (most recently used first, as many
    // as its size allows) and waits for the writes: a clean shutdown keeps the whole prefix cache.
    // Returns how many blocks were queued.
    int64_t persist_pool();
    void flush() { tier_.flush(); }
    kv::PrefixTierStats stats() const { return tier_.stats(); }

private:
    void spill(const kv::EvictedBlock& evicted);
    // The evicted block as a tier entry: its keys, tokens and K/V bytes copied out of the pool.
    std::shared_ptr<kv::TierBlock> export_block(const kv::EvictedBlock& evicted);

    model::StepModel& model_;
    kv::BlockManager& blocks_;
    kv::PrefixTier tier_;
    std::vector<std::shared_ptr<const kv::TierBlock>> staged_;
    std::vector<uint64_t> chain_;  // scratch: the prompt's block hashes
};

// The tier identity of a model (exposed for tests and tools).
kv::TierIdentity tier_identity(const model::StepModelInfo& info);

}  // namespace pagoda::engine
