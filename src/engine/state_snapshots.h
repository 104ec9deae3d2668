// Recurrent-state snapshots: the prefix cache of a hybrid model (qwen35: gated DeltaNet layers
// beside full attention). A cached KV prefix is of use to such a model only together with the
// recurrent state at its end, so the scheduler copies a sequence's state into a snapshot slot (a
// model state slot that no running sequence holds) when its computed tokens reach a chosen block
// boundary, keyed by that block's chain hash (kv/block_hash.h: it names the whole prefix and the
// adapter key). A later prompt whose cached blocks reach a block with a snapshot resumes right after
// it, the snapshot copied into its own slot. A snapshot goes when its block leaves the prefix cache
// (drop(), from the block manager's eviction hook) or, when every slot is taken, least recently used
// first. Pure bookkeeping: the copies themselves ride in a step's Batch::state_copies.
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace pagoda::engine {

class StateSnapshots {
public:
    // `slots`: the model's state slots set aside for snapshots (none: snapshots are off).
    explicit StateSnapshots(std::vector<int32_t> slots);

    int32_t capacity() const { return capacity_; }
    int32_t size() const { return int32_t(by_hash_.size()); }
    // The slot holding the snapshot taken after the block with chain hash `hash`, or -1.
    int32_t find(uint64_t hash) const;
    // Marks a snapshot used (a prompt resumes from it): it becomes the last to be replaced.
    void touch(uint64_t hash);
    // A slot for a new snapshot of `hash`, which the caller fills before any step reads it: a free
    // one, else the least recently used snapshot's (that one is dropped). -1 when there are no
    // snapshot slots or `hash` already has one.
    int32_t take(uint64_t hash);
    // Its block left the prefix cache: the snapshot can no longer be reached (no-op if none).
    void drop(uint64_t hash);
    // Drops every snapshot (their contents are no longer trusted, e.g. after a failed step).
    void clear();

    int64_t taken() const { return taken_; }        // snapshots taken so far
    int64_t restored() const { return restored_; }  // prompts resumed from one so far

private:
    struct Entry {
        int32_t slot;
        std::list<uint64_t>::iterator lru;  // into lru_: front = least recently used
    };
    int32_t capacity_ = 0;
    std::vector<int32_t> free_;
    std::list<uint64_t> lru_;
    std::unordered_map<uint64_t, Entry> by_hash_;
    int64_t taken_ = 0, restored_ = 0;
};

}  // namespace pagoda::engine
