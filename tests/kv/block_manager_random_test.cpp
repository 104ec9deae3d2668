// Randomized model check of BlockManager + KvPool: thousands of allocate / compute / append / fork /
// free operations (with prefix reuse and eviction pressure) on a small pool, checking after each:
//   - ref counts equal a recount of every block table; free + evictable + used == total;
//   - every block table has the right length and no block twice;
//   - the KV content at every computed position is what computing that position gives, where the
//     "KV" of position p is a deterministic function of (tokens[0..p], p) written into the pool —
//     so a prefix-cache hit serving wrong or stale blocks, a missed copy-on-write, or a block freed
//     while in use shows up as a content mismatch.
#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/block_manager.h"
#include "backend/cpu/kv/kv_pool.h"

namespace pagoda::kv {
namespace {

using backend::cpu::KvPool;

// "KV" of a position: two floats that encode a 48-bit hash of the token prefix and position
// exactly (24 bits each), independent of the code under test.
void expected_kv(const std::vector<int32_t>& tokens, int64_t pos, uint64_t extra, float out[2]) {
    uint64_t h = 1469598103934665603ull ^ extra;
    for (int64_t i = 0; i <= pos; ++i) h = (h ^ uint64_t(uint32_t(tokens[size_t(i)]))) * 1099511628211ull;
    h = (h ^ uint64_t(pos)) * 1099511628211ull;
    h ^= h >> 29;
    out[0] = float(h & 0xffffff);
    out[1] = float((h >> 24) & 0xffffff);
}

struct Model {
    std::vector<int32_t> tokens;
    uint64_t extra = 0;
    int64_t computed = 0;
};

class Harness {
public:
    Harness(int32_t n_blocks, int32_t block_size, bool caching, uint32_t seed)
        : bm_(n_blocks, block_size, caching), pool_(layout(block_size), n_blocks), rng_(seed) {
        for (int i = 0; i < 4; ++i) {
            std::vector<int32_t> p(size_t(uniform(0, 6 * block_size)));
            for (auto& t : p) t = uniform(0, 50);
            families_.push_back(p);
        }
    }

    static KvLayout layout(int32_t block_size) {
        KvLayout L;
        L.n_layers = 2;
        L.n_kv_heads = 1;
        L.head_dim = 2;
        L.block_size = block_size;
        L.dtype = KvDtype::f32;
        return L;
    }

    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

    // Computes positions [begin, end) of a sequence: writes their KV into the pool, marks them.
    void compute(SeqId id, int64_t end) {
        Model& m = seqs_[id];
        for (int64_t p = m.computed; p < end; ++p) {
            float kv[2];
            expected_kv(m.tokens, p, m.extra, kv);
            float v[2] = {kv[1], kv[0]};
            int64_t slot = bm_.slot(id, p);
            for (int32_t layer = 0; layer < 2; ++layer) pool_.write(layer, &slot, 1, kv, v);
        }
        m.computed = end;
        bm_.mark_computed(id, end);
    }

    void op_new() {
        Model m;
        m.tokens = families_[size_t(uniform(0, int(families_.size()) - 1))];
        int suffix = uniform(m.tokens.empty() ? 1 : 0, 3 * bm_.block_size());
        for (int i = 0; i < suffix; ++i) m.tokens.push_back(uniform(0, 50));
        if (m.tokens.empty()) m.tokens.push_back(1);
        m.extra = uniform(0, 9) == 0 ? 7 : 0;
        SeqId id = next_id_++;
        bool can = bm_.can_allocate(m.tokens, m.extra);
        int32_t free_before = bm_.num_free_blocks(), evictable_before = bm_.num_evictable_blocks();
        AllocateResult r = bm_.allocate(id, m.tokens, m.extra);
        if (!can) {
            ASSERT_EQ(r.status, KvStatus::out_of_blocks);
            ASSERT_FALSE(bm_.has_sequence(id));
            ASSERT_EQ(bm_.num_free_blocks(), free_before);
            ASSERT_EQ(bm_.num_evictable_blocks(), evictable_before);
            ++out_of_blocks_;
            return;
        }
        ASSERT_EQ(r.status, KvStatus::ok);
        ASSERT_LE(r.n_cached_tokens, int64_t(m.tokens.size()) - 1);
        ASSERT_EQ(r.n_cached_tokens % bm_.block_size(), 0);
        if (!bm_.prefix_caching()) {
            ASSERT_EQ(r.n_cached_tokens, 0);
        }
        hit_tokens_ += r.n_cached_tokens;
        m.computed = r.n_cached_tokens;
        seqs_[id] = m;
        // Served prefix: its KV must be exactly what computing it would give.
        check_content(id);
        // Compute all, or only a chunk (chunked prefill continues in op_compute).
        int64_t end = uniform(0, 2) ? int64_t(m.tokens.size()) : uniform(int(m.computed), int(m.tokens.size()));
        compute(id, end);
    }

    void op_compute(SeqId id) {
        Model& m = seqs_[id];
        if (m.computed == int64_t(m.tokens.size())) return;
        compute(id, std::min<int64_t>(int64_t(m.tokens.size()), m.computed + uniform(1, 2 * bm_.block_size())));
    }

    void op_append(SeqId id) {
        Model& m = seqs_[id];
        if (m.computed != int64_t(m.tokens.size())) return;
        std::vector<int32_t> add(size_t(uniform(1, 3)));
        for (auto& t : add) t = uniform(0, 50);
        bool can = bm_.can_append(id, int64_t(add.size()));
        std::vector<BlockCopy> copies;
        int64_t blocks_before = int64_t(bm_.block_table(id).size());
        KvStatus st = bm_.append(id, add, copies);
        if (!can) {
            ASSERT_EQ(st, KvStatus::out_of_blocks);
            ASSERT_TRUE(copies.empty());
            ASSERT_EQ(int64_t(bm_.block_table(id).size()), blocks_before);
            ASSERT_EQ(bm_.num_tokens(id), int64_t(m.tokens.size()));
            ++out_of_blocks_;
            return;
        }
        ASSERT_EQ(st, KvStatus::ok);
        for (const BlockCopy& c : copies) pool_.copy_block(c.src, c.dst);
        copies_ += int64_t(copies.size());
        m.tokens.insert(m.tokens.end(), add.begin(), add.end());
        compute(id, int64_t(m.tokens.size()));
    }

    void op_fork(SeqId id) {
        if (seqs_[id].computed != int64_t(seqs_[id].tokens.size())) return;
        SeqId child = next_id_++;
        bm_.fork(id, child);
        seqs_[child] = seqs_[id];
    }

    void op_free(SeqId id) {
        bm_.free(id);
        seqs_.erase(id);
    }

    void step() {
        int dice = uniform(0, 99);
        if (seqs_.empty() || dice < 25) return op_new();
        auto it = seqs_.begin();
        std::advance(it, uniform(0, int(seqs_.size()) - 1));
        SeqId id = it->first;
        if (dice < 45) return op_compute(id);
        if (dice < 75) return op_append(id);
        if (dice < 82) return op_fork(id);
        return op_free(id);
    }

    void check_content(SeqId id) {
        const Model& m = seqs_[id];
        float kv[2], got[2];
        for (int64_t p = 0; p < m.computed; ++p) {
            expected_kv(m.tokens, p, m.extra, kv);
            int64_t slot = bm_.slot(id, p);
            pool_.read_k(0, slot, 0, got);
            ASSERT_TRUE(got[0] == kv[0] && got[1] == kv[1]) << "seq " << id << " pos " << p << " slot " << slot;
            pool_.read_v(1, slot, 0, got);
            ASSERT_TRUE(got[0] == kv[1] && got[1] == kv[0]) << "seq " << id << " pos " << p << " (layer 1 V)";
        }
    }

    void check_invariants() {
        const int32_t n = bm_.n_blocks();
        std::vector<int32_t> refs(size_t(n), 0);
        ASSERT_EQ(bm_.sequences().size(), seqs_.size());
        for (const auto& [id, m] : seqs_) {
            const auto& table = bm_.block_table(id);
            ASSERT_EQ(int64_t(table.size()), (int64_t(m.tokens.size()) + bm_.block_size() - 1) / bm_.block_size());
            ASSERT_EQ(bm_.tokens(id), m.tokens);
            ASSERT_EQ(bm_.num_computed(id), m.computed);
            std::set<int32_t> distinct(table.begin(), table.end());
            ASSERT_EQ(distinct.size(), table.size()) << "block twice in one table";
            for (int32_t b : table) {
                ASSERT_GE(b, 0);
                ASSERT_LT(b, n);
                ++refs[size_t(b)];
            }
        }
        int32_t free_blocks = 0, evictable = 0, used = 0;
        for (int32_t b = 0; b < n; ++b) {
            ASSERT_EQ(bm_.ref_count(b), refs[size_t(b)]) << "block " << b;
            if (refs[size_t(b)] > 0) ++used;
            else if (bm_.is_cached(b)) ++evictable;
            else ++free_blocks;
        }
        ASSERT_EQ(free_blocks, bm_.num_free_blocks());
        ASSERT_EQ(evictable, bm_.num_evictable_blocks());
        ASSERT_EQ(used, bm_.num_used_blocks());
        ASSERT_EQ(free_blocks + evictable + used, n);
        for (const auto& [id, m] : seqs_) check_content(id);
        ASSERT_EQ(bm_.stats().hit_tokens, hit_tokens_);
    }

    BlockManager bm_;
    KvPool pool_;
    std::mt19937 rng_;
    std::vector<std::vector<int32_t>> families_;
    std::map<SeqId, Model> seqs_;
    SeqId next_id_ = 0;
    int64_t hit_tokens_ = 0, out_of_blocks_ = 0, copies_ = 0;
};

void run_random(int32_t n_blocks, int32_t block_size, bool caching, uint32_t seed, int steps) {
    Harness h(n_blocks, block_size, caching, seed);
    for (int i = 0; i < steps; ++i) {
        h.step();
        if (::testing::Test::HasFatalFailure()) FAIL() << "at step " << i;
        h.check_invariants();
        if (::testing::Test::HasFatalFailure()) FAIL() << "at step " << i;
    }
    // The run must actually have exercised the interesting paths.
    EXPECT_GT(h.out_of_blocks_, 0);
    if (block_size > 1) {
        EXPECT_GT(h.copies_, 0);  // with 1-token blocks no block is ever partial
    }
    std::printf("[ stats    ] blocks %d x %d: %lld hit tokens, %lld evictions, %lld copies, %lld out-of-blocks\n",
                n_blocks, block_size, (long long)h.hit_tokens_, (long long)h.bm_.stats().evicted_blocks,
                (long long)h.copies_, (long long)h.out_of_blocks_);
    if (caching) {
        EXPECT_GT(h.hit_tokens_, 0);
        EXPECT_GT(h.bm_.stats().evicted_blocks, 0);
    }
}

TEST(BlockManagerRandom, BlockSize1) { run_random(48, 1, true, 1, 5000); }
TEST(BlockManagerRandom, BlockSize2) { run_random(40, 2, true, 2, 5000); }
TEST(BlockManagerRandom, BlockSize4) { run_random(24, 4, true, 3, 5000); }
TEST(BlockManagerRandom, BlockSize16) { run_random(12, 16, true, 4, 5000); }
TEST(BlockManagerRandom, CachingOff) { run_random(24, 4, false, 5, 2000); }

}  // namespace
}  // namespace pagoda::kv
