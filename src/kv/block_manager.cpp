#include "kv/block_manager.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kv/block_hash.h"
#include "kv/kv_layout.h"

namespace pagoda::kv {

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_caching)
    : n_blocks_(n_blocks), block_size_(block_size), prefix_caching_(prefix_caching) {
    if (n_blocks < 1) fail("block manager: block count must be positive, got {}", n_blocks);
    if (block_size < 1 || block_size > kMaxBlockSize || (block_size & (block_size - 1)) != 0)
        fail("block manager: block size must be a power of two in 1..{}, got {}", kMaxBlockSize, block_size);
    blocks_.resize(size_t(n_blocks));
    if (prefix_caching_) block_tokens_.resize(size_t(n_blocks) * size_t(block_size));
    free_list_.reserve(size_t(n_blocks));
    // Stack with block 0 on top: blocks are handed out in ascending order from a fresh manager.
    for (int32_t b = n_blocks - 1; b >= 0; --b) {
        free_list_.push_back(b);
        blocks_[size_t(b)].in_free_list = true;
    }
}

void BlockManager::set_sliding_window(int32_t window) {
    if (window < 0) fail("block manager: the sliding window must not be negative, got {}", window);
    window_ = window;
}

int64_t BlockManager::num_freed_blocks(SeqId seq) const { return int64_t(seq_ref(seq).n_freed); }

BlockManager::Sequence& BlockManager::seq_ref(SeqId seq) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) fail("block manager: unknown sequence {}", seq);
    return it->second;
}

const BlockManager::Sequence& BlockManager::seq_ref(SeqId seq) const {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) fail("block manager: unknown sequence {}", seq);
    return it->second;
}

// ---- evictable (LRU) list: head = least recently released = first to evict ----

void BlockManager::lru_push_back(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    blk.lru_prev = lru_tail_;
    blk.lru_next = -1;
    if (lru_tail_ >= 0) blocks_[size_t(lru_tail_)].lru_next = b;
    else lru_head_ = b;
    lru_tail_ = b;
    blk.evictable = true;
    ++n_evictable_;
}

void BlockManager::lru_remove(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    if (blk.lru_prev >= 0) blocks_[size_t(blk.lru_prev)].lru_next = blk.lru_next;
    else lru_head_ = blk.lru_next;
    if (blk.lru_next >= 0) blocks_[size_t(blk.lru_next)].lru_prev = blk.lru_prev;
    else lru_tail_ = blk.lru_prev;
    blk.lru_prev = blk.lru_next = -1;
    blk.evictable = false;
    --n_evictable_;
}

void BlockManager::uncache(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    if (!blk.cached) return;
    auto it = cache_.find(blk.hash);
    if (it != cache_.end() && it->second == b) cache_.erase(it);
    blk.cached = false;
}

int32_t BlockManager::take_block() {
    int32_t b;
    if (!free_list_.empty()) {
        b = free_list_.back();
        free_list_.pop_back();
        blocks_[size_t(b)].in_free_list = false;
    } else {
        // Callers checked availability, so an evictable block exists.
        b = lru_head_;
        lru_remove(b);
        if (on_evict_) on_evict_(evicted(b));
        uncache(b);
        ++stats_.evicted_blocks;
    }
    blocks_[size_t(b)].ref = 1;
    return b;
}

EvictedBlock BlockManager::evicted(int32_t b) const {
    const Block& blk = blocks_[size_t(b)];
    return {b, blk.hash, blk.parent_hash, blk.extra_key,
            std::span<const int32_t>(&block_tokens_[size_t(b) * size_t(block_size_)], size_t(block_size_))};
}

void BlockManager::for_each_evictable(const std::function<void(const EvictedBlock&)>& fn) const {
    for (int32_t b = lru_head_; b >= 0; b = blocks_[size_t(b)].lru_next)
        if (blocks_[size_t(b)].cached) fn(evicted(b));
}

void BlockManager::acquire(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    if (blk.ref == 0 && blk.evictable) lru_remove(b);
    ++blk.ref;
}

void BlockManager::release(int32_t b) {
    Block& blk = blocks_[size_t(b)];
    if (--blk.ref > 0) return;
    if (blk.cached) {
        lru_push_back(b);
    } else {
        blk.in_free_list = true;
        free_list_.push_back(b);
    }
}

// ---- prefix cache ----

int32_t BlockManager::lookup(uint64_t hash, uint64_t parent, const int32_t* tokens, uint64_t extra_key) const {
    auto it = cache_.find(hash);
    if (it == cache_.end()) return -1;
    int32_t b = it->second;
    const Block& blk = blocks_[size_t(b)];
    // Compare the inputs of the hash too, so a 64-bit collision cannot serve someone else's KV.
    if (blk.parent_hash != parent || blk.extra_key != extra_key) return -1;
    if (std::memcmp(&block_tokens_[size_t(b) * size_t(block_size_)], tokens, size_t(block_size_) * 4) != 0) return -1;
    return b;
}

void BlockManager::match_prefix(std::span<const int32_t> prompt, uint64_t extra_key, std::vector<int32_t>& blocks,
                                std::vector<uint64_t>& hashes) const {
    blocks.clear();
    hashes.clear();
    if (!prefix_caching_ || prompt.empty()) return;
    // Reuse whole blocks only, and never the block holding the last prompt token: that token must
    // be computed to produce logits, and rewriting KV inside a shared block is not allowed.
    const size_t max_blocks = (prompt.size() - 1) / size_t(block_size_);
    uint64_t parent = kRootBlockHash;
    for (size_t i = 0; i < max_blocks; ++i) {
        const int32_t* toks = prompt.data() + i * size_t(block_size_);
        uint64_t h = hash_block(parent, toks, block_size_, extra_key);
        int32_t b = lookup(h, parent, toks, extra_key);
        if (b < 0) break;
        blocks.push_back(b);
        hashes.push_back(h);
        parent = h;
    }
}

void BlockManager::publish(Sequence& s, size_t i) {
    int32_t b = s.table[i];
    Block& blk = blocks_[size_t(b)];
    if (blk.cached) return;  // shared through a prefix hit or fork: already published
    uint64_t h = s.block_hashes[i];
    if (cache_.count(h)) return;  // identical content already cached in another block; keep that one
    cache_[h] = b;
    blk.cached = true;
    blk.hash = h;
    blk.parent_hash = i ? s.block_hashes[i - 1] : kRootBlockHash;
    blk.extra_key = s.extra_key;
    std::memcpy(&block_tokens_[size_t(b) * size_t(block_size_)], s.tokens.data() + i * size_t(block_size_),
                size_t(block_size_) * 4);
}

void BlockManager::clear_prefix_cache() {
    while (lru_head_ >= 0) {
        int32_t b = lru_head_;
        lru_remove(b);
        uncache(b);
        blocks_[size_t(b)].in_free_list = true;
        free_list_.push_back(b);
    }
    // Blocks still in use stay with their sequences but are no longer offered to new prompts.
    for (int32_t b = 0; b < n_blocks_; ++b) uncache(b);
    cache_.clear();
}

// ---- capacity ----

int32_t BlockManager::blocks_needed(std::span<const int32_t> prompt, uint64_t extra_key, bool reuse_prefix,
                                    int64_t max_hit_blocks) const {
    std::vector<int32_t> hit;
    std::vector<uint64_t> hashes;
    if (reuse_prefix) match_prefix(prompt, extra_key, hit, hashes);
    if (max_hit_blocks >= 0 && int64_t(hit.size()) > max_hit_blocks) hit.resize(size_t(max_hit_blocks));
    int64_t total = (int64_t(prompt.size()) + block_size_ - 1) / block_size_;
    int64_t need = total - int64_t(hit.size());
    for (int32_t b : hit)
        if (blocks_[size_t(b)].ref == 0) ++need;
    return int32_t(std::min<int64_t>(need, INT32_MAX));
}

bool BlockManager::can_allocate(std::span<const int32_t> prompt, uint64_t extra_key) const {
    return blocks_needed(prompt, extra_key) <= num_available_blocks();
}

bool BlockManager::can_append(SeqId seq, int64_t n_new_tokens) const {
    const Sequence& s = seq_ref(seq);
    if (n_new_tokens <= 0) return true;
    int64_t pos = int64_t(s.tokens.size());
    int64_t need = (pos + n_new_tokens + block_size_ - 1) / block_size_ - int64_t(s.table.size());
    if (pos % block_size_ != 0 && blocks_[size_t(s.table.back())].ref > 1) ++need;  // copy-on-write
    return need <= num_available_blocks();
}

// ---- lifecycle ----

int64_t BlockManager::cached_prefix_blocks(std::span<const int32_t> prompt, uint64_t extra_key) const {
    std::vector<int32_t> hit;
    std::vector<uint64_t> hashes;
    match_prefix(prompt, extra_key, hit, hashes);
    return int64_t(hit.size());
}

std::vector<uint64_t> BlockManager::cached_prefix_hashes(std::span<const int32_t> prompt, uint64_t extra_key) const {
    std::vector<int32_t> hit;
    std::vector<uint64_t> hashes;
    match_prefix(prompt, extra_key, hit, hashes);
    return hashes;
}

uint64_t BlockManager::block_hash(SeqId seq, size_t i) const {
    const Sequence& s = seq_ref(seq);
    if (i >= s.block_hashes.size())
        fail("block manager: sequence {} has {} computed full blocks, not {}", seq, s.block_hashes.size(), i + 1);
    return s.block_hashes[i];
}

AllocateResult BlockManager::allocate(SeqId seq, std::span<const int32_t> prompt, uint64_t extra_key, bool reuse_prefix,
                                      int64_t n_tier, int64_t max_hit_blocks) {
    if (seqs_.count(seq)) fail("block manager: sequence {} already exists", seq);
    if (prompt.empty()) fail("block manager: sequence {} has an empty prompt", seq);
    std::vector<int32_t> hit;
    std::vector<uint64_t> hashes;
    if (reuse_prefix) match_prefix(prompt, extra_key, hit, hashes);
    if (max_hit_blocks >= 0 && int64_t(hit.size()) > max_hit_blocks) {
        hit.resize(size_t(max_hit_blocks));
        hashes.resize(size_t(max_hit_blocks));
    }
    if (n_tier < 0 || (n_tier > 0 && (!prefix_caching_ || !reuse_prefix ||
                                      int64_t(hit.size()) + n_tier > max_reusable_blocks(prompt))))
        fail("block manager: sequence {} cannot take {} tier blocks after {} cached ones (at most {} reusable)", seq,
             n_tier, hit.size(), max_reusable_blocks(prompt));
    int64_t total = (int64_t(prompt.size()) + block_size_ - 1) / block_size_;
    int64_t need = total - int64_t(hit.size());
    for (int32_t b : hit)
        if (blocks_[size_t(b)].ref == 0) ++need;
    if (need > num_available_blocks()) return {KvStatus::out_of_blocks, 0};

    Sequence s;
    s.tokens.assign(prompt.begin(), prompt.end());
    s.extra_key = extra_key;
    s.table.reserve(size_t(total));
    for (int32_t b : hit) {  // take the hits first so eviction below cannot pick one of them
        acquire(b);
        s.table.push_back(b);
    }
    const size_t n_hit = hit.size();
    while (int64_t(s.table.size()) < total) s.table.push_back(take_block());
    s.block_hashes = std::move(hashes);
    AllocateResult result;
    // The tier's blocks are the next ones after the hits: their KV arrives before the next step,
    // so they are computed and shareable from now on.
    for (size_t i = n_hit; i < n_hit + size_t(n_tier); ++i) {
        const uint64_t parent = i ? s.block_hashes[i - 1] : kRootBlockHash;
        s.block_hashes.push_back(hash_block(parent, s.tokens.data() + i * size_t(block_size_), block_size_, extra_key));
        result.tier_blocks.push_back(s.table[i]);
        publish(s, i);
    }
    s.n_computed = int64_t(n_hit + size_t(n_tier)) * block_size_;
    if (prefix_caching_ && reuse_prefix) {
        stats_.queried_tokens += int64_t(prompt.size());
        stats_.hit_tokens += int64_t(n_hit) * block_size_;
        stats_.tier_hit_tokens += n_tier * block_size_;
    }
    result.n_cached_tokens = s.n_computed;
    seqs_.emplace(seq, std::move(s));
    return result;
}

void BlockManager::truncate(SeqId seq, int64_t n_tokens) {
    Sequence& s = seq_ref(seq);
    if (n_tokens < s.n_computed || n_tokens > int64_t(s.tokens.size()))
        fail("block manager: cannot truncate sequence {} to {} tokens ({} computed, {} held)", seq, n_tokens,
             s.n_computed, s.tokens.size());
    if (n_tokens == 0) fail("block manager: cannot truncate sequence {} to no tokens", seq);
    s.tokens.resize(size_t(n_tokens));
    const size_t keep = size_t((n_tokens + block_size_ - 1) / block_size_);
    while (s.table.size() > keep) {
        if (s.table.back() != kFreedBlock) release(s.table.back());
        else --s.n_freed;
        s.table.pop_back();
    }
}

KvStatus BlockManager::append(SeqId seq, std::span<const int32_t> tokens, std::vector<BlockCopy>& copies) {
    Sequence& s = seq_ref(seq);
    if (tokens.empty()) return KvStatus::ok;
    if (!can_append(seq, int64_t(tokens.size()))) return KvStatus::out_of_blocks;
    int64_t pos = int64_t(s.tokens.size());
    if (pos % block_size_ != 0 && blocks_[size_t(s.table.back())].ref > 1) {
        int32_t src = s.table.back();
        int32_t dst = take_block();
        copies.push_back({src, dst});
        release(src);  // ref > 1, so this only drops our reference
        s.table.back() = dst;
    }
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    int64_t total = (int64_t(s.tokens.size()) + block_size_ - 1) / block_size_;
    while (int64_t(s.table.size()) < total) s.table.push_back(take_block());
    return KvStatus::ok;
}

void BlockManager::mark_computed(SeqId seq, int64_t n_computed) {
    Sequence& s = seq_ref(seq);
    if (n_computed < s.n_computed || n_computed > int64_t(s.tokens.size()))
        fail("block manager: sequence {} cannot mark {} tokens computed (has {} computed of {})", seq, n_computed,
             s.n_computed, s.tokens.size());
    s.n_computed = n_computed;
    while (int64_t(s.block_hashes.size() + 1) * block_size_ <= n_computed) {
        size_t i = s.block_hashes.size();
        uint64_t parent = i ? s.block_hashes[i - 1] : kRootBlockHash;
        s.block_hashes.push_back(hash_block(parent, s.tokens.data() + i * size_t(block_size_), block_size_, s.extra_key));
        if (prefix_caching_ && s.publish) publish(s, i);
    }
    if (window_ > 0) {  // the next token (position n_computed) reads keys from n_computed - window + 1 on
        const int64_t first_needed = n_computed - window_ + 1;
        while (s.n_freed < s.table.size() && int64_t(s.n_freed + 1) * block_size_ <= first_needed) {
            release(s.table[s.n_freed]);
            s.table[s.n_freed++] = kFreedBlock;
        }
    }
}

void BlockManager::fork(SeqId parent, SeqId child) {
    const Sequence& p = seq_ref(parent);
    if (seqs_.count(child)) fail("block manager: fork target sequence {} already exists", child);
    if (p.n_computed != int64_t(p.tokens.size()))
        fail("block manager: cannot fork sequence {} before its {} tokens are computed", parent, p.tokens.size());
    Sequence c = p;
    for (int32_t b : c.table)
        if (b != kFreedBlock) acquire(b);
    seqs_.emplace(child, std::move(c));
}

void BlockManager::keep_private(SeqId seq) { seq_ref(seq).publish = false; }

void BlockManager::free(SeqId seq) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) fail("block manager: unknown sequence {}", seq);
    // Release the tail first: deeper blocks of a prefix become the least recently used, so
    // eviction drops a prefix from its end and keeps its (more shareable) beginning longest.
    const auto& table = it->second.table;
    for (auto b = table.rbegin(); b != table.rend(); ++b)
        if (*b != kFreedBlock) release(*b);
    seqs_.erase(it);
}

// ---- step inputs ----

const std::vector<int32_t>& BlockManager::block_table(SeqId seq) const { return seq_ref(seq).table; }
const std::vector<int32_t>& BlockManager::tokens(SeqId seq) const { return seq_ref(seq).tokens; }
int64_t BlockManager::num_tokens(SeqId seq) const { return int64_t(seq_ref(seq).tokens.size()); }
int64_t BlockManager::num_computed(SeqId seq) const { return seq_ref(seq).n_computed; }

int64_t BlockManager::slot(SeqId seq, int64_t pos) const {
    const Sequence& s = seq_ref(seq);
    if (pos < 0 || pos >= int64_t(s.tokens.size()))
        fail("block manager: position {} out of range for sequence {} of {} tokens", pos, seq, s.tokens.size());
    if (size_t(pos / block_size_) < s.n_freed)
        fail("block manager: position {} of sequence {} is in a block freed under the sliding window", pos, seq);
    return int64_t(s.table[size_t(pos / block_size_)]) * block_size_ + pos % block_size_;
}

void BlockManager::slots(SeqId seq, int64_t begin, int64_t end, int64_t* out) const {
    const Sequence& s = seq_ref(seq);
    if (begin < 0 || end < begin || end > int64_t(s.tokens.size()))
        fail("block manager: positions [{}, {}) out of range for sequence {} of {} tokens", begin, end, seq,
             s.tokens.size());
    if (begin < end && size_t(begin / block_size_) < s.n_freed)
        fail("block manager: position {} of sequence {} is in a block freed under the sliding window", begin, seq);
    for (int64_t p = begin; p < end; ++p)
        out[p - begin] = int64_t(s.table[size_t(p / block_size_)]) * block_size_ + p % block_size_;
}

std::vector<SeqId> BlockManager::sequences() const {
    std::vector<SeqId> ids;
    ids.reserve(seqs_.size());
    for (const auto& [id, s] : seqs_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

}  // namespace pagoda::kv
