// BlockManager: the bookkeeping of the paged KV cache — which physical block holds which tokens of
// which sequence. Pure logic (no tensors): block ids here index the blocks of a KvPool built with
// the same block count and block size.
//
// Block states:  free (on the free list)  ->  used (ref count > 0, owned by >= 1 block tables)
//                used, full and published in the prefix cache  ->  ref 0: evictable (kept, LRU)
//                evictable  ->  used again on a prefix hit, or evicted (hash dropped) when the free
//                list is empty and a new block is needed.
// Invariant: free + evictable + used == n_blocks; a block's ref count == number of block-table
// entries naming it.
//
// Per-step protocol (the scheduler drives it; the model only sees slots and block tables):
//   admission : can_allocate(prompt) -> allocate(seq, prompt)     result.n_cached_tokens prompt
//               tokens already have their KV (prefix cache hit): compute from that position on.
//   decode    : can_append(seq, 1) -> append(seq, {token}, copies) then run copies on the pool
//               (KvPool::copy_block) BEFORE the forward step writes KV.
//   each step : slots(seq, begin, end, out) gives the KV slot of each token being computed;
//               block_table(seq) goes to the attention kernel.
//   after step: mark_computed(seq, n) — the first n tokens now have KV in the pool; full blocks
//               among them become shareable through the prefix cache.
//   fork      : fork(parent, child) shares every block (copy-on-write later); free(seq) at the end.
//   second tier: set_on_evict() sees every cached block just before eviction drops it (its KV is
//               still intact in the pool until the next forward step), and allocate(...,
//               n_tier_blocks) takes blocks whose KV the caller loads from that tier: they count
//               as computed and are published at once (prefix_tier.h, engine/prefix_tier_link.h).
// Sliding windows: when every layer of the model attends only to the last W positions
// (set_sliding_window(W)), mark_computed also releases the blocks wholly below the window of the
// next token (positions < n_computed - W + 1): no later token reads them. Their table entries become
// kFreedBlock (the table keeps its length, so positions still index it). A model with any global
// layer keeps window 0 and every block. Published blocks released this way stay in the prefix cache.
// Running out of blocks is never an exception: can_* queries and KvStatus::out_of_blocks leave
// the state untouched so the scheduler can preempt or wait. Misuse (unknown or duplicate sequence
// id, an empty prompt, marking more tokens computed than exist) throws pagoda::Error.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

namespace pagoda::kv {

using SeqId = int64_t;

enum class KvStatus { ok, out_of_blocks };

// A copy-on-write the caller must execute on the pool (all layers, K and V) before writing KV.
struct BlockCopy {
    int32_t src;
    int32_t dst;
};

struct AllocateResult {
    KvStatus status = KvStatus::ok;
    int64_t n_cached_tokens = 0;  // prompt tokens whose KV is already in the pool (multiple of block size)
                                  // or comes from the second tier (tier_blocks)
    // The blocks allocate(..., n_tier_blocks) took for the tier's blocks, in prompt order: the
    // caller must fill them before the next forward step.
    std::vector<int32_t> tier_blocks;
};

// A cached block about to be evicted (set_on_evict).
struct EvictedBlock {
    int32_t block = -1;
    uint64_t hash = 0, parent_hash = 0, extra_key = 0;
    std::span<const int32_t> tokens;  // block_size of them
};

struct PrefixCacheStats {
    int64_t queried_tokens = 0;  // prompt tokens offered to the cache by allocate()
    int64_t hit_tokens = 0;      // of those, tokens served from cached blocks
    int64_t evicted_blocks = 0;  // cached blocks dropped to make room
    int64_t tier_hit_tokens = 0; // prompt tokens whose KV came from the second tier
    double hit_rate() const { return queried_tokens ? double(hit_tokens) / double(queried_tokens) : 0.0; }
};

class BlockManager {
public:
    static constexpr int32_t kFreedBlock = -1;  // a table entry whose block was released (sliding window)

    // n_blocks >= 1; block_size a power of two in 1..256 (same as the pool's).
    BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_caching = true);

    int32_t n_blocks() const { return n_blocks_; }
    int32_t block_size() const { return block_size_; }
    bool prefix_caching() const { return prefix_caching_; }
    // 0 (default): keep every block. window >= 1: free blocks outside it (see above). Throws if negative.
    void set_sliding_window(int32_t window);
    int32_t sliding_window() const { return window_; }

    // ---- capacity (no state change) ----
    int32_t num_free_blocks() const { return int32_t(free_list_.size()); }
    int32_t num_evictable_blocks() const { return n_evictable_; }
    int32_t num_used_blocks() const { return n_blocks_ - num_free_blocks() - n_evictable_; }
    // Blocks a new allocation could obtain (free + evictable).
    int32_t num_available_blocks() const { return num_free_blocks() + n_evictable_; }
    // Whether allocate(prompt, extra_key) would succeed now (counts prefix hits).
    bool can_allocate(std::span<const int32_t> prompt, uint64_t extra_key = 0) const;
    // How many of the available (free + evictable) blocks allocate() would consume for this prompt
    // now: blocks for the tokens not served by the cache, plus cached hits that are currently
    // evictable (re-referencing them takes them off the evictable list).
    // max_hit_blocks >= 0 reuses at most that many leading cached blocks (as allocate's).
    int32_t blocks_needed(std::span<const int32_t> prompt, uint64_t extra_key = 0, bool reuse_prefix = true,
                          int64_t max_hit_blocks = -1) const;
    // Whether append(seq, n_new_tokens tokens) would succeed now (counts copy-on-write).
    bool can_append(SeqId seq, int64_t n_new_tokens) const;

    // ---- sequence lifecycle ----
    // Registers a new sequence holding `prompt` and gives it blocks for every prompt token, reusing
    // cached full blocks of its prefix. At least the last prompt token is always left to compute
    // (so the model produces logits), and a reused prefix is a whole number of blocks. With
    // reuse_prefix false nothing is reused (every token is computed: an embedding pools them all),
    // though the blocks are still published once computed.
    // n_tier_blocks more blocks after the pool's hits are supplied by the second tier (at most
    // what the last-token rule leaves; throws otherwise): they take fresh blocks, count as
    // computed and are published; result.tier_blocks names them.
    // max_hit_blocks >= 0 reuses at most that many leading cached blocks (a hybrid model resumes
    // only where it has a recurrent-state snapshot); the rest are computed again in fresh blocks.
    AllocateResult allocate(SeqId seq, std::span<const int32_t> prompt, uint64_t extra_key = 0, bool reuse_prefix = true,
                            int64_t n_tier_blocks = 0, int64_t max_hit_blocks = -1);
    // How many leading blocks of the prompt the pool would serve (the tier is asked for the next).
    int64_t cached_prefix_blocks(std::span<const int32_t> prompt, uint64_t extra_key = 0) const;
    // The chain hashes of those blocks, in order.
    std::vector<uint64_t> cached_prefix_hashes(std::span<const int32_t> prompt, uint64_t extra_key = 0) const;
    // Whether a block with this chain hash is in the prefix cache now.
    bool is_cached_hash(uint64_t hash) const { return cache_.count(hash) != 0; }
    // The chain hash of seq's computed full block i (i < num_computed(seq) / block_size).
    uint64_t block_hash(SeqId seq, size_t i) const;
    // The most blocks of a prompt that may be reused (all whole blocks before its last token).
    int64_t max_reusable_blocks(std::span<const int32_t> prompt) const {
        return prompt.empty() ? 0 : int64_t((prompt.size() - 1) / size_t(block_size_));
    }
    // Called with each cached block just before eviction reuses it (null: none).
    void set_on_evict(std::function<void(const EvictedBlock&)> hook) { on_evict_ = std::move(hook); }
    // Calls fn for every cached block not in use (evictable), least recently used first.
    void for_each_evictable(const std::function<void(const EvictedBlock&)>& fn) const;
    // Adds tokens to the end of a sequence, taking new blocks as the last fills up. If the last
    // block is shared (after fork) it is first replaced by a private copy, reported in `copies`
    // (appended to, not cleared).
    KvStatus append(SeqId seq, std::span<const int32_t> tokens, std::vector<BlockCopy>& copies);
    // Keeps a sequence's blocks out of the prefix cache for its whole life: they are never published,
    // so free() returns them straight to the free list. For KV that is not a function of the prefix
    // alone (an encoder's bidirectional attention: a token's K/V depends on the later tokens too).
    void keep_private(SeqId seq);
    // Declares that the first n_computed tokens of seq have their KV in the pool (monotonic).
    void mark_computed(SeqId seq, int64_t n_computed);
    // New sequence `child` sharing all of parent's blocks and tokens. Parent must be fully
    // computed (its KV is what the child will read).
    void fork(SeqId parent, SeqId child);
    // Releases a sequence's blocks (cached full blocks stay evictable).
    void free(SeqId seq);
    // Drops the sequence's tokens from n_tokens on (speculative drafts the model refused) and the
    // blocks that then hold none. Only uncomputed tokens may go: n_tokens >= num_computed(seq).
    void truncate(SeqId seq, int64_t n_tokens);

    // ---- step inputs ----
    bool has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }
    const std::vector<int32_t>& block_table(SeqId seq) const;
    const std::vector<int32_t>& tokens(SeqId seq) const;
    int64_t num_tokens(SeqId seq) const;
    int64_t num_computed(SeqId seq) const;
    // Leading table entries of seq freed under the sliding window.
    int64_t num_freed_blocks(SeqId seq) const;
    // Slot of token position pos (0 <= pos < num_tokens; throws for a position in a freed block).
    int64_t slot(SeqId seq, int64_t pos) const;
    // Slots of positions [begin, end) into out[0 .. end-begin).
    void slots(SeqId seq, int64_t begin, int64_t end, int64_t* out) const;

    // ---- introspection ----
    int32_t ref_count(int32_t block) const { return blocks_[size_t(block)].ref; }
    bool is_cached(int32_t block) const { return blocks_[size_t(block)].cached; }
    std::vector<SeqId> sequences() const;
    const PrefixCacheStats& stats() const { return stats_; }
    // Drops every cached (evictable) block back to the free list, e.g. after a weight reload.
    void clear_prefix_cache();

private:
    struct Block {
        int32_t ref = 0;
        bool cached = false;        // published in cache_ under `hash`
        bool in_free_list = false;
        uint64_t hash = 0;
        uint64_t parent_hash = 0;   // for the collision check on hits
        uint64_t extra_key = 0;
        int32_t lru_prev = -1, lru_next = -1;  // evictable list links (ref == 0 && cached)
        bool evictable = false;
    };
    struct Sequence {
        std::vector<int32_t> tokens;
        std::vector<int32_t> table;
        std::vector<uint64_t> block_hashes;  // chain hashes of the leading full, computed blocks
        int64_t n_computed = 0;
        uint64_t extra_key = 0;
        size_t n_freed = 0;  // table[0 .. n_freed) are kFreedBlock
        bool publish = true;  // false: keep_private (its blocks never enter the prefix cache)
    };

    Sequence& seq_ref(SeqId seq);
    const Sequence& seq_ref(SeqId seq) const;
    // Cached blocks that serve the prompt's prefix (capped to leave the last token), with hashes.
    void match_prefix(std::span<const int32_t> prompt, uint64_t extra_key, std::vector<int32_t>& blocks,
                      std::vector<uint64_t>& hashes) const;
    int32_t lookup(uint64_t hash, uint64_t parent, const int32_t* tokens, uint64_t extra_key) const;
    EvictedBlock evicted(int32_t block) const;
    int32_t take_block();  // from the free list, else evict the least recently used cached block
    void acquire(int32_t block);
    void release(int32_t block);
    void lru_push_back(int32_t block);
    void lru_remove(int32_t block);
    void uncache(int32_t block);
    void publish(Sequence& s, size_t block_index);

    int32_t n_blocks_;
    int32_t block_size_;
    bool prefix_caching_;
    int32_t window_ = 0;
    std::vector<Block> blocks_;
    std::vector<int32_t> block_tokens_;  // tokens of each cached block (n_blocks x block_size)
    std::vector<int32_t> free_list_;     // stack; top = back
    int32_t lru_head_ = -1, lru_tail_ = -1, n_evictable_ = 0;
    std::unordered_map<uint64_t, int32_t> cache_;
    std::unordered_map<SeqId, Sequence> seqs_;
    PrefixCacheStats stats_;
    std::function<void(const EvictedBlock&)> on_evict_;
};

}  // namespace pagoda::kv
