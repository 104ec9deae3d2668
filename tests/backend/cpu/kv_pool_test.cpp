#include "backend/cpu/kv_pool.h"

#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace pagoda::kv {
namespace {

using kernels::KvPool;

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
    EXPECT_THROW(parse_kv_dtype("q8"), Error);
    EXPECT_EQ(parse_kv_dtype("bf16"), KvDtype::bf16);
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
}

}  // namespace
}  // namespace pagoda::kv
