#include "engine/prefix_tier_link.h"

#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "kv/block_hash.h"

namespace pagoda::engine {

kv::TierIdentity tier_identity(const model::StepModelInfo& info) {
    kv::TierIdentity id;
    id.model_key = info.model_key;
    id.backend = info.backend;
    id.layout = info.kv_layout;
    id.bytes_per_block = info.kv_bytes_per_block;
    return id;
}

namespace {

const model::StepModelInfo& checked(const model::StepModel& model) {
    const model::StepModelInfo& info = model.info();
    if (!model.can_transfer_kv() || info.kv_bytes_per_block == 0)
        fail("the prefix-cache tier needs a model that can copy its KV blocks out and back (this one cannot)");
    if (info.kv_layout.block_size != info.block_size)
        fail("the model reports KV blocks of {} tokens but a layout of {}", info.block_size, info.kv_layout.block_size);
    return info;
}

}  // namespace

PrefixTierLink::PrefixTierLink(model::StepModel& model, kv::BlockManager& blocks, const kv::PrefixTierOptions& options)
    : model_(model), blocks_(blocks), tier_(tier_identity(checked(model)), options) {
    if (!blocks_.prefix_caching())
        fail("--prefix-cache-host-memory and --prefix-cache-dir extend the prefix cache, which is off "
             "(--no-prefix-cache)");
    blocks_.set_on_evict([this](const kv::EvictedBlock& e) { spill(e); });
}

PrefixTierLink::~PrefixTierLink() { blocks_.set_on_evict({}); }

std::shared_ptr<kv::TierBlock> PrefixTierLink::export_block(const kv::EvictedBlock& e) {
    auto block = std::make_shared<kv::TierBlock>();
    block->hash = e.hash;
    block->parent_hash = e.parent_hash;
    block->extra_key = e.extra_key;
    block->tokens.assign(e.tokens.begin(), e.tokens.end());
    block->payload.resize(tier_.identity().bytes_per_block);
    model_.export_kv_block(e.block, block->payload);
    return block;
}

void PrefixTierLink::spill(const kv::EvictedBlock& e) {
    if (tier_.holds(e.hash)) return;  // loaded from the tier earlier, or spilled already
    const auto start = std::chrono::steady_clock::now();
    tier_.spill(export_block(e));
    tier_.add_spill_time(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

int64_t PrefixTierLink::stage(std::span<const int32_t> tokens, int64_t first, int64_t max) {
    staged_.clear();
    const int32_t bs = blocks_.block_size();
    chain_.clear();
    uint64_t parent = kv::kRootBlockHash;
    for (int64_t i = 0; i < max; ++i) {
        const int32_t* t = tokens.data() + size_t(i) * size_t(bs);
        const uint64_t h = kv::hash_block(parent, t, bs, 0);
        if (i >= first) {
            auto b = tier_.fetch(h, parent, t, 0);
            if (!b) break;
            staged_.push_back(std::move(b));
        }
        parent = h;
    }
    if (!staged_.empty()) log_debug("prefix tier: {} blocks after {} cached ones", staged_.size(), first);
    return int64_t(staged_.size());
}

void PrefixTierLink::load(std::span<const int32_t> pool_blocks) {
    if (pool_blocks.size() != staged_.size())
        fail("prefix tier: {} pool blocks for {} staged blocks", pool_blocks.size(), staged_.size());
    for (size_t i = 0; i < pool_blocks.size(); ++i) model_.import_kv_block(pool_blocks[i], staged_[i]->payload);
    staged_.clear();
}

int64_t PrefixTierLink::persist_pool() {
    kv::FileBlockStore* files = tier_.file_store();
    if (!files) return 0;
    std::vector<kv::EvictedBlock> cached;
    blocks_.for_each_evictable([&](const kv::EvictedBlock& e) { cached.push_back(e); });
    // The most recently used ones that fit the directory, written oldest first so the files'
    // times keep the pool's LRU order.
    const uint64_t file_bytes = tier_.identity().bytes_per_block + 1024;
    std::vector<const kv::EvictedBlock*> chosen;
    uint64_t room = files->capacity();
    for (auto it = cached.rbegin(); it != cached.rend() && room >= file_bytes; ++it) {
        room -= file_bytes;
        if (!files->contains(it->hash)) chosen.push_back(&*it);
    }
    int64_t queued = 0;
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) {
        const kv::EvictedBlock& e = **it;
        files->store(export_block(e), /*wait=*/true);
        ++queued;
    }
    files->flush();
    return queued;
}

}  // namespace pagoda::engine
