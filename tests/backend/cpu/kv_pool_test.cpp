#include "backend/cpu/kv/kv_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <gtest/gtest.h>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kv/kv_q8.h"

namespace pagoda::kv {
namespace {

using backend::cpu::KvPool;

float rounded(KvDtype dtype, float x) {
    if (dtype == KvDtype::f16) return f16_to_f32(f32_to_f16(x));
    if (dtype == KvDtype::bf16) return bf16_to_f32(f32_to_bf16(x));
    return x;
}

KvLayout small_layout(KvDtype dtype, int32_t block_size = 4) {
    KvLayout L;
    L.n_layers = 2;
    L.n_kv_heads = 3;
    L.head_dim = 5;
    L.block_size = block_size;
    L.dtype = dtype;
    return L;
}

TEST(KvPool, WriteReadRoundTripsThroughEachDtype) {
    for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16}) {
        KvLayout L = small_layout(dtype);
        KvPool pool(L, 6);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> dist(-3.f, 3.f);
        const int width = L.n_kv_heads * L.head_dim;
        std::vector<int64_t> slots = {0, 23, 5, -1, 12};  // -1 = padding, skipped
        std::vector<float> k(slots.size() * width), v(slots.size() * width);
        for (auto& x : k) x = dist(rng);
        for (auto& x : v) x = dist(rng);
        pool.write(1, slots.data(), int64_t(slots.size()), k.data(), v.data());
        std::vector<float> row(L.head_dim);
        for (size_t i = 0; i < slots.size(); ++i) {
            if (slots[i] < 0) continue;
            for (int h = 0; h < L.n_kv_heads; ++h) {
                pool.read_k(1, slots[i], h, row.data());
                for (int d = 0; d < L.head_dim; ++d) EXPECT_EQ(row[d], rounded(dtype, k[i * width + h * L.head_dim + d]));
                pool.read_v(1, slots[i], h, row.data());
                for (int d = 0; d < L.head_dim; ++d) EXPECT_EQ(row[d], rounded(dtype, v[i * width + h * L.head_dim + d]));
                pool.read_k(0, slots[i], h, row.data());  // other layer untouched (zero)
                for (int d = 0; d < L.head_dim; ++d) EXPECT_EQ(row[d], 0.0f);
            }
        }
    }
}

TEST(KvPool, StorageFollowsDocumentedBlockHeadSlotLayout) {
    KvLayout L = small_layout(KvDtype::f32, 8);
    KvPool pool(L, 4);
    const int width = L.n_kv_heads * L.head_dim;
    std::vector<float> k(width), v(width);
    for (int i = 0; i < width; ++i) k[i] = float(100 + i), v[i] = float(-100 - i);
    int64_t slot = 2 * 8 + 5;  // block 2, offset 5
    pool.write(0, &slot, 1, k.data(), v.data());
    const float* kd = reinterpret_cast<const float*>(pool.k_data(0));
    const float* vd = reinterpret_cast<const float*>(pool.v_data(0));
    for (int h = 0; h < L.n_kv_heads; ++h)
        for (int d = 0; d < L.head_dim; ++d) {
            size_t index = ((size_t(2) * L.n_kv_heads + h) * L.block_size + 5) * L.head_dim + d;
            EXPECT_EQ(kd[index], float(100 + h * L.head_dim + d));
            EXPECT_EQ(vd[index], float(-100 - h * L.head_dim - d));
        }
}

TEST(KvPool, CopyBlockCopiesEveryLayerKAndV) {
    KvLayout L = small_layout(KvDtype::bf16, 2);
    KvPool pool(L, 5);
    const int width = L.n_kv_heads * L.head_dim;
    std::vector<float> k(2 * width), v(2 * width);
    for (int i = 0; i < 2 * width; ++i) k[i] = float(i), v[i] = float(2 * i);
    int64_t slots[2] = {6, 7};  // block 3
    for (int layer = 0; layer < 2; ++layer) pool.write(layer, slots, 2, k.data(), v.data());
    pool.copy_block(3, 1);
    std::vector<float> a(L.head_dim), b(L.head_dim);
    for (int layer = 0; layer < 2; ++layer)
        for (int off = 0; off < 2; ++off)
            for (int h = 0; h < L.n_kv_heads; ++h) {
                pool.read_k(layer, 6 + off, h, a.data());
                pool.read_k(layer, 2 + off, h, b.data());
                EXPECT_EQ(a, b);
                EXPECT_EQ(a[0], float(off * width + h * L.head_dim));
                pool.read_v(layer, 6 + off, h, a.data());
                pool.read_v(layer, 2 + off, h, b.data());
                EXPECT_EQ(a, b);
            }
}

// prefetch_write is a hint: it changes no stored byte, and bad layers, slots and padding slots are
// skipped rather than read or thrown on.
TEST(KvPool, PrefetchWriteChangesNothingAndSkipsBadSlots) {
    KvLayout L = small_layout(KvDtype::q8);
    KvPool pool(L, 2);
    std::vector<float> k(size_t(L.n_kv_heads * L.head_dim)), v(k.size());
    for (size_t i = 0; i < k.size(); ++i) k[i] = float(i) - 3.5f, v[i] = 0.25f * float(i);
    const int64_t slot = 5;
    pool.write(1, &slot, 1, k.data(), v.data());
    std::vector<uint8_t> before(L.bytes_per_block() * 2), after(before.size());
    pool.export_block(0, std::span(before).first(L.bytes_per_block()));
    pool.export_block(1, std::span(before).subspan(L.bytes_per_block()));
    const int64_t slots[] = {5, -1, 8, 1 << 30, 0, 7};
    for (int32_t layer : {-1, 0, 1, 2}) pool.prefetch_write(layer, slots, 6);
    pool.export_block(0, std::span(after).first(L.bytes_per_block()));
    pool.export_block(1, std::span(after).subspan(L.bytes_per_block()));
    EXPECT_EQ(before, after);
}

TEST(KvPool, RejectsBadLayoutsSlotsAndBlocks) {
    KvLayout L = small_layout(KvDtype::f16);
    for (int bs : {0, 3, 12, 512, -4}) {
        KvLayout bad = L;
        bad.block_size = bs;
        EXPECT_THROW(KvPool(bad, 4), Error) << bs;
    }
    KvLayout no_heads = L;
    no_heads.n_kv_heads = 0;
    EXPECT_THROW(no_heads.validate(), Error);
    EXPECT_THROW(KvPool(L, 0), Error);
    KvPool pool(L, 2);
    std::vector<float> k(L.n_kv_heads * L.head_dim), v(k.size());
    int64_t slot = 8;  // 2 blocks x 4 slots = 0..7
    EXPECT_THROW(pool.write(0, &slot, 1, k.data(), v.data()), Error);
    slot = 0;
    EXPECT_THROW(pool.write(2, &slot, 1, k.data(), v.data()), Error);
    EXPECT_THROW(pool.copy_block(0, 2), Error);
    EXPECT_THROW(parse_kv_dtype("q4"), Error);
    EXPECT_THROW(parse_kv_dtype("Q8"), Error);
    EXPECT_EQ(parse_kv_dtype("bf16"), KvDtype::bf16);
    EXPECT_EQ(parse_kv_dtype("q8"), KvDtype::q8);
    EXPECT_STREQ(kv_dtype_name(KvDtype::q8), "q8");
}

// A prefill's rows stored on a thread pool: byte for byte what one thread stores, for every dtype
// (q8 included, whose rows carry a scale); and a bad slot anywhere in the step throws before any
// row is written (a worker must never throw).
TEST(KvPool, ThreadedWriteEqualsSerialAndRejectsBeforeWriting) {
    for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8}) {
        KvLayout L = small_layout(dtype, 16);
        const int32_t n_blocks = 12;
        const int64_t n = 150, width = int64_t(L.n_kv_heads) * L.head_dim;
        std::mt19937 rng(11);
        std::uniform_real_distribution<float> dist(-2.f, 2.f);
        std::vector<float> k(size_t(n * width)), v(k.size());
        for (auto& x : k) x = dist(rng);
        for (auto& x : v) x = dist(rng);
        std::vector<int64_t> slots(static_cast<size_t>(n));
        std::iota(slots.begin(), slots.end(), 20);
        std::shuffle(slots.begin(), slots.end(), rng);
        slots[7] = -1;  // padding stays unwritten
        KvPool serial(L, n_blocks), threaded(L, n_blocks);
        ThreadPool two(2);
        serial.write(1, slots.data(), n, k.data(), v.data());
        threaded.write(1, slots.data(), n, k.data(), v.data(), &two);
        const size_t layer_bytes = size_t(n_blocks) * L.layer_block_bytes();
        EXPECT_EQ(std::memcmp(serial.k_data(1), threaded.k_data(1), layer_bytes), 0) << kv_dtype_name(dtype);
        EXPECT_EQ(std::memcmp(serial.v_data(1), threaded.v_data(1), layer_bytes), 0) << kv_dtype_name(dtype);

        KvPool untouched(L, n_blocks), fresh(L, n_blocks);
        slots[n - 1] = int64_t(n_blocks) * L.block_size;  // one past the last slot
        EXPECT_THROW(untouched.write(1, slots.data(), n, k.data(), v.data(), &two), Error);
        EXPECT_EQ(std::memcmp(untouched.k_data(1), fresh.k_data(1), layer_bytes), 0) << kv_dtype_name(dtype);
    }
}

TEST(KvPool, BlocksForBudgetCountsKAndVOfAllLayers) {
    KvLayout L;
    L.n_layers = 32;
    L.n_kv_heads = 8;
    L.head_dim = 128;
    L.block_size = 16;
    L.dtype = KvDtype::f16;
    // One block: 2 (K,V) x 32 layers x 8 heads x 16 slots x 128 dims x 2 bytes = 2 MiB.
    EXPECT_EQ(L.bytes_per_block(), size_t(2) << 20);
    EXPECT_EQ(blocks_for_budget(uint64_t(1) << 30, L), 512);
    EXPECT_EQ(blocks_for_budget((uint64_t(2) << 20) - 1, L), 0);
    L.dtype = KvDtype::f32;
    EXPECT_EQ(blocks_for_budget(uint64_t(1) << 30, L), 256);
    EXPECT_EQ(blocks_for_budget(~uint64_t(0), L), int64_t(INT32_MAX));
    // q8: a row is 128 codes + a 4-byte scale = 132 bytes, so a block is 2 x 32 x 8 x 16 x 132.
    L.dtype = KvDtype::q8;
    EXPECT_EQ(L.row_bytes(), 132u);
    EXPECT_EQ(L.bytes_per_block(), size_t(2) * 32 * 8 * 16 * 132);
    EXPECT_EQ(blocks_for_budget(uint64_t(1) << 30, L), int64_t((uint64_t(1) << 30) / (size_t(2) * 32 * 8 * 16 * 132)));
    EXPECT_EQ(blocks_for_budget(uint64_t(1) << 30, L), 992);
    // Codes padded to 4 bytes before the scale: head_dim 5 -> 8 + 4, head_dim 8 -> 8 + 4.
    L.head_dim = 5;
    EXPECT_EQ(L.row_bytes(), 12u);
    L.head_dim = 8;
    EXPECT_EQ(L.row_bytes(), 12u);
    EXPECT_EQ(L.head_block_bytes(), 12u * 16);
}

// --- q8 ---

// Every element of a quantised row is within half a step of the input: |x - q * scale| <= scale / 2,
// scale = max|x| / 127, and the largest element maps to +-127.
TEST(KvQ8, QuantiseDequantiseRoundTripWithinHalfAStep) {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 200; ++trial) {
        const int n = 1 + trial % 130;
        const float range = std::ldexp(1.0f, trial % 40 - 20);  // 2^-20 .. 2^19
        std::uniform_real_distribution<float> dist(-range, range);
        std::vector<float> x(static_cast<size_t>(n)), back(static_cast<size_t>(n));
        for (auto& e : x) e = dist(rng);
        if (trial % 7 == 0) x[size_t(trial % n)] = 0.0f;
        std::vector<int8_t> q(static_cast<size_t>(n));
        const float scale = quantize_row_q8(x.data(), q.data(), n);
        float amax = 0;
        for (float e : x) amax = std::max(amax, std::fabs(e));
        EXPECT_EQ(scale, amax / 127.0f);
        dequantize_row_q8(q.data(), scale, back.data(), n);
        int at_max = 0;
        for (int i = 0; i < n; ++i) {
            ASSERT_GE(q[size_t(i)], -127);
            // Half a step, plus the float rounding of x / scale and of q * scale.
            EXPECT_LE(std::fabs(double(x[size_t(i)]) - double(back[size_t(i)])), double(scale) * (0.5 + 1e-5))
                << "trial " << trial << " element " << i;
            at_max += std::abs(q[size_t(i)]) == 127;
        }
        if (amax > 0) EXPECT_GE(at_max, 1) << "trial " << trial;
        else EXPECT_EQ(scale, 0.0f);
    }
}

TEST(KvQ8, ZeroRowsAndNonFiniteRows) {
    std::vector<float> x(9, 0.0f), back(9);
    std::vector<int8_t> q(9, 5);
    EXPECT_EQ(quantize_row_q8(x.data(), q.data(), 9), 0.0f);
    for (int8_t c : q) EXPECT_EQ(c, 0);
    x[3] = std::numeric_limits<float>::infinity();
    const float scale = quantize_row_q8(x.data(), q.data(), 9);
    dequantize_row_q8(q.data(), scale, back.data(), 9);
    for (float b : back) EXPECT_TRUE(std::isnan(b));  // poisoned, never plausible numbers
}

// The pool stores a q8 row as documented: codes, zero padding to 4 bytes, the fp32 scale; read_k
// and read_v give codes x scale.
TEST(KvQ8, PoolRowLayoutAndReadBack) {
    KvLayout L = small_layout(KvDtype::q8);  // head_dim 5: row = 5 codes + 3 pad + 4 scale
    KvPool pool(L, 3);
    ASSERT_EQ(L.row_bytes(), 12u);
    const int width = L.n_kv_heads * L.head_dim;
    std::vector<float> k(static_cast<size_t>(width)), v(static_cast<size_t>(width));
    for (int i = 0; i < width; ++i) k[size_t(i)] = float(i % 5) - 1.5f, v[size_t(i)] = 0.25f * float(i);
    int64_t slot = 1 * 4 + 2;  // block 1, offset 2
    pool.write(1, &slot, 1, k.data(), v.data());
    for (int h = 0; h < L.n_kv_heads; ++h) {
        const uint8_t* row = pool.k_data(1) + L.layer_block_bytes() + size_t(h) * L.head_block_bytes() + 2 * L.row_bytes();
        float scale;
        std::memcpy(&scale, row + 8, 4);
        EXPECT_EQ(scale, 2.5f / 127.0f);  // max |k| of every head's row is 2.5
        for (int pad = 5; pad < 8; ++pad) EXPECT_EQ(row[pad], 0);
        const int8_t want[5] = {-76, -25, 25, 76, 127};  // round(k / scale) for k = -1.5, -0.5, 0.5, 1.5, 2.5
        std::vector<float> got(5);
        pool.read_k(1, slot, h, got.data());
        for (int i = 0; i < 5; ++i) {
            EXPECT_EQ(int8_t(row[i]), want[i]) << i;
            EXPECT_EQ(got[size_t(i)], float(want[i]) * scale) << i;
        }
        pool.read_v(1, slot, h, got.data());
        const float v_scale = 0.25f * float(h * 5 + 4) / 127.0f;
        for (int i = 0; i < 5; ++i) EXPECT_NEAR(got[size_t(i)], 0.25f * float(h * 5 + i), v_scale / 2) << i;
    }
}

// Copy-on-write of a q8 block copies the scales with the codes: after a fork the copy reads back
// exactly as the original; writing a diverging token into the copy leaves the original untouched.
TEST(KvQ8, CopyBlockCopiesScalesForkThenDiverge) {
    KvLayout L = small_layout(KvDtype::q8, 4);
    KvPool pool(L, 4);
    const int width = L.n_kv_heads * L.head_dim;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-4.f, 4.f);
    std::vector<float> k(static_cast<size_t>(4 * width)), v(k.size());
    for (auto& x : k) x = dist(rng);
    for (auto& x : v) x = dist(rng);
    for (size_t i = 0; i < v.size(); ++i) v[i] *= float(1 + i / size_t(width));  // a different scale per token
    int64_t slots[4] = {8, 9, 10, 11};  // block 2
    for (int layer = 0; layer < 2; ++layer) pool.write(layer, slots, 4, k.data(), v.data());
    pool.copy_block(2, 0);
    std::vector<float> a(static_cast<size_t>(L.head_dim)), b(static_cast<size_t>(L.head_dim));
    auto expect_same = [&](int layer, int64_t s1, int64_t s2, bool same) {
        for (int h = 0; h < L.n_kv_heads; ++h) {
            pool.read_k(layer, s1, h, a.data());
            pool.read_k(layer, s2, h, b.data());
            EXPECT_EQ(a == b, same) << "k layer " << layer << " slots " << s1 << ", " << s2 << " head " << h;
            pool.read_v(layer, s1, h, a.data());
            pool.read_v(layer, s2, h, b.data());
            EXPECT_EQ(a == b, same) << "v layer " << layer << " slots " << s1 << ", " << s2 << " head " << h;
        }
    };
    for (int layer = 0; layer < 2; ++layer)
        for (int off = 0; off < 4; ++off) expect_same(layer, 8 + off, off, true);
    // The raw bytes (codes and scales) of every layer's K and V tile agree too.
    for (int layer = 0; layer < 2; ++layer) {
        EXPECT_EQ(std::memcmp(pool.k_data(layer), pool.k_data(layer) + 2 * L.layer_block_bytes(), L.layer_block_bytes()), 0);
        EXPECT_EQ(std::memcmp(pool.v_data(layer), pool.v_data(layer) + 2 * L.layer_block_bytes(), L.layer_block_bytes()), 0);
    }
    // Diverge: the copy's slot 3 gets another token (scaled 10x, so its scale differs).
    std::vector<float> k2(static_cast<size_t>(width)), v2(static_cast<size_t>(width));
    for (int i = 0; i < width; ++i) k2[size_t(i)] = 10.0f * k[size_t(i)], v2[size_t(i)] = -10.0f * v[size_t(i)];
    int64_t fork_slot = 3;
    pool.write(1, &fork_slot, 1, k2.data(), v2.data());
    expect_same(1, 11, 3, false);
    for (int off = 0; off < 3; ++off) expect_same(1, 8 + off, off, true);
    pool.read_k(1, 11, 0, a.data());  // the original still reads back its own token
    for (int i = 0; i < L.head_dim; ++i) EXPECT_NEAR(a[size_t(i)], k[size_t(3 * width + i)], 4.0f / 127.0f);
    pool.read_k(1, 3, 0, a.data());
    for (int i = 0; i < L.head_dim; ++i) EXPECT_NEAR(a[size_t(i)], k2[size_t(i)], 40.0f / 127.0f);
}

}  // namespace
}  // namespace pagoda::kv
