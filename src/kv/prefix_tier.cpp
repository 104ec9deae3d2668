#include "kv/prefix_tier.h"

#include <cstring>

#include "core/error.h"

namespace pagoda::kv {

PrefixTier::PrefixTier(TierIdentity identity, const PrefixTierOptions& o) : identity_(std::move(identity)) {
    if (identity_.bytes_per_block == 0) fail("prefix tier: the model's KV blocks have no size");
    if (o.host_bytes > 0) host_.emplace(o.host_bytes);
    if (!o.dir.empty()) file_ = std::make_unique<FileBlockStore>(o.dir, o.dir_bytes, identity_);
}

bool PrefixTier::holds(uint64_t hash) const {
    if (host_) return host_->contains(hash);
    return file_ && file_->contains(hash);
}

void PrefixTier::spill(std::shared_ptr<const TierBlock> block) {
    if (!block || block->payload.size() != identity_.bytes_per_block ||
        block->tokens.size() != size_t(identity_.layout.block_size))
        fail("prefix tier: a spilled block has {} payload bytes and {} tokens, expected {} and {}",
             block ? block->payload.size() : 0, block ? block->tokens.size() : 0, identity_.bytes_per_block,
             identity_.layout.block_size);
    ++spilled_;
    spilled_bytes_ += int64_t(block->payload.size());
    if (file_) file_->store(block);
    if (host_) host_->put(std::move(block));
}

std::shared_ptr<const TierBlock> PrefixTier::fetch(uint64_t hash, uint64_t parent, const int32_t* tokens,
                                                   uint64_t extra_key) {
    auto matches = [&](const TierBlock& b) {
        return b.parent_hash == parent && b.extra_key == extra_key && b.tokens.size() == size_t(identity_.layout.block_size) &&
               std::memcmp(b.tokens.data(), tokens, b.tokens.size() * sizeof(int32_t)) == 0;
    };
    if (host_) {
        if (auto b = host_->get(hash); b && matches(*b)) {
            ++host_hits_;
            hit_bytes_ += int64_t(b->payload.size());
            return b;
        }
    }
    if (file_) {
        if (auto b = file_->load(hash); b && matches(*b)) {
            ++file_hits_;
            hit_bytes_ += int64_t(b->payload.size());
            if (host_) host_->put(b);  // the next miss in the pool finds it in memory
            return b;
        }
    }
    ++misses_;
    return nullptr;
}

void PrefixTier::flush() {
    if (file_) file_->flush();
}

PrefixTierStats PrefixTier::stats() const {
    PrefixTierStats s;
    s.host_hits = host_hits_;
    s.file_hits = file_hits_;
    s.misses = misses_;
    s.hit_bytes = hit_bytes_;
    s.spilled_blocks = spilled_;
    s.spilled_bytes = spilled_bytes_;
    s.spill_seconds = spill_seconds_;
    s.has_host = host_.has_value();
    s.has_file = file_ != nullptr;
    if (host_) {
        s.host_blocks = int64_t(host_->size());
        s.host_bytes = int64_t(host_->bytes());
        s.host_capacity = int64_t(host_->capacity());
    }
    if (file_) s.file = file_->stats();
    return s;
}

}  // namespace pagoda::kv
