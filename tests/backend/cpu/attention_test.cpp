// Paged attention vs an independent naive reference: full score matrix in double, plain softmax,
// from contiguous K/V arrays (no blocks, no tiles). Covers shuffled block tables, block sizes 1..256,
// GQA ratios 1..8, several sequences of different lengths, chunked prefill (consecutive query
// positions of one sequence), contexts that are not a multiple of the block size, each KV dtype
// and each ISA path the CPU has; prefill batches (runs of consecutive positions of one sequence,
// several sequences, cached prefixes, gaps and restarts in the positions) against the same
// reference, and bitwise batch invariance: each token alone vs inside a prefill batch, chunked
// differently, reordered, with 1 or 2 threads.
//
// Tolerance: max |out - ref| <= 5e-6 (outputs are convex combinations of V rows in [-1, 1], so this
// is 5e-6 relative to the value range; the worst seen is ~1e-6). For F16/BF16 the reference uses
// the K/V values rounded the way the cache stores them, so the only differences are F32 arithmetic
// and the exp; for q8 it uses the rows as stored (codes x scale, read back from the pool), and the
// kernel's (q . codes) x scale differs from q . (codes x scale) by float rounding only. q8 against
// the exact (unquantised) K/V is checked separately, within 1e-2.
#include "backend/cpu/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/attention_test_util.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend::cpu {
namespace {

using kv::KvDtype;
using namespace testing;

// Three sequences: a decode token, a chunk of consecutive prefill positions, and a long context;
// queries interleaved across sequences.
std::vector<std::pair<int32_t, int32_t>> mixed_queries(const std::vector<int32_t>& lens) {
    std::vector<std::pair<int32_t, int32_t>> q;
    q.push_back({0, lens[0] - 1});
    for (int32_t p = lens[1] - 5; p < lens[1]; ++p) q.push_back({1, p});
    q.push_back({2, lens[2] - 1});
    q.push_back({0, 0});
    q.push_back({2, lens[2] / 2});
    return q;
}

// The scenario in every KV dtype on every ISA path this CPU has, against the double-precision naive
// reference (within 5e-6).
void expect_every_dtype_and_isa_matches_reference(kv::KvLayout L, int32_t group, const std::vector<int32_t>& lens,
                                                  const std::vector<std::pair<int32_t, int32_t>>& queries, uint32_t seed, float q_gain,
                                                  ThreadPool& threads) {
    for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8}) {
        L.dtype = dtype;
        Scenario s = make_scenario(L, group, lens, queries, seed, q_gain);
        std::vector<double> want = reference(s);
        for (Isa isa : available_isas()) {
            set_isa(isa);
            double err = max_abs_diff(run_kernel(s, threads), want);
            EXPECT_LE(err, 5e-6) << "block " << L.block_size << " group " << group << " head_dim " << L.head_dim
                                 << " dtype " << kv::kv_dtype_name(dtype) << " isa " << isa_name(isa);
        }
    }
}

TEST(PagedAttention, MatchesNaiveReferenceAcrossBlockSizesGqaDtypesAndIsas) {
    IsaGuard guard;
    SimdAttention simd;
    ThreadPool threads(2);
    const int32_t head_dims[] = {8, 64, 128, 20, 3};
    int config = 0;
    for (int32_t bs : {1, 2, 16, 256}) {
        for (int32_t group : {1, 2, 4, 8}) {
            kv::KvLayout L;
            L.n_layers = 2;
            L.n_kv_heads = group == 8 ? 1 : 2;
            L.head_dim = head_dims[config % 5];
            L.block_size = bs;
            std::vector<int32_t> lens = {37 + config, 70, 300 + 7 * config};  // not block multiples
            expect_every_dtype_and_isa_matches_reference(L, group, lens, mixed_queries(lens), uint32_t(100 + config),
                                                         config % 3 == 0 ? 6.0f : 1.0f, threads);
            ++config;
        }
    }
}

// Sliding windows at their edges (1 key, a tile boundary 64 either side, wider than the context)
// and soft caps, for decode tokens and prefill runs whose windows start in different tiles, every
// block size, KV dtype and ISA path, against the naive reference; the blocks wholly below every
// query's window hold junk the kernel must never read (they may have been freed and reused).
TEST(PagedAttention, SlidingWindowEdgesAndSoftCapOnEveryIsa) {
    IsaGuard guard;
    SimdAttention simd;
    ThreadPool threads(2);
    int config = 0;
    for (int32_t window : {1, 2, 63, 64, 65, 129, 1000}) {
        for (int32_t bs : {1, 16, 64}) {
            kv::KvLayout L;
            L.n_layers = 2;
            L.n_kv_heads = 2;
            L.head_dim = config % 2 ? 20 : 64;
            L.block_size = bs;
            const int32_t group = 1 << (config % 3);
            const std::vector<int32_t> lens = {200, 130, 65};
            std::vector<std::pair<int32_t, int32_t>> queries = {{0, 199}, {0, 0}, {2, 64}, {1, 63}};
            for (int32_t p = 120; p < 130; ++p) queries.push_back({1, p});  // a prefill run across a tile edge
            const float softcap = config % 2 ? 1.5f : 0.0f;
            for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16}) {
                L.dtype = dtype;
                Scenario s = make_scenario(L, group, lens, queries, uint32_t(500 + config), 4.0f);
                // Junk (1e3) in every position below the lowest window start of each sequence.
                std::vector<int32_t> lowest = {lens[0], lens[1], lens[2]};
                for (size_t t = 0; t < queries.size(); ++t)
                    lowest[size_t(queries[t].first)] = std::min(lowest[size_t(queries[t].first)],
                                                                std::max(0, queries[t].second - window + 1));
                std::vector<float> junk(size_t(L.n_kv_heads) * L.head_dim, 1e3f);
                for (size_t q = 0; q < lens.size(); ++q)
                    for (int32_t p = 0; p < lowest[q] / bs * bs; ++p) {
                        const int64_t slot = int64_t(s.tables[q][size_t(p / bs)]) * bs + p % bs;
                        s.pool->write(L.n_layers - 1, &slot, 1, junk.data(), junk.data());
                    }
                const std::vector<double> want = reference(s, window, softcap);
                for (Isa isa : available_isas()) {
                    set_isa(isa);
                    EXPECT_LE(max_abs_diff(run_kernel(s, threads, window, softcap), want), 5e-6)
                        << "window " << window << " block " << bs << " softcap " << softcap << " dtype "
                        << kv::kv_dtype_name(dtype) << " isa " << isa_name(isa);
                }
            }
            ++config;
        }
    }
}

TEST(PagedAttention, LongContextWithPeakySoftmax) {
    IsaGuard guard;
    SimdAttention simd;
    ThreadPool threads(2);
    kv::KvLayout L;
    L.n_layers = 1;
    L.n_kv_heads = 1;
    L.head_dim = 64;
    L.block_size = 16;
    L.dtype = KvDtype::f32;
    std::vector<int32_t> lens = {1500};
    Scenario s = make_scenario(L, 2, lens, {{0, 1499}, {0, 64}, {0, 63}, {0, 1000}}, 9, 12.0f);
    std::vector<double> want = reference(s);
    for (Isa isa : available_isas()) {
        set_isa(isa);
        EXPECT_LE(max_abs_diff(run_kernel(s, threads), want), 5e-6) << isa_name(isa);
    }
}

// q8 K/V against the unquantised values: on every ISA path, the kernel over a q8 cache stays
// within 1e-2 (absolute; outputs lie in [-1, 1]) of the exact double reference on f32 K/V, and of
// the kernel over an f16 cache, for diffuse and peaky softmaxes over contexts up to 1000 keys. The
// bound comes from the format: each stored value moves by up to max|row| / 254 (<= 0.0039 here),
// which shifts the output by about that much plus the scores' shift times the spread of V. The
// worst seen is 0.0039 (a query at position 0 returns its one V row) against exact, 0.0041 against f16.
TEST(PagedAttention, Q8StaysCloseToF16AndExact) {
    IsaGuard guard;
    SimdAttention simd;
    ThreadPool threads(2);
    for (int32_t d : {64, 128, 20}) {
        for (float q_gain : {1.0f, 4.0f}) {
            kv::KvLayout L;
            L.n_layers = 1;
            L.n_kv_heads = 2;
            L.head_dim = d;
            L.block_size = 16;
            const std::vector<int32_t> lens = {1000, 77, 300};
            const auto queries = mixed_queries(lens);
            L.dtype = KvDtype::f32;
            const Scenario exact = make_scenario(L, 2, lens, queries, 41, q_gain);
            const std::vector<double> want = reference(exact);
            L.dtype = KvDtype::f16;
            const Scenario half = make_scenario(L, 2, lens, queries, 41, q_gain);
            L.dtype = KvDtype::q8;
            const Scenario q8 = make_scenario(L, 2, lens, queries, 41, q_gain);
            for (Isa isa : available_isas()) {
                set_isa(isa);
                const std::vector<float> got = run_kernel(q8, threads), f16 = run_kernel(half, threads);
                const std::vector<double> f16d(f16.begin(), f16.end());
                const double vs_exact = max_abs_diff(got, want), vs_f16 = max_abs_diff(got, f16d);
                EXPECT_LE(vs_exact, 1e-2) << "head_dim " << d << " gain " << q_gain << " isa " << isa_name(isa);
                EXPECT_LE(vs_f16, 1e-2) << "head_dim " << d << " gain " << q_gain << " isa " << isa_name(isa);
                EXPECT_GT(vs_exact, 1e-4);  // it is quantised: not the f32 result by accident
            }
        }
    }
}

// A token's output must be bitwise identical alone and inside any batch, with 1 or 2 threads.
TEST(PagedAttention, BatchInvariantBitwise) {
    IsaGuard guard;
    SimdAttention simd;
    kv::KvLayout L;
    L.n_layers = 1;
    L.n_kv_heads = 2;
    L.head_dim = 64;
    L.block_size = 16;
    for (KvDtype dtype : {KvDtype::f16, KvDtype::q8}) {
        L.dtype = dtype;
        std::vector<int32_t> lens = {200, 90, 333};
        std::vector<std::pair<int32_t, int32_t>> batch = {{1, 50}, {0, 150}, {2, 332}, {0, 151}, {0, 152}, {1, 89}};
        Scenario full = make_scenario(L, 4, lens, batch, 11);
        const size_t row = size_t(full.n_heads) * L.head_dim;
        for (Isa isa : available_isas()) {
            set_isa(isa);
            for (int n_threads : {1, 2}) {
                ThreadPool threads(n_threads);
                std::vector<float> together = run_kernel(full, threads);
                for (int64_t t = 0; t < full.n_tokens(); ++t) {
                    // Same pool and data, a batch of just this token.
                    Scenario alone;
                    alone.layout = full.layout;
                    alone.n_heads = full.n_heads;
                    alone.tables = full.tables;
                    alone.token_seq = {full.token_seq[t]};
                    alone.token_pos = {full.token_pos[t]};
                    alone.q.assign(full.q.begin() + t * row, full.q.begin() + (t + 1) * row);
                    alone.pool = std::move(full.pool);
                    std::vector<float> single = run_kernel(alone, threads);
                    full.pool = std::move(alone.pool);
                    EXPECT_EQ(std::memcmp(single.data(), together.data() + t * row, row * sizeof(float)), 0)
                        << "token " << t << " isa " << isa_name(isa) << " threads " << n_threads << " "
                        << kv::kv_dtype_name(dtype);
                }
            }
        }
    }
}

// Decode tokens whose KV heads read the cache in place (f32 and q8 at any group, f16 and bf16 below
// 5 query heads per KV head, or below 9 where AVX-512 scores two heads per converted row, so the
// group-8 shape is read in place there and widened on AVX2) are walked several KV heads per task
// (walk_decode_heads), how many
// depending on the batch and the thread count. Each must give bitwise what the one-head tile walk
// (walk_tiles) gives the same token inside a prefill run: here as the second token of a run of
// two. 6 KV heads, so the tasks may split them unevenly (4 + 2 at 2 tokens on 3 threads); contexts
// within one tile, across tiles and block edges; sliding windows and a soft cap.
TEST(PagedAttention, DecodeTasksOverSeveralKvHeadsMatchTheTileWalkBitwise) {
    IsaGuard guard;
    SimdAttention simd;
    struct Shape {
        int32_t head_dim, block_size, group;
    };
    const Shape shapes[] = {{64, 16, 1}, {20, 1, 2}, {3, 64, 4}, {128, 16, 8}, {96, 16, 4}};
    const std::vector<int32_t> lens = {2, 17, 64, 65, 130, 200, 31, 129, 96, 150};
    for (const Shape& shape : shapes) {
        kv::KvLayout L;
        L.n_layers = 1;
        L.n_kv_heads = 6;
        L.head_dim = shape.head_dim;
        L.block_size = shape.block_size;
        for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8}) {
            L.dtype = dtype;
            for (size_t n_decode : {size_t(2), size_t(3), lens.size()}) {
                std::vector<std::pair<int32_t, int32_t>> decode;
                for (size_t i = 0; i < n_decode; ++i) decode.push_back({int32_t(i), lens[i] - 1});
                Scenario full = make_scenario(L, shape.group, lens, decode, 17 + uint32_t(n_decode));
                const size_t row = size_t(full.n_heads) * L.head_dim;
                for (Isa isa : available_isas()) {
                    set_isa(isa);
                    for (auto [window, softcap] : {std::pair{0, 0.0f}, std::pair{1, 0.0f}, std::pair{63, 0.0f},
                                                   std::pair{65, 0.0f}, std::pair{0, 30.0f}}) {
                        for (int n_threads : {1, 2, 3}) {
                            ThreadPool threads(n_threads);
                            const std::vector<float> together = run_kernel(full, threads, window, softcap);
                            for (size_t t = 0; t < n_decode; ++t) {
                                // The same token after its predecessor position: one run of two tokens.
                                Scenario run;
                                run.layout = full.layout;
                                run.n_heads = full.n_heads;
                                run.tables = full.tables;
                                run.token_seq = {full.token_seq[t], full.token_seq[t]};
                                run.token_pos = {full.token_pos[t] - 1, full.token_pos[t]};
                                run.q.assign(full.q.begin() + int64_t(t * row), full.q.begin() + int64_t((t + 1) * row));
                                run.q.insert(run.q.begin(), run.q.rbegin(), run.q.rend());  // any first query
                                run.pool = std::move(full.pool);
                                const std::vector<float> tiles = run_kernel(run, threads, window, softcap);
                                full.pool = std::move(run.pool);
                                ASSERT_EQ(std::memcmp(tiles.data() + row, together.data() + t * row, row * sizeof(float)), 0)
                                    << "token " << t << " of " << n_decode << ", head_dim " << shape.head_dim << " block "
                                    << shape.block_size << " group " << shape.group << " " << kv::kv_dtype_name(dtype)
                                    << " isa " << isa_name(isa) << " window " << window << " softcap " << softcap
                                    << " threads " << n_threads;
                            }
                        }
                    }
                }
                // And within the reference's bound.
                ThreadPool threads(2);
                for (Isa isa : available_isas()) {
                    set_isa(isa);
                    EXPECT_LE(max_abs_diff(run_kernel(full, threads), reference(full)), 5e-6)
                        << kv::kv_dtype_name(dtype) << " isa " << isa_name(isa) << " head_dim " << shape.head_dim;
                }
            }
        }
    }
}

// Sequence i's first `tokens` positions (whole blocks) become sequence 0's: its table points at the
// same blocks (what the prefix cache does for a shared prompt prefix), and the reference's K/V too.
void share_prefix(Scenario& s, size_t i, int32_t tokens) {
    ASSERT_LE(size_t(tokens), std::min(s.k[0].size(), s.k[i].size()) / size_t(s.layout.n_kv_heads * s.layout.head_dim));
    const int32_t bs = s.layout.block_size, nkv = s.layout.n_kv_heads, d = s.layout.head_dim;
    for (int32_t j = 0; j < tokens / bs; ++j) s.tables[i][size_t(j)] = s.tables[0][size_t(j)];
    const size_t values = size_t(tokens) * nkv * d;
    std::copy(s.k[0].begin(), s.k[0].begin() + int64_t(values), s.k[i].begin());
    std::copy(s.v[0].begin(), s.v[0].begin() + int64_t(values), s.v[i].begin());
}

struct SharingShape {
    int32_t head_dim, block_size, group, n_kv;
};

// A one-layer cache of the shape and type with one decode token at the end of each sequence (then
// the `extra` tokens), sequence i's first shares[i] positions (rounded down to whole blocks) taken
// from sequence 0.
Scenario sharing_decode_scenario(const SharingShape& shape, KvDtype dtype, const std::vector<int32_t>& lens,
                                 const std::vector<int32_t>& shares,
                                 const std::vector<std::pair<int32_t, int32_t>>& extra, uint32_t seed) {
    kv::KvLayout L;
    L.n_layers = 1;
    L.n_kv_heads = shape.n_kv;
    L.head_dim = shape.head_dim;
    L.block_size = shape.block_size;
    L.dtype = dtype;
    std::vector<std::pair<int32_t, int32_t>> decode;
    for (size_t i = 0; i < lens.size(); ++i) decode.push_back({int32_t(i), lens[i] - 1});
    decode.insert(decode.end(), extra.begin(), extra.end());
    Scenario s = make_scenario(L, shape.group, lens, decode, seed);
    for (size_t i = 1; i < lens.size(); ++i) share_prefix(s, i, shares[i] / shape.block_size * shape.block_size);
    return s;
}

// Decode tokens of sequences whose leading blocks are the same walk the keys of those blocks
// together (attention_internal.h: DecodeShare): each must get the bits it gets alone, and stay
// within the reference. Shares of less than a tile, of one and of several tiles, blocks of 1 and
// of 128 (larger than a tile), a sequence sharing nothing, more sharers than one task takes
// (kMaxShareSeqs), tokens inside a shared tile; a soft cap, and a window (no sharing then).
TEST(PagedAttention, DecodeTokensSharingPrefixBlocksGetTheirAloneBitsBitwise) {
    IsaGuard guard;
    SimdAttention simd;
    const SharingShape shapes[] = {{64, 16, 1, 12}, {64, 16, 2, 3}, {20, 1, 2, 2},
                                   {3, 64, 4, 2},   {128, 16, 8, 2}, {96, 128, 1, 4}};
    const std::vector<int32_t> lens = {260, 150, 130, 64, 65, 300, 40, 129, 190, 200, 250, 70};
    // Positions of sequence i taken from sequence 0 (rounded down to whole blocks).
    const std::vector<int32_t> shares = {0, 128, 128, 64, 64, 192, 32, 128, 160, 192, 240, 0};
    for (const SharingShape& shape : shapes) {
        for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8}) {
            // Plus a second token of sequence 0, inside a shared tile.
            Scenario full = sharing_decode_scenario(shape, dtype, lens, shares, {{0, 100}}, 29 + uint32_t(shape.head_dim));
            const size_t row = size_t(full.n_heads) * shape.head_dim;
            for (Isa isa : available_isas()) {
                set_isa(isa);
                for (auto [window, softcap] : {std::pair{0, 0.0f}, std::pair{0, 30.0f}, std::pair{65, 0.0f}}) {
                    for (int n_threads : {1, 2}) {
                        ThreadPool threads(n_threads);
                        const std::vector<float> together = run_kernel(full, threads, window, softcap);
                        for (int64_t t = 0; t < full.n_tokens(); ++t) {
                            Scenario alone;
                            alone.layout = full.layout;
                            alone.n_heads = full.n_heads;
                            alone.tables = full.tables;
                            alone.token_seq = {full.token_seq[size_t(t)]};
                            alone.token_pos = {full.token_pos[size_t(t)]};
                            alone.q.assign(full.q.begin() + t * int64_t(row), full.q.begin() + (t + 1) * int64_t(row));
                            alone.pool = std::move(full.pool);
                            const std::vector<float> single = run_kernel(alone, threads, window, softcap);
                            full.pool = std::move(alone.pool);
                            ASSERT_EQ(std::memcmp(single.data(), together.data() + t * int64_t(row), row * sizeof(float)), 0)
                                << "token " << t << ", head_dim " << shape.head_dim << " block " << shape.block_size
                                << " group " << shape.group << " " << kv::kv_dtype_name(dtype) << " isa "
                                << isa_name(isa) << " window " << window << " softcap " << softcap << " threads "
                                << n_threads;
                        }
                        if (window == 0 && softcap == 0) {
                            EXPECT_LE(max_abs_diff(together, reference(full)), 5e-6)
                                << kv::kv_dtype_name(dtype) << " isa " << isa_name(isa) << " head_dim " << shape.head_dim;
                        }
                    }
                }
            }
        }
    }
}

// The decode walk's requests of the next tile's K and V rows (attention.h: decode_kv_prefetch)
// change no bit: decode tokens of several KV heads a task, sequences sharing prefix blocks, windows
// and a soft cap, blocks of 1 to 128 rows, on every ISA, the same with the requests as without. (They
// read block tables only up to each walk's last key: ASan runs this too.)
TEST(PagedAttention, DecodeKvPrefetchChangesNoBit) {
    IsaGuard guard;
    SimdAttention simd;
    struct PrefetchGuard {
        bool saved = decode_kv_prefetch();
        ~PrefetchGuard() { set_decode_kv_prefetch(saved); }
    } prefetch_guard;
    const SharingShape shapes[] = {{64, 16, 1, 12}, {64, 16, 4, 4}, {20, 1, 2, 2}, {96, 128, 1, 4}, {128, 32, 8, 2}};
    const std::vector<int32_t> lens = {260, 150, 130, 64, 65, 300, 1, 129};
    const std::vector<int32_t> shares = {0, 128, 128, 64, 64, 192, 0, 0};
    for (const SharingShape& shape : shapes) {
        for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8}) {
            Scenario full = sharing_decode_scenario(shape, dtype, lens, shares, {}, 41 + uint32_t(shape.head_dim));
            for (Isa isa : available_isas()) {
                set_isa(isa);
                for (auto [window, softcap] : {std::pair{0, 0.0f}, std::pair{0, 30.0f}, std::pair{65, 0.0f}}) {
                    ThreadPool threads(2);
                    set_decode_kv_prefetch(false);
                    const std::vector<float> off = run_kernel(full, threads, window, softcap);
                    set_decode_kv_prefetch(true);
                    const std::vector<float> on = run_kernel(full, threads, window, softcap);
                    ASSERT_EQ(on.size(), off.size());
                    ASSERT_EQ(std::memcmp(on.data(), off.data(), on.size() * sizeof(float)), 0)
                        << "head_dim " << shape.head_dim << " block " << shape.block_size << " group " << shape.group << " "
                        << kv::kv_dtype_name(dtype) << " isa " << isa_name(isa) << " window " << window << " softcap "
                        << softcap;
                }
            }
        }
    }
}

TEST(PagedAttention, PrefillBatchesMatchNaiveReference) {
    IsaGuard guard;
    SimdAttention simd;
    ThreadPool threads(2);
    const int32_t head_dims[] = {64, 20, 3, 128, 16};
    int config = 0;
    for (int32_t bs : {1, 16, 256}) {
        for (int32_t group : {1, 2, 3, 8}) {
            kv::KvLayout L;
            L.n_layers = 1;
            L.n_kv_heads = group == 8 ? 1 : 2;
            L.head_dim = head_dims[config % 5];
            L.block_size = bs;
            std::vector<int32_t> lens = {45 + config, 100 + 5 * config, 230 + 11 * config};
            expect_every_dtype_and_isa_matches_reference(L, group, lens, prefill_queries(lens, config),
                                                         uint32_t(500 + config), config % 2 == 0 ? 5.0f : 1.0f, threads);
            ++config;
        }
    }
}

// Every token of a long two-sequence prefill batch gets the same bits decoded alone, in chunks of
// 7 tokens, with the sequences in the other order, and with 1 or 2 threads.
TEST(PagedAttention, PrefillBatchInvariantBitwise) {
    IsaGuard guard;
    SimdAttention simd;
    struct Shape {
        int32_t head_dim, group, block_size;
        KvDtype dtype;
    };
    for (Shape shape : {Shape{64, 1, 16, KvDtype::f16}, Shape{20, 4, 1, KvDtype::f32}, Shape{128, 2, 256, KvDtype::bf16},
                        Shape{64, 4, 16, KvDtype::q8}, Shape{20, 1, 4, KvDtype::q8}, Shape{96, 4, 16, KvDtype::f16}}) {
        kv::KvLayout L;
        L.n_layers = 1;
        L.n_kv_heads = 2;
        L.head_dim = shape.head_dim;
        L.block_size = shape.block_size;
        L.dtype = shape.dtype;
        Scenario full = two_sequence_prefill(L, shape.group);
        for (Isa isa : available_isas()) {
            set_isa(isa);
            expect_batch_invariant_bits(full, std::string("isa ") + isa_name(isa) + " head_dim " + std::to_string(L.head_dim));
        }
    }
}

TEST(PagedAttention, RejectsInconsistentArguments) {
    kv::KvLayout L;
    L.n_layers = 1;
    L.n_kv_heads = 2;
    L.head_dim = 8;
    L.block_size = 4;
    L.dtype = KvDtype::f32;
    Scenario s = make_scenario(L, 2, {6}, {{0, 5}}, 3);
    ThreadPool threads(1);
    std::vector<AttentionSeq> views = s.seq_views();
    std::vector<float> out(s.q.size());
    auto call = [&](int32_t n_heads, int32_t pos, int32_t seq, int32_t layer) {
        PagedAttentionBatch b;
        b.q = s.q.data();
        b.n_tokens = 1;
        b.n_heads = n_heads;
        b.token_seq = &seq;
        b.token_pos = &pos;
        b.seqs = views.data();
        b.n_seqs = 1;
        b.scale = s.scale();
        paged_attention(b, *s.pool, layer, out.data(), threads);
    };
    EXPECT_NO_THROW(call(4, 5, 0, 0));
    EXPECT_THROW(call(3, 5, 0, 0), Error);   // 3 heads over 2 KV heads
    EXPECT_THROW(call(4, 8, 0, 0), Error);   // beyond the 2-block table
    EXPECT_THROW(call(4, -1, 0, 0), Error);
    EXPECT_THROW(call(4, 5, 1, 0), Error);   // no sequence 1
    EXPECT_THROW(call(4, 5, 0, 1), Error);   // no layer 1
    std::vector<int32_t> bad_table = {0, 99};
    views[0] = {bad_table.data(), 2};
    EXPECT_THROW(call(4, 5, 0, 0), Error);   // block id outside the pool
}

}  // namespace
}  // namespace pagoda::backend::cpu
