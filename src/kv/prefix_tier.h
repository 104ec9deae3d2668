// The prefix cache's second tier: full KV blocks evicted from the pool go to a bounded host-memory
// store and, with a directory, to files (which outlive the process); a later prompt whose prefix
// misses the pool finds its blocks here and loads them instead of recomputing them. Keyed by the
// block's chain hash within one TierIdentity (model, backend, KV layout); a hit is only served when
// the stored parent hash, extra key and tokens equal the prompt's, as the pool checks its own hits.
// The engine drives it (engine/prefix_tier_link.h): spill() on eviction, fetch() at admission.
// Single-threaded apart from the file store's writer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kv/file_block_store.h"
#include "kv/host_block_store.h"
#include "kv/tier_block.h"

namespace pagoda::kv {

struct PrefixTierOptions {
    uint64_t host_bytes = 0;  // 0: no host-memory store
    std::string dir;          // empty: no file store
    uint64_t dir_bytes = 0;   // the directory's limit (required with dir)
    bool enabled() const { return host_bytes > 0 || !dir.empty(); }
};

struct PrefixTierStats {
    int64_t host_hits = 0, file_hits = 0;  // blocks served
    int64_t misses = 0;                    // lookups that found no (valid) block
    int64_t hit_bytes = 0;                 // payload bytes loaded back
    int64_t spilled_blocks = 0, spilled_bytes = 0;  // blocks handed to the tier on eviction
    double spill_seconds = 0;              // engine-thread time spent spilling (export + store)
    int64_t host_blocks = 0, host_bytes = 0, host_capacity = 0;
    FileStoreStats file;
    bool has_host = false, has_file = false;
};

class PrefixTier {
public:
    // Throws pagoda::Error for an unusable directory (file_block_store.h).
    PrefixTier(TierIdentity identity, const PrefixTierOptions& options);

    const TierIdentity& identity() const { return identity_; }
    // Whether spilling `hash` again would add nothing (the host store has it; or, without one,
    // the file store has it or will).
    bool holds(uint64_t hash) const;
    void spill(std::shared_ptr<const TierBlock> block);
    // The block for chain hash `hash` if stored with these inputs; counts a hit or a miss.
    std::shared_ptr<const TierBlock> fetch(uint64_t hash, uint64_t parent_hash, const int32_t* tokens,
                                           uint64_t extra_key);
    void add_spill_time(double seconds) { spill_seconds_ += seconds; }
    void flush();  // file writes done
    PrefixTierStats stats() const;
    FileBlockStore* file_store() { return file_.get(); }

private:
    TierIdentity identity_;
    std::optional<HostBlockStore> host_;
    std::unique_ptr<FileBlockStore> file_;
    int64_t host_hits_ = 0, file_hits_ = 0, misses_ = 0, hit_bytes_ = 0, spilled_ = 0, spilled_bytes_ = 0;
    double spill_seconds_ = 0;
};

}  // namespace pagoda::kv
